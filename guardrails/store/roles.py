"""PostgreSQL with two roles: an owner that migrates, an application role that cannot rewrite.

The owner role owns the schema and its tables and runs the migrations
(``PostgresStore(owner_dsn).migrate()``). The role the application connects
with gets only what the store's methods need: ``SELECT``/``INSERT`` on the
audit log (no ``UPDATE``, ``DELETE`` or ``TRUNCATE``, and, not being the
owner, no ``ALTER TABLE``, ``DISABLE TRIGGER`` or ``DROP``), the chain head it
advances, read-write access to the counters, budgets, leases, keys and
phases, reading, opening and deciding approval requests (never deleting them), and the functions the store calls. ``application_grants`` gives the statements to run as the owner.
"""

from __future__ import annotations

__all__ = ["application_grants"]

_READ_WRITE = (
    "guardrails_counters",
    "guardrails_budgets",
    "guardrails_leases",
    "guardrails_kv",
    "guardrails_idempotency",
)

# The functions the store calls (migrations 3, 4 and 7), with their argument types.
_FUNCTIONS = (
    "guardrails_audit_append(bigint, text, text[], text[], json)",
    "guardrails_reserve_leased(text, text, bigint, bigint, double precision, double precision)",
    "guardrails_put_snapshot(text, double precision, bytea)",
    "guardrails_approval_admit(text, text, text, text, text, text, text, text, "
    "double precision, double precision, double precision)",
)


def application_grants(role: str, schema: str = "public") -> list[str]:
    """The ``GRANT`` statements that let ``role`` use a store in ``schema``, and no more."""
    who, where = _ident(role), _ident(schema)

    def on(*tables: str) -> str:
        return ", ".join(f"{where}.{t}" for t in tables)

    return [
        f"GRANT USAGE ON SCHEMA {where} TO {who}",
        f"GRANT SELECT ON {on('guardrails_schema')} TO {who}",
        f"GRANT SELECT, INSERT ON {on('guardrails_audit', 'guardrails_snapshots')} TO {who}",
        f"GRANT SELECT, UPDATE ON {on('guardrails_audit_head')} TO {who}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {on(*_READ_WRITE)} TO {who}",
        # Approval requests are decided and used in place, never deleted.
        f"GRANT SELECT, INSERT, UPDATE ON {on('guardrails_approvals')} TO {who}",
        # Granted by name, not left to PUBLIC: a database may revoke that default.
        f"GRANT EXECUTE ON FUNCTION {', '.join(f'{where}.{f}' for f in _FUNCTIONS)} TO {who}",
    ]


def _ident(name: str) -> str:
    """A quoted SQL identifier."""
    if not name or "\x00" in name:
        raise ValueError(f"not a PostgreSQL identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'
