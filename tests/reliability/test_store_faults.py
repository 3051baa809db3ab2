"""Stores that fail under the effect-control hooks: real SQLite and PostgreSQL faults.

The faults are real: an SQLite file locked by another writer, an SQLite path
that cannot be opened, a PostgreSQL server that cannot be reached, and (with
``GUARDRAILS_POSTGRES_DSN``) server connections killed in the middle of a run.
For each hook: the documented outcome, the escape or reason recorded, the
tool not run where the SPEC says so, nothing raised to the caller, and only a
fixed sentence for the model.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrails import EscapeReason, Guardrails, Outcome, Reason, Tool, ToolResult
from guardrails.audit import AuditLog
from guardrails.effects import Idempotency, Snapshots
from guardrails.effects.paid import PaidCall, Usage
from guardrails.rules.session_ceiling import SessionCeiling
from guardrails.store import MemoryStore, SQLiteStore, Store, StoreUnavailable

SCHEMA = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}
DECLARED = ("item",)
UNREACHABLE_DSN = "postgresql://postgres@127.0.0.1:9/postgres"


class Runs:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, item: str) -> str:
        self.count += 1
        return f"stored {item}"


# -- the faults: each yields a store that fails on writes ------------------------------


def _locked_sqlite(tmp_path: Path) -> Iterator[Store]:
    path = tmp_path / "locked.db"
    store = SQLiteStore(path, busy_timeout=0.05)
    store.get("warm-up")  # creates the file and its tables
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield store
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        store.close()


def _unopenable_sqlite(tmp_path: Path) -> Iterator[Store]:
    store = SQLiteStore(tmp_path / "no-such-directory" / "store.db", busy_timeout=0.05)
    try:
        yield store
    finally:
        store.close()


class RawErrorStore(MemoryStore):
    """A third-party store that lets its driver's error through instead of StoreUnavailable."""

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("connection reset by peer")

    append = append_many = incr = reserve = settle = claim = complete = release = _fail
    put_snapshot = compare_and_set = _fail
    reserve_leased = renew_leases = settle_leased = _fail


def _raw_error_store(tmp_path: Path) -> Iterator[Store]:
    yield RawErrorStore()


def _unreachable_postgres(tmp_path: Path) -> Iterator[Store]:
    from guardrails.store import PostgresStore

    store = PostgresStore(UNREACHABLE_DSN, timeout=0.3, connect_timeout=1, min_size=0)
    try:
        yield store
    finally:
        store.close()


FAULTS: dict[str, Callable[[Path], Iterator[Store]]] = {
    "sqlite_locked": _locked_sqlite,
    "sqlite_unopenable": _unopenable_sqlite,
    "postgres_unreachable": _unreachable_postgres,
    "raw_driver_error": _raw_error_store,
}


@pytest.fixture(params=sorted(FAULTS))
def failing_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from FAULTS[request.param](tmp_path)


def test_every_fault_really_makes_the_store_refuse_writes(failing_store: Store) -> None:
    with pytest.raises((StoreUnavailable, ConnectionError)):
        failing_store.incr("probe")


def call(rails: Guardrails, driver: str, args: Any, name: str = "save", **ctx: Any) -> ToolResult:
    turn = rails.turn(**ctx)
    if driver == "sync":
        return turn.call(name, args)
    return asyncio.run(turn.acall(name, args))


def escape_reasons(result: ToolResult) -> list[tuple[str, EscapeReason]]:
    return [(e.guard, e.reason) for e in result.escapes]


# -- the hooks --------------------------------------------------------------------------


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_audit_log_down_keeps_an_effectful_tool_from_running(
    failing_store: Store, driver: str, ledger: Any
) -> None:
    runs = Runs()
    audit = AuditLog(failing_store)
    rails = Guardrails([Tool("save", runs, SCHEMA, effect=True)], hooks=[audit], recorder=[audit])

    result = call(rails, driver, {"item": "x"})

    counted = result.reason == Reason.AUDIT_UNAVAILABLE
    ledger.add("store_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("store_faults", result, DECLARED) == []
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.reason == Reason.AUDIT_UNAVAILABLE
    assert isinstance(result.exception, StoreUnavailable | ConnectionError)
    assert runs.count == 0
    assert ("audit", EscapeReason.AUDIT_UNAVAILABLE) in escape_reasons(result)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_audit_log_down_lets_a_read_only_tool_run_with_an_escape(
    failing_store: Store, driver: str, ledger: Any
) -> None:
    runs = Runs()
    audit = AuditLog(failing_store)
    rails = Guardrails([Tool("save", runs, SCHEMA)], hooks=[audit], recorder=[audit])

    result = call(rails, driver, {"item": "x"})

    counted = escape_reasons(result) == [("audit", EscapeReason.AUDIT_UNAVAILABLE)]
    ledger.add("store_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("store_faults", result, DECLARED) == []
    assert result.outcome is Outcome.OK and runs.count == 1
    assert escape_reasons(result) == [("audit", EscapeReason.AUDIT_UNAVAILABLE)]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_audit_log_down_for_refused_calls_is_a_counted_recorder_failure(
    failing_store: Store, driver: str, ledger: Any
) -> None:
    audit = AuditLog(failing_store)
    rails = Guardrails([Tool("save", Runs(), SCHEMA)], hooks=[audit], recorder=[audit])

    results = [
        call(rails, driver, {"item": "x"}, name="invented"),
        call(rails, driver, {"item": 5}),
        call(rails, driver, "not json"),
    ]

    for result in results:
        assert ledger.check("store_faults", result, DECLARED) == []
    assert [r.outcome for r in results] == [Outcome.UNAVAILABLE, *[Outcome.INVALID_ARGS] * 2]
    assert rails.recorder is not None and rails.recorder.failures == 3
    ledger.add("store_faults", faults_injected=3, faults_counted=rails.recorder.failures)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_idempotency_store_down_refuses_the_effect(
    failing_store: Store, driver: str, ledger: Any
) -> None:
    runs = Runs()
    tool = Tool("save", runs, SCHEMA, effect=True, options={"idempotency_key": "save-{item}"})
    rails = Guardrails([tool], hooks=[Idempotency(failing_store, wait=0.1)])

    result = call(rails, driver, {"item": "x"}, tenant="acme")

    counted = result.reason == Reason.STORE_UNAVAILABLE
    ledger.add("store_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("store_faults", result, DECLARED) == []
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.reason == Reason.STORE_UNAVAILABLE
    assert runs.count == 0


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_snapshot_store_down_keeps_the_mutation_from_happening(
    failing_store: Store, driver: str, ledger: Any
) -> None:
    runs = Runs()
    tool = Tool("save", runs, SCHEMA, effect=True, options={"snapshot": lambda args: {"before": 1}})
    rails = Guardrails([tool], hooks=[Snapshots(failing_store)])

    result = call(rails, driver, {"item": "x"})

    counted = result.reason == Reason.SNAPSHOT_FAILED
    ledger.add("store_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("store_faults", result, DECLARED) == []
    assert result.outcome is Outcome.ERROR
    assert result.reason == Reason.SNAPSHOT_FAILED
    assert runs.count == 0


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("fail_closed", [False, True], ids=["fail_open", "fail_closed"])
def test_session_ceiling_store_down_is_an_escape_or_a_limit(
    failing_store: Store, fail_closed: bool, driver: str, ledger: Any
) -> None:
    runs = Runs()
    ceiling = SessionCeiling(3, failing_store, fail_closed=fail_closed)
    rails = Guardrails([Tool("save", runs, SCHEMA)], hooks=[ceiling])

    result = call(rails, driver, {"item": "x"}, session="s1")

    counted = (
        result.outcome is Outcome.LIMIT
        if fail_closed
        else escape_reasons(result) == [("session_ceiling", EscapeReason.STORE_UNAVAILABLE)]
    )
    ledger.add("store_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("store_faults", result, DECLARED) == []
    if fail_closed:
        assert result.outcome is Outcome.LIMIT and runs.count == 0
    else:
        assert result.outcome is Outcome.OK and runs.count == 1
        assert escape_reasons(result) == [("session_ceiling", EscapeReason.STORE_UNAVAILABLE)]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_paid_call_store_down_stops_before_spending(
    failing_store: Store, driver: str, ledger: Any
) -> None:
    spent: list[str] = []

    def charge(item: str) -> dict[str, int]:
        spent.append(item)
        return {"tokens": 10}

    paid = PaidCall(failing_store, usage=lambda r: Usage(tokens_in=r["tokens"]), daily_cap=5.0)
    rails = Guardrails([Tool("save", paid.wrap(charge), SCHEMA, effect=True)])

    result = call(rails, driver, {"item": "x"})

    counted = result.outcome is not Outcome.OK and result.exception is not None
    ledger.add("store_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("store_faults", result, DECLARED) == []
    assert result.outcome is not Outcome.OK
    assert isinstance(result.exception, StoreUnavailable | ConnectionError)
    assert spent == []


# -- a real PostgreSQL server losing its connections mid-run ----------------------------


@pytest.fixture
def postgres_dsn(pg_dsn: str) -> str:
    """The test's own schema, its connections named so that only they are killed."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(pg_dsn, application_name=f"gr-kill-{uuid.uuid4().hex[:12]}")


def _terminate_other_backends(dsn: str) -> int:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    # Only this test's connections: other tests (and other runs) share the server.
    name = conninfo_to_dict(dsn)["application_name"]
    with psycopg.connect(dsn, autocommit=True, application_name="gr-killer") as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND application_name = %s",
            (name,),
        ).fetchall()
    return sum(1 for (done,) in rows if done)


@pytest.mark.postgres
def test_postgres_connections_killed_mid_run_are_recovered_or_refused(
    postgres_dsn: str, ledger: Any
) -> None:
    from guardrails.store import PostgresStore

    store = PostgresStore(postgres_dsn, timeout=2.0, max_size=2)
    runs = Runs()
    audit = AuditLog(store)
    tool = Tool("save", runs, SCHEMA, effect=True, options={"idempotency_key": "k-{item}"})
    rails = Guardrails([tool], hooks=[audit, Idempotency(store, wait=0.5)], recorder=[audit])
    tenant = f"kill-{os.getpid()}-{id(store)}"
    try:
        results = []
        killed = 0
        for i in range(30):
            if i % 5 == 4:
                killed += _terminate_other_backends(postgres_dsn)
            results.append(call(rails, "sync", {"item": str(i)}, tenant=tenant))
        assert killed > 0
        for result in results:
            assert ledger.check("store_faults", result, DECLARED) == []
            assert result.outcome in {Outcome.OK, Outcome.UNAVAILABLE}
            if result.outcome is Outcome.UNAVAILABLE:
                assert result.reason in {Reason.AUDIT_UNAVAILABLE, Reason.STORE_UNAVAILABLE}
        # Every effect ran at most once, and only when the call says ok.
        assert runs.count == sum(r.outcome is Outcome.OK for r in results)
        ledger.add("store_faults", faults_injected=killed, faults_counted=killed)
        ledger.add("store_faults", postgres_calls_ok=runs.count)
        for result in results:
            if result.reason is not None:
                ledger.add("store_faults", **{f"postgres_refused_{result.reason}": 1})
    finally:
        store.close()


# -- the step-gated workflow ----------------------------------------------------------


def workflow_rails(store: Store, runs: Runs) -> Guardrails:
    from guardrails.rules.workflow import Workflow

    flow = Workflow(
        "release",
        [("start_building", "Now call confirm_plan."), ("confirm_plan", "Now submit.")],
        store,
    )
    tools = [Tool(name, runs, SCHEMA) for name in ("start_building", "confirm_plan")]
    return Guardrails(tools, [flow.pre_turn_guard()], hooks=[flow])


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_workflow_store_down_never_hands_out_the_next_instructions(
    failing_store: Store, driver: str, ledger: Any
) -> None:
    runs = Runs()
    rails = workflow_rails(failing_store, runs)

    result = call(rails, driver, {"item": "x"}, name="start_building", session="s1")

    counted = result.reason == Reason.STORE_UNAVAILABLE
    ledger.add("store_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("store_faults", result, DECLARED) == []
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.reason == Reason.STORE_UNAVAILABLE
    assert "confirm_plan" not in result.content
    # Where the phase could be read, the step ran but its success was not
    # recorded; where it could not, the step did not run.
    assert runs.count in (0, 1)


def test_workflow_store_down_at_pre_turn_refuses_the_turn(failing_store: Store) -> None:
    rails = workflow_rails(failing_store, Runs())
    readable = _reads(failing_store)

    decision = rails.turn(session="s1").pre_turn("let us start")

    if readable:  # this fault breaks writes only: the phase is read, the first step offered
        assert decision.offered == ("start_building",) and decision.escapes == ()
    else:
        assert decision.refused and decision.offered == ()
        assert [e.guard for e in decision.escapes] == ["workflow:release"]


def _reads(store: Store) -> bool:
    try:
        store.get("probe")
    except Exception:
        return False
    return True
