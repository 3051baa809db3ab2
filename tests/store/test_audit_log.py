"""The audit log: a row for every call and decision, written before the result returns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from guardrails import (
    ChokePoint,
    EscapeReason,
    Guardrails,
    GuardResult,
    Invocation,
    Outcome,
    Reason,
    Secret,
    ToolResult,
    TurnContext,
    Verdict,
    guard,
    tool,
)
from guardrails.audit import AUDITED, AuditLog, decode_escapes, decode_verdicts
from guardrails.middleware.tool_call import Stop
from guardrails.store import MemoryStore, SQLiteStore, Store
from tests._hostile import LoudStr, Shifty


@tool
def lookup(order_id: str) -> dict[str, str]:
    """Read an order."""
    return {"order": order_id, "status": "shipped"}


@tool
def broken(order_id: str) -> str:
    raise RuntimeError(f"database password=hunter2 rejected for {order_id}")


RAN: list[str] = []


@tool(effect=True, bind={"api_key": Secret("payments")})
def refund(order_id: str, api_key: str) -> str:
    RAN.append(order_id)
    return "refunded"


@guard(outcome="invalid_args")
def no_test_orders(call: Invocation) -> GuardResult | Verdict:
    if call.arguments.get("order_id", "").startswith("test-"):
        return GuardResult.rejected("test_order", params=("order_id",))
    return Verdict.PASS


class RowsAtReturn:
    """A recorder after the audit log: sees how many rows exist when each result is recorded."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.counts: list[int] = []

    def on_tool_result(self, result: ToolResult, /) -> None:
        self.counts.append(len(self.store.audit_rows(call_id=result.call_id)))

    def on_event(self, kind: str, payload: Any, /) -> None:
        pass


def _rails(store: Store, **options: Any) -> tuple[Guardrails, AuditLog, RowsAtReturn]:
    audit = AuditLog(store, **options)
    probe = RowsAtReturn(store)
    rails = Guardrails(
        [lookup, broken, refund],
        [no_test_orders],
        hooks=[audit],
        recorder=[audit, probe],
        secrets=lambda name: "sk-live-SECRET",
    )
    return rails, audit, probe


def test_every_tool_call_leaves_a_row_before_the_result_is_returned(store: Store) -> None:
    rails, audit, probe = _rails(store)
    turn = rails.turn(tenant="acme", session="s-1", agent="support", workflow="wf-9")
    calls = [
        ("lookup", {"order_id": "o-1"}),
        ("delete_database", {}),
        ("lookup", {}),
        ("lookup", {"order_id": "test-1"}),
        ("broken", {"order_id": "o-2"}),
        ("refund", {"order_id": "o-3"}),
    ]
    results = [turn.call(name, args) for name, args in calls]
    assert [r.outcome for r in results] == [
        Outcome.OK,
        Outcome.UNAVAILABLE,
        Outcome.INVALID_ARGS,
        Outcome.INVALID_ARGS,
        Outcome.ERROR,
        Outcome.OK,
    ]
    assert all(count >= 1 for count in probe.counts)
    rows = [r for r in audit.rows(kind="tool_call")]
    assert [r.call_id for r in rows] == [r.call_id for r in results]
    assert [r.outcome for r in rows] == [str(r.outcome) for r in results]
    assert [r.reason for r in rows][1:4] == ["unknown_tool", "missing_required", "guard"]
    assert {(r.tenant, r.session, r.agent, r.workflow) for r in rows} == {
        ("acme", "s-1", "support", "wf-9")
    }


def test_a_row_carries_context_verdicts_duration_and_the_exception_class(store: Store) -> None:
    rails, audit, _ = _rails(store)
    turn = rails.turn(tenant="acme", session="s-1", agent="support", workflow="wf-9")
    result = turn.call("broken", {"order_id": "o-2"})
    (row,) = audit.rows(call_id=result.call_id)
    assert (row.tenant, row.session, row.agent, row.workflow) == ("acme", "s-1", "support", "wf-9")
    assert (row.tool, row.outcome, row.verdict, row.reason) == ("broken", "error", "pass", "raised")
    assert row.exception == "RuntimeError" and row.error is None
    assert row.duration_us is not None and row.duration_us >= 0
    assert decode_verdicts(row) == [
        {"guard": "no_test_orders", "choke_point": "tool_call", "verdict": "pass",
         "reason": None, "enforced": True}
    ]  # fmt: skip
    assert AUDITED in result.flags


def test_exception_text_is_written_only_when_opted_in(store: Store) -> None:
    rails, audit, _ = _rails(store, exception_text=True)
    result = rails.call("broken", {"order_id": "o-2"})
    (row,) = audit.rows(call_id=result.call_id)
    assert row.error is not None and "hunter2" in row.error
    assert "hunter2" not in result.content


def test_argument_values_and_secrets_never_reach_a_row(store: Store) -> None:
    rails, audit, _ = _rails(store)
    rails.call("refund", {"order_id": "o-SENSITIVE"})
    rails.call("lookup", {"order_id": "o-SENSITIVE"})
    text = json.dumps([r.values() for r in audit.rows()])
    assert "sk-live-SECRET" not in text and "o-SENSITIVE" not in text


def test_an_effectful_call_writes_a_started_row_first(store: Store) -> None:
    rails, audit, _ = _rails(store)
    result = rails.call("refund", {"order_id": "o-4"})
    kinds = [r.kind for r in audit.rows(call_id=result.call_id)]
    assert kinds == ["call_started", "tool_call"]


def test_audit_unavailable_stops_an_effectful_tool_with_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "no-such-dir" / "audit.db")
    rails, _, _ = _rails(store)
    RAN.clear()
    result = rails.call("refund", {"order_id": "o-5"})
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.reason == "audit_unavailable"
    assert result.content == "This tool is not available now."
    assert RAN == []


def test_audit_unavailable_lets_a_read_only_tool_run_and_counts_an_escape(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "no-such-dir" / "audit.db")
    rails, _, _ = _rails(store)
    result = rails.call("lookup", {"order_id": "o-6"})
    assert result.outcome is Outcome.OK
    assert [(e.guard, e.reason) for e in result.escapes] == [
        ("audit", EscapeReason.AUDIT_UNAVAILABLE)
    ]


@dataclass
class Decision:
    verdict: Verdict
    verdicts: tuple[Any, ...] = ()
    escapes: tuple[Any, ...] = ()
    offered: tuple[str, ...] = ()
    text: str = "the user's words, never stored"
    extra: dict[str, Any] = field(default_factory=dict)


def test_pre_turn_and_post_run_decisions_are_rows_too() -> None:
    from guardrails import Escape, VerdictRecord

    store = MemoryStore()
    audit = AuditLog(store, clock=lambda: 42.0)
    record = VerdictRecord("allow_list", ChokePoint.PRE_TURN, Verdict.REJECT, "not_allowed")
    escape = Escape("triggers", ChokePoint.PRE_TURN, EscapeReason.RAISED, ValueError("x"))
    audit.on_event("pre_turn", Decision(Verdict.REJECT, (record,), (escape,), ("lookup",)))
    audit.on_event("post_run", Decision(Verdict.PASS))
    pre, post = audit.rows()
    assert (pre.kind, pre.verdict, pre.at) == ("pre_turn", "reject", 42.0)
    assert decode_verdicts(pre)[0]["guard"] == "allow_list"
    assert decode_escapes(pre) == [
        {
            "guard": "triggers",
            "choke_point": "pre_turn",
            "reason": "raised",
            "exception": "ValueError",
        }
    ]
    assert json.loads(pre.detail or "{}") == {"offered": ["lookup"]}
    assert (post.kind, post.verdict) == ("post_run", "pass")
    assert "never stored" not in json.dumps([r.values() for r in audit.rows()])


def test_outcomes_counts_calls_per_tool_and_outcome(store: Store) -> None:
    rails, audit, _ = _rails(store)
    for _ in range(3):
        rails.call("lookup", {"order_id": "o"})
    rails.call("lookup", {})
    assert audit.outcomes()[("lookup", "ok")] == 3
    assert audit.outcomes(tool="lookup")[("lookup", "invalid_args")] == 1


@pytest.mark.parametrize("n", [1200])
def test_rows_pages_through_more_rows_than_one_page(n: int) -> None:
    store = MemoryStore()
    audit = AuditLog(store)
    for _ in range(n):
        audit.on_event("post_run", Decision(Verdict.PASS))
    assert sum(1 for _ in audit.rows()) == n


def test_a_backstop_action_row_names_its_rule_tool_outcome_and_call() -> None:
    from guardrails.middleware.post_run import BackstopAction

    store = MemoryStore()
    audit = AuditLog(store)
    rails = Guardrails([lookup])
    result = rails.call("lookup", {"order_id": "o-secret"})
    audit.on_event(
        "backstop", BackstopAction("escalate", "lookup", {"order_id": "o-secret"}, result)
    )
    (row,) = audit.rows()
    assert (row.kind, row.call_id) == ("backstop", result.call_id)
    assert json.loads(row.detail or "{}") == {
        "guard": "escalate",
        "tool": "lookup",
        "outcome": "ok",
    }
    assert "o-secret" not in json.dumps(row.values())


def test_pre_turn_post_run_and_backstop_rows_carry_the_turn_context() -> None:
    from guardrails.rules import required_action

    store = MemoryStore()
    audit = AuditLog(store)
    rails = Guardrails(
        [lookup],
        [required_action("lookup", when=lambda run: True, arguments={"order_id": "o-1"})],
        hooks=[audit],
        recorder=[audit],
    )
    turn = rails.turn(tenant="acme", session="s-9", agent="support", workflow="wf-1")
    turn.pre_turn("where is my order?", ["lookup"])
    turn.post_run("I will look it up.")
    kinds = {row.kind: row for row in audit.rows()}
    assert {"pre_turn", "tool_call", "backstop", "post_run"} <= set(kinds)
    for row in kinds.values():
        assert (row.tenant, row.session, row.agent, row.workflow) == (
            "acme",
            "s-9",
            "support",
            "wf-1",
        )


def _result(**fields: Any) -> ToolResult:
    return ToolResult("c1", "lookup", Outcome.OK, "", Verdict.PASS, **fields)


def _invocation() -> Invocation:
    return Invocation("lookup", {}, {}, TurnContext(tenant="t"), "c1")


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_pipelines_codes_are_written_as_plain_text(outcome: Outcome) -> None:
    audit = AuditLog(MemoryStore())
    for verdict in Verdict:
        for reason in (None, *Reason):
            result = _result()._replace(outcome=outcome, verdict=verdict, reason=reason)
            row = audit.tool_row(result, None, None)
            assert (row.outcome, row.verdict, row.reason) == (outcome, verdict, reason)
            assert type(row.outcome) is str and type(row.verdict) is str
            assert reason is None or type(row.reason) is str


def test_codes_of_any_other_type_are_read_without_running_them() -> None:
    audit = AuditLog(MemoryStore())
    shifty = Shifty()
    result = _result()._replace(
        outcome=LoudStr("ok"), verdict=shifty, reason=LoudStr("hook_said_so")
    )
    row = audit.tool_row(result, None, None)
    assert (row.outcome, row.verdict, row.reason) == (
        "ok",
        "<not text: Shifty>",
        "hook_said_so",
    )
    assert type(row.outcome) is str and type(row.reason) is str
    assert shifty.asked == 0


def test_a_stop_with_a_hostile_reason_is_audited_and_flagged(tmp_path: Path) -> None:
    class Refuse:
        name = "refuse"

        def before(self, invocation: Invocation, /) -> Any:
            return Stop(Outcome.LIMIT, LoudStr("no"))

        def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
            return result

    with SQLiteStore(tmp_path / "audit.db") as store:
        audit = AuditLog(store)
        rails = Guardrails([lookup], hooks=[audit, Refuse()], recorder=[audit])
        result = rails.turn(tenant="t").call("lookup", {"order_id": "o-1"})
        assert result.flags == (AUDITED,) and result.outcome is Outcome.LIMIT
        (row,) = store.audit_rows()
        assert (row.outcome, row.reason) == ("limit", "no")
        assert json.loads(row.detail or "{}") == {"revision": rails.revision}


def test_the_flag_is_added_to_every_other_field_unchanged() -> None:
    audit = AuditLog(MemoryStore())
    result = _result(
        reason="r", params=("p",), value={"v": 1}, duration_ns=5, truncated=True, flags=("late",)
    )
    flagged = audit.after(_invocation(), result)
    assert type(flagged) is ToolResult
    assert flagged == result._replace(flags=("late", AUDITED))
    assert flagged.value is result.value
