"""Attacks on a held call: hostile values in its arguments, hooks that change them,
two people deciding at once, a process killed after the approval was used, and a
row written with the store's own credentials."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate, Approvals
from guardrails.audit import AuditLog
from guardrails.store import MemoryStore, PostgresStore, SQLiteStore, Store
from guardrails.store.testing import postgres_dsn
from guardrails.verdicts import Outcome, model_sentence
from tests._hostile import CALLS, LoudFloat, LoudInt, LoudStr, Shifty, Unprintable

MARK = "sk-live-approval-attack"


class Lying:
    """Not JSON: its ``repr``, equality and iteration raise with the planted mark."""

    def __repr__(self) -> str:
        raise RuntimeError(MARK)

    def __eq__(self, other: object) -> bool:
        raise RuntimeError(MARK)

    __hash__ = None  # type: ignore[assignment]

    def __iter__(self) -> Any:
        raise RuntimeError(MARK)


class KeysRaise(dict):  # type: ignore[type-arg]
    """A dict whose own ``items``/``keys``/``__iter__`` raise: only dict storage may be read."""

    def items(self) -> Any:
        raise RuntimeError(MARK)

    def keys(self) -> Any:
        raise RuntimeError(MARK)

    def __iter__(self) -> Any:
        raise RuntimeError(MARK)


class Bench:
    """One approval-gated tool with a bound parameter, its runs, and the audit rows."""

    def __init__(self, store: Any, *hooks: Any) -> None:
        self.store = store
        self.ran: list[dict[str, Any]] = []

        @tool(approval="always", effect=True, bind={"accounts": "accounts"})
        def wipe(disk: Any, accounts: Any) -> str:
            self.ran.append({"disk": disk, "accounts": json.loads(json.dumps(accounts))})
            if isinstance(accounts, list):
                accounts.append("changed-by-the-tool")  # a tool that changes what it got
            return "wiped"

        audit = AuditLog(store)  # first: its row is the last thing a call does
        gate = ApprovalGate(store)
        self.engine = Guardrails([wipe], hooks=[audit, gate, *hooks], recorder=[audit])
        self.people = Approvals(store)

    def call(self, arguments: Any, accounts: Any = "acc-1", asynchronous: bool = False) -> Any:
        turn = self.engine.turn(tenant="t", session="s", values={"accounts": accounts})
        if asynchronous:
            return asyncio.run(turn.acall("wipe", arguments))
        return turn.call("wipe", arguments)

    def calls_audited(self) -> int:
        return sum(1 for row in self.store.audit_rows() if row.kind == "tool_call")


def _closed(result: Any) -> None:
    """What the model reads is a documented sentence and nothing of the attacker's."""
    assert result.outcome is not Outcome.OK
    assert MARK not in result.content
    assert result.content in {
        model_sentence(result.outcome),
        model_sentence(result.outcome, result.params),
    } or result.reason.startswith("approval_")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["call", "acall"])
@pytest.mark.parametrize(
    "arguments",
    [
        {"disk": LoudStr("sda")},
        {"disk": LoudInt(3)},
        {"disk": LoudFloat(1.5)},
        {"disk": Shifty()},
        {"disk": Unprintable()},
        {"disk": Lying()},
        {"disk": [Lying()]},
        {"disk": {"k": Lying()}},
        {"disk": math.nan},
        {"disk": {Shifty(): 1}},
    ],
    ids=lambda a: type(a["disk"]).__name__,
)
def test_hostile_model_arguments_of_a_held_call_store_no_request(
    arguments: dict[str, Any], asynchronous: bool
) -> None:
    CALLS.clear()
    bench = Bench(MemoryStore())
    result = bench.call(arguments, asynchronous=asynchronous)
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, "not_json")
    _closed(result)
    assert bench.people.list(None) == [] and bench.ran == []
    assert bench.calls_audited() == 1
    assert CALLS == {}


def test_a_dict_whose_own_methods_raise_is_read_from_its_storage() -> None:
    bench = Bench(MemoryStore())
    held = bench.call(KeysRaise(disk="sda"))
    assert held.reason == "approval_pending"
    [request] = bench.people.list()
    assert request.arguments == '{"accounts":"<bound>","disk":"sda"}'
    bench.people.approve(request.id, by="alice")
    assert bench.call({"disk": "sda"}).outcome is Outcome.OK  # one digest for both


@pytest.mark.parametrize("asynchronous", [False, True], ids=["call", "acall"])
@pytest.mark.parametrize(
    "bound",
    [math.nan, math.inf, {1, 2}, b"acc", Lying(), Shifty(), [Lying()], {"k": Lying()}, {1: "a"}],
    ids=lambda b: type(b).__name__,
)
def test_a_bound_value_with_no_json_text_is_held_closed_with_a_typed_error(
    bound: Any, asynchronous: bool
) -> None:
    bench = Bench(MemoryStore())
    result = bench.call({"disk": "sda"}, accounts=bound, asynchronous=asynchronous)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "hook_failed")
    _closed(result)
    assert isinstance(result.exception, TypeError)
    assert "'wipe' needs approval" in str(result.exception)
    assert MARK not in str(result.exception)
    assert bench.people.list(None) == [] and bench.ran == []
    assert bench.calls_audited() == 1
    assert all(MARK not in json.dumps(row._asdict()) for row in bench.store.audit_rows())


def test_a_bound_text_whose_methods_raise_has_the_digest_of_its_characters() -> None:
    CALLS.clear()
    bench = Bench(MemoryStore())
    assert bench.call({"disk": "sda"}, accounts=LoudStr("acc-1")).reason == "approval_pending"
    [request] = bench.people.list()
    bench.people.approve(request.id, by="alice")
    assert bench.call({"disk": "sda"}, accounts="acc-1").outcome is Outcome.OK
    assert CALLS == {}


class Meddler:
    """A hook after the gate that tries to change the arguments the gate approved."""

    def __init__(self) -> None:
        self.refused = 0

    def before(self, invocation: Any, /) -> None:
        for value in (invocation.arguments["accounts"], invocation.arguments):
            try:
                if isinstance(value, list):
                    value.append("added-by-a-hook")
                else:
                    value["accounts"] = ["added-by-a-hook"]
            except TypeError:
                self.refused += 1

    def after(self, invocation: Any, result: Any, /) -> Any:
        return result


@pytest.mark.parametrize("asynchronous", [False, True], ids=["call", "acall"])
@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_the_tool_receives_exactly_the_approved_bound_arguments(
    asynchronous: bool, nested: bool
) -> None:
    meddler = Meddler()
    bench = Bench(MemoryStore(), meddler)
    accounts = ["acc-1", {"id": "acc-2"}]
    disk: Any = {"name": "sda"} if nested else "sda"
    assert bench.call({"disk": disk}, accounts, asynchronous).reason == "approval_pending"
    [request] = bench.people.list()
    bench.people.approve(request.id, by="alice")
    assert bench.call({"disk": disk}, accounts, asynchronous).outcome is Outcome.OK
    assert bench.ran == [{"disk": disk, "accounts": ["acc-1", {"id": "acc-2"}]}]
    assert meddler.refused == 2  # the call that ran: both of its attempts refused
    assert accounts == ["acc-1", {"id": "acc-2"}]  # neither the hook nor the tool changed it
    # The context's value is what it was: the same call asks again under the same digest.
    assert bench.call({"disk": disk}, accounts, asynchronous).reason == "approval_pending"
    assert {r.digest for r in bench.people.list(None)} == {request.digest}


# -- two people, two processes --------------------------------------------------------


def _as_url(shared: str) -> str:
    """The fixture's location as the command line takes it (a postgresql:// URL)."""
    if shared.endswith(".db"):
        return shared
    from psycopg.conninfo import conninfo_to_dict

    base = postgres_dsn()
    assert base is not None and base.startswith(("postgresql://", "postgres://"))
    options = quote(str(conninfo_to_dict(shared)["options"]))
    return f"{base}{'&' if '?' in base else '?'}options={options}"


def _cli(url: str, verb: str, request_id: str, by: str) -> subprocess.Popen[str]:
    code = "import sys; from guardrails.cli import main; sys.exit(main(sys.argv[1:]))"
    url = _as_url(url)
    args = ["approvals", verb, request_id, "--by", by, "--store", url]
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _open(url: str) -> Store:
    if url.endswith(".db"):
        return SQLiteStore(url, busy_timeout=120.0)
    return PostgresStore(url, max_size=2, timeout=120.0, connect_timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("verbs", [("approve", "approve"), ("approve", "deny")])
def test_two_processes_deciding_one_request_at_once_decide_it_once(
    shared_url: str, verbs: tuple[str, str]
) -> None:
    store = _open(shared_url)
    bench = Bench(store)
    assert bench.call({"disk": "sda"}).reason == "approval_pending"
    [request] = bench.people.list()
    procs = [_cli(shared_url, verb, request.id, f"person-{i}") for i, verb in enumerate(verbs)]
    codes = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        codes.append(proc.returncode)
        assert MARK not in out + err
    assert sorted(codes) == [0, 1]
    winner = verbs[codes.index(0)]
    decided = bench.people.show(request.id)
    assert decided.decided_by == f"person-{codes.index(0)}"
    decisions = [row for row in store.audit_rows() if row.kind == "approval"]
    assert [row.outcome for row in decisions] == [decided.status]
    result = bench.call({"disk": "sda"})
    again = bench.call({"disk": "sda"})
    if winner == "approve":
        assert (result.outcome, again.reason) == (Outcome.OK, "approval_pending")
        assert len(bench.ran) == 1
    else:
        assert (result.reason, again.reason) == ("approval_denied", "approval_denied")
        assert bench.ran == []
    store.close()


# -- a process killed between the approval's use and the call's run -------------------

_CHILD = textwrap.dedent(
    """
    import sys
    from guardrails import Guardrails, tool
    from guardrails.approvals import ApprovalGate
    from guardrails.audit import AuditLog
    from guardrails.store import PostgresStore, SQLiteStore

    url, where, ledger = sys.argv[1:4]
    store = SQLiteStore(url) if url.endswith(".db") else PostgresStore(url)

    def pause(point):
        if point == where:
            print(point, flush=True)
            sys.stdin.read()  # the parent kills this process here

    class AfterTheGate:
        def before(self, invocation):
            pause("consumed")

        def after(self, invocation, result):
            return result

    @tool(approval="always", effect=True)
    def wipe(disk: str) -> str:
        pause("running")
        with open(ledger, "a") as f:
            f.write(disk + "\\n")
        return "wiped"

    audit = AuditLog(store)
    hooks = [audit, ApprovalGate(store), AfterTheGate()]
    engine = Guardrails([wipe], hooks=hooks, recorder=[audit])
    result = engine.turn(tenant="t", session="s").call("wipe", {"disk": "sda"})
    print(result.outcome.value, flush=True)
    """
)


def _child(url: str, where: str, ledger: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, url, where, str(ledger)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _ran(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("where", ["consumed", "running"])
def test_a_process_killed_after_using_the_approval_runs_the_call_at_most_once(
    shared_url: str, tmp_path: Path, where: str
) -> None:
    store = _open(shared_url)
    bench = Bench(store)  # only to open the request and decide it
    ledger = tmp_path / "ledger"
    first = _child(shared_url, "nowhere", ledger)
    assert first.communicate(timeout=120)[0].strip() == "unavailable"
    [request] = bench.people.list()
    bench.people.approve(request.id, by="alice")
    child = _child(shared_url, where, ledger)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == where  # at the chosen point
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    used = bench.people.show(request.id)
    assert (used.status, used.used_at is not None) == ("used", True)
    assert _ran(ledger) == []
    # The killed call left no tool_call row; the approval's use is its trace.
    assert [r.outcome for r in store.audit_rows() if r.kind == "tool_call"] == ["unavailable"]
    retry = _child(shared_url, "nowhere", ledger)
    assert retry.communicate(timeout=120)[0].strip() == "unavailable"  # asks again
    assert [r.status for r in bench.people.list(None)] == ["pending", "used"]
    assert _ran(ledger) == []
    store.close()


# -- a row written with the store's own credentials -----------------------------------

UNDECIDED_SQLITE = """
SELECT a.id FROM guardrails_approvals AS a
WHERE a.status IN ('approved', 'used') AND NOT EXISTS (
  SELECT 1 FROM guardrails_audit AS d
  WHERE d.kind = 'approval' AND d.outcome = 'approved'
    AND json_extract(d.detail, '$.request') = a.id)
"""
UNDECIDED_POSTGRES = """
SELECT a.id FROM guardrails_approvals AS a
WHERE a.status IN ('approved', 'used') AND NOT EXISTS (
  SELECT 1 FROM guardrails_audit AS d
  WHERE d.kind = 'approval' AND d.outcome = 'approved'
    AND d.detail::jsonb ->> 'request' = a.id)
"""
FORGE = "UPDATE guardrails_approvals SET status = 'approved', decided_by = 'alice' WHERE id = {}"


def _sql(url: str, statement: str, *params: str) -> list[Any]:
    if url.endswith(".db"):
        with sqlite3.connect(url) as db:
            return db.execute(statement.format("?"), params).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        cursor = db.execute(statement.format("%s"), params)
        return cursor.fetchall() if cursor.description else []


def test_a_row_approved_with_the_store_credentials_runs_and_the_audit_shows_it_undecided(
    shared_url: str,
) -> None:
    store = _open(shared_url)
    bench = Bench(store)
    assert bench.call({"disk": "sda"}).reason == "approval_pending"
    assert bench.call({"disk": "sdb"}).reason == "approval_pending"
    forged, honest = sorted(bench.people.list(), key=lambda r: r.arguments)
    _sql(shared_url, FORGE, forged.id)
    bench.people.approve(honest.id, by="bob")
    # The gate trusts the approvals table: the forged approval runs (docs/approvals.md).
    assert bench.call({"disk": "sda"}).outcome is Outcome.OK
    assert bench.call({"disk": "sdb"}).outcome is Outcome.OK
    # The decision rows are hash-chained: the documented query names the forged one.
    query = UNDECIDED_SQLITE if shared_url.endswith(".db") else UNDECIDED_POSTGRES
    assert [row[0] for row in _sql(shared_url, query)] == [forged.id]
    store.close()
