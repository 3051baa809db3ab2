"""PostgreSQL appends: the client hashes, the server checks the head and inserts.

The statements are read from the I/O-free operations of ``_pg_sql`` (what the
store would send), then run on a real server: an upgrade from the schema of
version 2 in place, rows of a process of the previous release chaining with
the new ones, a forged hash from the application role, and a row written
around the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from guardrails.store import AUDIT_COLUMNS, AuditRow, PostgresStore, StoreUnavailable
from guardrails.store import _pg_sql as sql
from guardrails.store._chain import GENESIS, content, link
from guardrails.store._migrations import migrations
from guardrails.store._pg_sql import Head, Result, Sql
from guardrails.store.verify import verify
from tests.store._pg_schema import at_version, grant

_CHANGED = "was changed or inserted out of order: its hash does not match the chain"


def _row(n: int) -> AuditRow:
    return AuditRow("tool_call", 1000.0 + n, f"c{n}", "acme", tool="t", outcome="ok", cost=0.5)


def _statements(steps: Any, answers: list[Result]) -> tuple[list[Sql], Any]:
    """Every statement ``steps`` sends, each answered by the next of ``answers``; and its value."""
    sent: list[Sql] = []
    answer: Any = None
    try:
        while True:
            sent.append(steps.send(answer))
            answer = answers[len(sent) - 1]
    except StopIteration as done:
        return sent, done.value


# -- what the store sends ------------------------------------------------------------------


def test_an_append_after_the_hint_sends_the_clients_hash_and_no_content() -> None:
    head = Head(7, "a" * 64)
    sent, found = _statements(sql.append(_row(1), head), [Result(1, [])])
    digest = link("a" * 64, 8, content(_row(1)))
    assert sent == [Sql(sql.APPEND, (digest, 7, "a" * 64, *_row(1).values()))]
    assert "sha256" not in sql.APPEND and "RETURNING id, hash) INSERT" in sql.APPEND
    assert found == Head(8, digest, False)


def test_a_head_that_moved_inserts_nothing_and_the_row_goes_after_the_locked_head() -> None:
    head = Head(7, "a" * 64)
    answers = [Result(0, []), Result(1, [(12, "b" * 64)])]
    sent, found = _statements(sql.append(_row(1), head), answers)
    text = content(_row(1))
    assert [s.text for s in sent] == [sql.APPEND, sql.APPEND_AFTER_HEAD]
    assert sent[1].params[:4] == (7, "a" * 64, link("a" * 64, 8, text), text)
    assert found == Head(12, "b" * 64, True)  # the next append skips the plain statement


def test_a_store_whose_head_moved_goes_straight_to_the_statement_that_reads_it() -> None:
    digest = link("a" * 64, 8, content(_row(1)))
    sent, found = _statements(
        sql.append(_row(1), Head(7, "a" * 64, True)), [Result(1, [(8, digest)])]
    )
    assert [s.text for s in sent] == [sql.APPEND_AFTER_HEAD]
    assert found == Head(8, digest, False)  # the head was back where it was left


def test_many_rows_are_one_call_with_the_clients_hashes_of_the_whole_chain() -> None:
    rows = [_row(n) for n in range(3)]
    sent, found = _statements(
        sql.append_many(rows, Head(4, "c" * 64)), [Result(1, [(7, "d" * 64, False)])]
    )
    (call,) = sent
    hint_id, hint_hash, hashes, texts, payload = call.params
    assert call.text == sql.APPEND_MANY and (hint_id, hint_hash) == (4, "c" * 64)
    assert texts == [content(r) for r in rows]
    expected, previous = [], "c" * 64
    for n, text in enumerate(texts, start=5):
        previous = link(previous, n, text)
        expected.append(previous)
    assert hashes == expected
    assert json.loads(payload) == [dict(zip(AUDIT_COLUMNS, r, strict=False)) for r in rows]
    assert found == Head(7, "d" * 64, False)


def test_more_rows_than_a_chunk_are_several_calls_each_after_the_head_the_last_one_answered() -> (
    None
):
    rows = [_row(n) for n in range(sql.CHUNK + 2)]
    answers = [
        Result(1, [(sql.CHUNK, "e" * 64, False)]),
        Result(1, [(sql.CHUNK + 2, "f" * 64, False)]),
    ]
    sent, found = _statements(sql.append_many(rows), answers)
    assert [len(s.params[2]) for s in sent] == [sql.CHUNK, 2]
    assert sent[1].params[:2] == (sql.CHUNK, "e" * 64)
    assert sent[1].params[2][0] == link("e" * 64, sql.CHUNK + 1, content(rows[-2]))
    assert found == Head(sql.CHUNK + 2, "f" * 64, False)


# -- on a real server -------------------------------------------------------------------------

# The single-row statement of the previous release (version 2 of the schema),
# which a process not yet upgraded keeps sending.
_COLUMNS = ", ".join(AUDIT_COLUMNS)
_PREVIOUS_APPEND = (
    "WITH head AS (UPDATE guardrails_audit_head SET id = id + 1, hash = CASE "
    "WHEN id = %s::bigint AND hash = %s THEN %s ELSE encode(sha256(convert_to("
    "hash || '|' || (id + 1)::text || '|' || %s, 'UTF8')), 'hex') END "
    "RETURNING id, hash) "
    f"INSERT INTO guardrails_audit (id, {_COLUMNS}, hash) "
    f"SELECT head.id, {', '.join('%s' for _ in AUDIT_COLUMNS)}, head.hash FROM head "
    "RETURNING id, hash"
)


def _previous_release(conn: Any, rows: list[AuditRow]) -> None:
    """Append as a process of the previous release does: its statement and its function."""
    first, *rest = rows
    text = content(first)
    conn.execute(_PREVIOUS_APPEND, (-1, GENESIS, "0" * 64, text, *first.values()))
    payload = json.dumps([dict(zip(AUDIT_COLUMNS, r, strict=False)) for r in rest])
    conn.execute(
        "SELECT guardrails_audit_append(%s, %s::jsonb)", ([content(r) for r in rest], payload)
    )


@pytest.mark.postgres
def test_a_version_2_schema_is_upgraded_in_place_and_old_and_new_rows_chain_together(
    pg_dsn: str,
) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        at_version(conn, 2)
        _previous_release(conn, [_row(n) for n in range(3)])
    with PostgresStore(pg_dsn) as store:
        store.append(_row(3))
        store.append_many([_row(4), _row(5)])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # an old process, still running
            _previous_release(conn, [_row(6), _row(7)])
        store.append(_row(8))
        store.append_many([_row(9), _row(10)])
        found = verify(store)
        assert [r.call_id for r in store.audit_rows()] == [f"c{n}" for n in range(11)]
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            versions = conn.execute("SELECT version FROM guardrails_schema ORDER BY 1").fetchall()
    assert found.ok and found.rows == 11 and found.unhashed == 0, found.line()
    assert versions == [(version,) for version, _ in migrations("postgres")]


@pytest.mark.postgres
@pytest.mark.parametrize("async_pool", [False, True], ids=["store threads", "async pool"])
async def test_a_row_written_around_the_store_is_chained_after_and_verify_names_it(
    pg_dsn: str, async_pool: bool
) -> None:
    import psycopg

    store = PostgresStore(pg_dsn, async_pool=async_pool)
    try:
        store.append_many([_row(0), _row(1)])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the next id, a hash of nothing
            conn.execute(
                "INSERT INTO guardrails_audit (id, kind, at, hash) VALUES (3, 'forged', 0, %s)",
                ("0" * 64,),
            )
        path = store.async_path()
        if path is None:
            assert store.append(_row(3)) == 4
            store.append_many([_row(4)])
        else:
            assert await path.call("append", _row(3)) == 4
            await path.append_many([_row(4)])
        store.append(_row(5))
        assert [r.id for r in store.audit_rows()] == [1, 2, 3, 4, 5, 6]
        found = verify(store)
    finally:
        await store.aclose()
    assert (found.ok, found.bad, found.problem) == (False, 3, _CHANGED)


@pytest.fixture
def app_store(two_roles: tuple[str, str]) -> Iterator[tuple[PostgresStore, str]]:
    owner_dsn, app_dsn = two_roles
    with PostgresStore(owner_dsn) as owner:
        owner.migrate()
    grant(owner_dsn, app_dsn)
    with PostgresStore(app_dsn) as app:
        yield app, app_dsn


@pytest.mark.postgres
def test_a_hash_the_application_role_forges_is_taken_by_the_server_and_named_by_verify(
    app_store: tuple[PostgresStore, str],
) -> None:
    # The server does not hash on the common path, so it cannot refuse a
    # forged hash: `guardrails audit verify` names the row.
    import psycopg

    app, app_dsn = app_store
    app.append_many([_row(0), _row(1)])
    head = app._head
    forged = AuditRow("tool_call", 9.0, "c2", "acme", outcome="error")
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        found = conn.execute(
            sql.APPEND_MANY,
            (
                head.id,
                head.hash,
                ["f" * 64],
                [content(forged)],
                json.dumps([dict(forged._asdict())]),
            ),
        ).fetchone()
        assert found == (3, "f" * 64, False)  # taken as sent
        with pytest.raises(psycopg.errors.RaiseException, match="1 rows, 2 hashes"):
            conn.execute(
                sql.APPEND_MANY,
                (
                    3,
                    "f" * 64,
                    ["f" * 64] * 2,
                    [content(forged)] * 2,
                    json.dumps([forged._asdict()]),
                ),
            )
    app.append(_row(3))
    result = verify(app)
    assert (result.ok, result.bad, result.problem) == (False, 3, _CHANGED)
    assert len(app.audit_rows()) == 4


@pytest.mark.postgres
def test_a_row_the_application_role_inserts_itself_is_chained_after_and_named_by_verify(
    app_store: tuple[PostgresStore, str],
) -> None:
    import psycopg

    app, app_dsn = app_store
    app.append(_row(0))
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO guardrails_audit (id, kind, at, hash) VALUES (2, 'forged', 0, %s)",
            ("e" * 64,),
        )
    assert app.append(_row(1)) == 3  # not refused on the id the forged row took
    app.append_many([_row(2)])
    result = verify(app)
    assert (result.ok, result.bad, result.problem) == (False, 2, _CHANGED)
    assert [r.kind for r in app.audit_rows()] == ["tool_call", "forged", "tool_call", "tool_call"]


@pytest.mark.postgres
def test_the_application_role_cannot_replace_the_append_function(
    app_store: tuple[PostgresStore, str],
) -> None:
    import psycopg

    app, app_dsn = app_store
    app.append(_row(0))
    for statement in (
        "CREATE OR REPLACE FUNCTION guardrails_audit_append(BIGINT, TEXT, TEXT[], TEXT[], JSON) "
        "RETURNS TABLE (head_id BIGINT, head_hash TEXT, moved BOOLEAN) LANGUAGE sql AS "
        "$$ SELECT 0::bigint, ''::text, false $$",
        "DROP FUNCTION guardrails_audit_append(BIGINT, TEXT, TEXT[], TEXT[], JSON)",
        "UPDATE guardrails_audit SET hash = 'x'",
    ):
        with (
            psycopg.connect(app_dsn, autocommit=True) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(statement)
    app.append_many([_row(1), _row(2)])
    assert verify(app).ok


def test_a_store_unavailable_that_is_not_a_collision_is_not_retried() -> None:
    class Lost(Exception):
        pass

    refused = StoreUnavailable("PostgreSQL store: Lost")
    refused.__cause__ = Lost()
    from guardrails.store.postgres import collided

    assert not collided(refused)


def test_a_store_whose_hint_fell_behind_sends_no_hashes_and_the_function_hashes() -> None:
    rows = [_row(0), _row(1)]
    sent, found = _statements(
        sql.append_many(rows, Head(4, "c" * 64, True)), [Result(1, [(6, "d" * 64, False)])]
    )
    assert sent[0].params[:4] == (4, "c" * 64, [], [content(r) for r in rows])
    assert found == Head(6, "d" * 64, False)


@pytest.mark.postgres
@pytest.mark.parametrize("hint", ["at the head", "behind the head"])
def test_the_function_hashes_rows_sent_without_hashes_after_the_head_it_locks(
    pg_dsn: str, hint: str
) -> None:
    with PostgresStore(pg_dsn) as store:
        store.append_many([_row(0), _row(1)])
        head = store._head if hint == "at the head" else Head(1, "0" * 64)
        store._head = head._replace(moved=True)
        store.append_many([_row(2), _row(3)])
        assert store._head.moved is (hint != "at the head")
        store.append(_row(4))
        found = verify(store)
    assert found.ok and found.rows == 5, found.line()


@pytest.mark.postgres
def test_a_hint_without_a_hash_counts_as_moved_and_the_function_hashes(pg_dsn: str) -> None:
    import psycopg

    with PostgresStore(pg_dsn) as store:
        store.append(_row(0))
        forged = _row(1)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            found = conn.execute(
                sql.APPEND_MANY,
                (1, None, ["f" * 64], [content(forged)], json.dumps([forged._asdict()])),
            ).fetchone()
        assert found is not None and found[2] is True and found[1] != "f" * 64
        assert verify(store).ok
