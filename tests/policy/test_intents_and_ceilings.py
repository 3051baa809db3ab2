"""Intent gates (offered only when the user's input mentions the tool) and per-tool ceilings."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from guardrails import EscapeReason, Guardrails, Outcome, Verdict, tool
from guardrails.context import VerdictRecord
from guardrails.policy import Ceiling, Policy
from guardrails.store import Store
from guardrails.verdicts import ChokePoint, Reason


@tool
def transfer(amount: float) -> str:
    """Move money."""
    return "done"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return "found"


GATED = Policy(intents={"transfer": ["transfer", "send money", "pay"]})


def test_a_gated_tool_is_offered_only_when_the_input_mentions_it() -> None:
    rails = Guardrails([transfer, lookup], policy=GATED)
    quiet = rails.turn().pre_turn("what is my balance?")
    assert quiet.offered == ("lookup",) and quiet.withheld == {"transfer": ("policy:intent",)}
    for text in ("please TRANSFER 5", "Send  money to Bob", "ｐａｙ the bill"):
        decision = rails.turn().pre_turn(text)
        assert "transfer" in decision.offered, text


def test_matching_is_by_whole_words() -> None:
    rails = Guardrails([transfer, lookup], policy=GATED)
    assert "transfer" not in rails.turn().pre_turn("the payroll and transferable skills").offered


def test_without_pre_turn_a_gated_tool_is_refused_and_the_escape_counted() -> None:
    rails = Guardrails([transfer, lookup], policy=GATED)
    result = rails.call("transfer", {"amount": 1})
    assert result.outcome is Outcome.UNAVAILABLE and result.verdict is Verdict.REJECT
    assert [(e.guard, e.reason) for e in result.escapes] == [
        ("policy:transfer.intent", EscapeReason.NOT_CONFIGURED)
    ]
    assert rails.call("lookup", {"q": "x"}).ok


def test_input_labelled_by_hand_opens_the_gate() -> None:
    from guardrails.policy.attach import installed

    rails = Guardrails([transfer, lookup], policy=GATED)
    turn = rails.turn()
    installed(rails).label_user_input(turn, "transfer 5 please")  # type: ignore[union-attr]
    assert turn.call("transfer", {"amount": 5}).ok


def test_each_turn_has_its_own_intent() -> None:
    rails = Guardrails([transfer, lookup], policy=GATED)
    first = rails.turn(session="s")
    first.pre_turn("pay 5")
    second = rails.turn(session="s")
    second.pre_turn("hello")
    assert first.call("transfer", {"amount": 5}).ok
    assert second.call("transfer", {"amount": 5}).outcome is Outcome.UNAVAILABLE


# -- ceilings ---------------------------------------------------------------------------


def test_per_turn_ceiling_counts_calls_that_ran() -> None:
    rails = Guardrails([transfer], policy=Policy(ceilings={"transfer": Ceiling(per_turn=2)}))
    turn = rails.turn()
    assert turn.call("transfer", {"amount": "bad"}).outcome is Outcome.INVALID_ARGS
    assert [turn.call("transfer", {"amount": 1}).outcome for _ in range(3)] == [
        Outcome.OK,
        Outcome.OK,
        Outcome.LIMIT,
    ]
    refused = turn.call("transfer", {"amount": 1})
    assert [v.guard for v in refused.verdicts if v.verdict is Verdict.REJECT] == [
        "policy:transfer.ceiling"
    ]
    assert rails.turn().call("transfer", {"amount": 1}).ok


def test_per_session_ceiling_spans_turns_and_engines(store: Store) -> None:
    policy = Policy(ceilings={"transfer": Ceiling(per_session=2)})
    first = Guardrails([transfer])
    first.load_policy(policy, store=store)
    second = Guardrails([transfer])
    second.load_policy(policy, store=store)
    assert first.turn(session="s").call("transfer", {"amount": 1}).ok
    assert second.turn(session="s").call("transfer", {"amount": 1}).ok
    assert first.turn(session="s").call("transfer", {"amount": 1}).outcome is Outcome.LIMIT
    assert second.turn(session="other").call("transfer", {"amount": 1}).ok


def test_a_session_ceiling_without_a_session_refuses() -> None:
    rails = Guardrails([transfer], policy=Policy(ceilings={"transfer": Ceiling(per_session=5)}))
    result = rails.call("transfer", {"amount": 1})
    assert result.outcome is Outcome.LIMIT and result.escapes


def test_concurrent_calls_never_pass_the_ceiling(store: Store) -> None:
    calls: list[int] = []
    lock = threading.Lock()

    @tool
    def effect(n: int) -> str:
        """An effect."""
        with lock:
            calls.append(n)
        return "ok"

    rails = Guardrails([effect])
    rails.load_policy(Policy(ceilings={"effect": Ceiling(per_session=3)}), store=store)
    barrier = threading.Barrier(8)
    outcomes: list[Any] = []

    def work(n: int) -> None:
        barrier.wait()
        outcomes.append(rails.turn(session="s").call("effect", {"n": n}).outcome)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 3
    assert sorted(outcomes).count(Outcome.OK) == 3


def test_a_call_of_a_withheld_tool_carries_its_gates_reject_in_result_row_and_span(
    tmp_path: Any,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from guardrails.audit import AuditLog
    from guardrails.observe.telemetry import OpenTelemetryRecorder
    from guardrails.store import MemoryStore

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = MemoryStore()
    audit = AuditLog(store)
    spans = OpenTelemetryRecorder(tracer_provider=provider)
    rails = Guardrails([lookup, transfer], policy=GATED, hooks=[audit], recorder=[audit, spans])
    turn = rails.turn()
    turn.pre_turn("look up my balance")
    refused = turn.call("transfer", {"amount": 1})
    assert (refused.outcome, refused.reason) == (Outcome.UNAVAILABLE, Reason.NOT_OFFERED)
    assert refused.verdicts == (
        VerdictRecord(
            "policy:transfer.intent", ChokePoint.TOOL_CALL, Verdict.REJECT, "intent_not_mentioned"
        ),
    )
    [row] = [r for r in store.audit_rows() if r.kind == "tool_call"]
    assert (row.reason, json.loads(row.verdicts)) == (
        "not_offered",
        [
            {
                "guard": "policy:transfer.intent",
                "choke_point": "tool_call",
                "verdict": "reject",
                "reason": "intent_not_mentioned",
                "enforced": True,
            }
        ],
    )
    [span] = [s for s in exporter.get_finished_spans() if "transfer" in s.name]
    events = [dict(e.attributes or {}) for e in span.events]
    assert {(e.get("gen_ai.evaluation.name"), e.get("guardrails.reason")) for e in events} >= {
        ("policy:transfer.intent", "intent_not_mentioned")
    }
    # The format the docs pin.
    doc = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    assert row.verdicts.replace("transfer", "TOOL") in doc


def test_only_a_tool_a_gate_withheld_carries_a_gate_verdict() -> None:
    rails = Guardrails([lookup, transfer], policy=GATED)
    turn = rails.turn()
    turn.pre_turn("pay Ana")
    assert turn.call("transfer", {"amount": 1}).ok
    plain = Guardrails([lookup, transfer]).turn(offered=["lookup"])
    refused = plain.call("transfer", {"amount": 1})
    assert (refused.reason, refused.verdicts) == (Reason.NOT_OFFERED, ())


def test_hostile_names_and_texts_never_borrow_a_gates_verdict() -> None:
    class Name(str):
        def __hash__(self) -> int:
            raise RuntimeError("ran")

    rails = Guardrails([lookup, transfer], policy=GATED)
    turn = rails.turn()
    turn.pre_turn("x" * 1_000_000)  # mentions nothing: the gated tool is withheld
    assert turn.call("transfer", {"amount": 1}).verdicts[0].guard == "policy:transfer.intent"
    for name in (
        Name("transfer"),
        "trаnsfer",
        "ＴＲＡＮＳＦＥＲ",
    ):  # a subclass, a Cyrillic a, wide
        refused = turn.call(name, {"amount": 1})
        assert (refused.reason, refused.verdicts) == (Reason.UNKNOWN_TOOL, ())
    turn.pre_turn("and now transfer it")  # a later input of the turn mentions it
    assert turn.gated == {} and turn.call("transfer", {"amount": 1}).ok
