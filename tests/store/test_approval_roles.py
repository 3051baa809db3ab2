"""The application role of a two-role PostgreSQL set-up opens, decides and uses approval
requests, and cannot delete them."""

from __future__ import annotations

import pytest

from guardrails.store import PostgresStore
from guardrails.store._approval_rows import ApprovalRecord

from ._pg_schema import grant, schema_of

pytestmark = pytest.mark.postgres


def test_the_application_role_decides_and_uses_approvals_but_cannot_delete_them(
    two_roles: tuple[str, str],
) -> None:
    import psycopg

    owner_dsn, app_dsn = two_roles
    with PostgresStore(owner_dsn) as owner:
        owner.migrate()
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(
            f'REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA "{schema_of(owner_dsn)}" FROM PUBLIC'
        )
    grant(owner_dsn, app_dsn)
    request = ApprovalRecord("id1", "t", "s", "pay", "d", "{}", None, 1.0, 100.0, "pending")
    with PostgresStore(app_dsn) as app:
        assert app.approval_admit(request, 1.0).state == "requested"
        assert app.approval_decide("id1", "approved", "alice", None, 2.0).status == "approved"
        assert app.approval_admit(request._replace(id="id2"), 3.0).state == "run"
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM guardrails_approvals")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("TRUNCATE guardrails_approvals")
