"""A store call past its deadline counts as the store being unavailable."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from guardrails import Guardrails, Outcome, tool
from guardrails.audit import AuditLog
from guardrails.errors import ConfigurationError
from guardrails.store import AuditRow, MemoryStore, StoreUnavailable, WithDeadline, open_store
from guardrails.verdicts import EscapeReason, Reason

GENEROUS = 30.0  # how long a stuck call waits before giving up on its own (never reached)


class Stuck(MemoryStore):
    """A store whose appends wait until the test lets them go."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.entered = threading.Event()

    def append(self, row: AuditRow, /) -> int:
        self.entered.set()
        self.go.wait(GENEROUS)
        return super().append(row)


@pytest.fixture
def stuck() -> Any:
    store = Stuck()
    yield store
    store.go.set()


RAN: list[str] = []


@tool(effect=True)
def send(to: str) -> str:
    RAN.append(to)
    return "sent"


@tool
def look(q: str) -> str:
    RAN.append(q)
    return "seen"


def _rails(store: Any) -> Guardrails:
    RAN.clear()
    audit = AuditLog(WithDeadline(store, 0.05))
    return Guardrails([send, look], hooks=[audit], recorder=[audit])


def test_an_effect_does_not_run_when_the_audit_store_is_past_its_deadline(stuck: Stuck) -> None:
    result = _rails(stuck).call("send", {"to": "x"})
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, Reason.AUDIT_UNAVAILABLE)
    assert RAN == []


def test_a_read_only_tool_runs_with_a_counted_escape(stuck: Stuck) -> None:
    result = _rails(stuck).call("look", {"q": "x"})
    assert (result.outcome, result.content) == (Outcome.OK, "seen")
    assert [(e.guard, e.reason) for e in result.escapes] == [
        ("audit", EscapeReason.AUDIT_UNAVAILABLE)
    ]
    assert isinstance(result.escapes[0].exception, StoreUnavailable)


def test_a_call_that_had_not_started_by_its_deadline_never_runs(stuck: Stuck) -> None:
    store = WithDeadline(stuck, 0.05, threads=1)
    with pytest.raises(StoreUnavailable, match="deadline"):
        store.append(AuditRow("first", 1.0))  # holds the only thread
    with pytest.raises(StoreUnavailable, match="deadline"):
        store.append(AuditRow("second", 2.0))  # queued behind it, then cancelled
    stuck.go.set()
    assert store.audit_rows(kind="first")  # the started one finished late
    assert store.audit_rows() == store.audit_rows(kind="first")
    store.close()


def test_a_store_within_its_deadline_answers_as_usual() -> None:
    store = WithDeadline(MemoryStore(), GENEROUS)
    assert store.append(AuditRow("tool_call", 1.0)) == 1
    assert store.reserve_leased("k", "h", 1, 5, 0.0, 1.0) and store.budget("k") == (0, 1)
    assert store.claim("k", "o", 0.0, 1.0).state == "new"
    assert store.put_snapshot("s", b"x", 1.0) == 1 and store.snapshot("s") is not None
    assert [h for _, h in store.audit_chain()] == [h for _, h in store.store.audit_chain()]
    store.close()


def test_a_store_error_inside_the_deadline_is_passed_through() -> None:
    class Down(MemoryStore):
        def incr(self, key: str, by: int = 1, /) -> int:
            raise StoreUnavailable("down")

    with pytest.raises(StoreUnavailable, match="down"):
        WithDeadline(Down(), GENEROUS).incr("k")


def test_open_store_wraps_with_a_deadline_when_asked(tmp_path: Any) -> None:
    store = open_store(str(tmp_path / "d.db"), deadline=2.0)
    assert isinstance(store, WithDeadline) and store.seconds == 2.0
    store.close()
    assert not isinstance(open_store("memory:"), WithDeadline)


@pytest.mark.parametrize(("seconds", "threads"), [(0, 1), (-1.0, 1), (1.0, 0)])
def test_a_deadline_must_be_positive(seconds: float, threads: int) -> None:
    with pytest.raises(ConfigurationError, match="WithDeadline"):
        WithDeadline(MemoryStore(), seconds, threads=threads)


def test_every_store_method_goes_through_the_deadline() -> None:
    from guardrails.store import Store

    names = {n for n in dir(Store) if not n.startswith("_")}
    assert names <= set(dir(WithDeadline))
