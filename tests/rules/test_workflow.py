"""Step-gated workflows: the model cannot skip a step, and learns the next one only by succeeding."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, GuardResult, Invocation, Outcome, Verdict, tool
from guardrails.rules.workflow import Step, Workflow
from guardrails.store import MemoryStore, PostgresStore, SQLiteStore, Store

STEPS = [
    "start_building",
    "confirm_plan",
    "submit_for_review",
    "submit_final",
    "create_pull_request",
]
INSTRUCTIONS = {name: f"<<{name} done: instructions #{i}>>" for i, name in enumerate(STEPS)}
SENTENCE = "This tool is not available now."


def plan_has_tests(call: Invocation) -> GuardResult | Verdict:
    if "test" not in call.arguments.get("note", ""):
        return GuardResult.rejected("plan_without_tests", params=("note",))
    return Verdict.PASS


def _step_tool(name: str) -> Any:
    def step(note: str = "") -> None:
        if note == "explode":
            raise RuntimeError("step failed")

    return tool(step, name=name)


@tool
def read_docs(topic: str) -> str:
    return f"docs about {topic}"


def _workflow(store: Store) -> Workflow:
    steps = [
        Step(n, INSTRUCTIONS[n], check=plan_has_tests if n == "confirm_plan" else None)
        for n in STEPS
    ]
    return Workflow("release", steps, store)


def _rails(store: Store) -> tuple[Guardrails, Workflow]:
    flow = _workflow(store)
    rails = Guardrails(
        [*(_step_tool(n) for n in STEPS), read_docs], [flow.pre_turn_guard()], hooks=[flow]
    )
    return rails, flow


def _args(name: str) -> dict[str, str]:
    return {"note": "with tests"} if name == "confirm_plan" else {}


def test_the_chain_runs_in_order_and_each_success_returns_its_instructions(store: Store) -> None:
    rails, flow = _rails(store)
    turn = rails.turn(session="s-1")
    for name in STEPS:
        result = turn.call(name, _args(name))
        assert result.outcome is Outcome.OK
        assert result.content == INSTRUCTIONS[name]
    assert flow.current(turn.context) is None


def test_a_step_out_of_order_is_unavailable_and_reveals_nothing_later(store: Store) -> None:
    rails, flow = _rails(store)
    turn = rails.turn(session="s-1")
    for skipped in STEPS[1:]:
        result = turn.call(skipped, _args(skipped))
        assert (result.outcome, result.reason, result.content) == (
            Outcome.UNAVAILABLE,
            "out_of_order",
            SENTENCE,
        )
    assert flow.current(turn.context) == "start_building"


def test_a_rejected_check_is_invalid_args_and_the_phase_stays(store: Store) -> None:
    rails, flow = _rails(store)
    turn = rails.turn(session="s-1")
    turn.call("start_building", {})
    result = turn.call("confirm_plan", {"note": "ship it"})
    assert result.outcome is Outcome.INVALID_ARGS
    assert flow.current(turn.context) == "confirm_plan"
    assert INSTRUCTIONS["confirm_plan"] not in result.content


def test_a_failed_step_does_not_advance_the_phase(store: Store) -> None:
    rails, flow = _rails(store)
    turn = rails.turn(session="s-1")
    result = turn.call("start_building", {"note": "explode"})
    assert result.outcome is Outcome.ERROR
    assert flow.current(turn.context) == "start_building"


def test_sessions_have_their_own_phase_and_reset_starts_again() -> None:
    rails, flow = _rails(MemoryStore())
    one, two = rails.turn(session="a"), rails.turn(session="b")
    one.call("start_building", {})
    assert flow.current(one.context) == "confirm_plan"
    assert flow.current(two.context) == "start_building"
    assert flow.reset(one.context)
    assert flow.current(one.context) == "start_building"
    assert one.call("start_building", {}).outcome is Outcome.OK


def test_a_turn_without_a_session_cannot_run_a_step() -> None:
    rails, _ = _rails(MemoryStore())
    assert rails.call("start_building", {}).outcome is Outcome.UNAVAILABLE


def test_an_unreadable_phase_is_unavailable(tmp_path: Path) -> None:
    rails, _ = _rails(SQLiteStore(tmp_path / "missing" / "phase.db"))
    result = rails.turn(session="s").call("start_building", {})
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "store_unavailable")


def test_pre_turn_offers_only_the_current_step_among_the_step_tools() -> None:
    rails, _ = _rails(MemoryStore())
    turn = rails.turn(session="s-1")
    decision = turn.pre_turn("let's build")
    assert decision.offered == ("start_building", "read_docs")
    assert turn.call("confirm_plan", _args("confirm_plan")).reason == "not_offered"
    turn.call("start_building", {})
    assert rails.turn(session="s-1").pre_turn("next").offered == ("confirm_plan", "read_docs")


def test_pre_turn_refuses_the_turn_when_the_phase_cannot_be_read(tmp_path: Path) -> None:
    rails, _ = _rails(SQLiteStore(tmp_path / "missing" / "phase.db"))
    decision = rails.turn(session="s").pre_turn("go")
    assert decision.refused and decision.offered == ()


@settings(max_examples=60)
@given(st.lists(st.sampled_from(STEPS), max_size=12))
def test_no_call_sequence_ever_reveals_instructions_out_of_turn(calls: list[str]) -> None:
    rails, _ = _rails(MemoryStore())
    turn = rails.turn(session="s")
    expected = 0
    for name in calls:
        result = turn.call(name, _args(name))
        revealed = [n for n in STEPS if INSTRUCTIONS[n] in result.content]
        if expected < len(STEPS) and name == STEPS[expected]:
            assert result.outcome is Outcome.OK and revealed == [name]
            expected += 1
        else:
            assert result.outcome is Outcome.UNAVAILABLE and revealed == []


# -- across processes --------------------------------------------------------------

_ctx = multiprocessing.get_context("fork")


def _next_step_in_child(url: str, queue: Any) -> None:
    store: Store = SQLiteStore(url) if url.endswith(".db") else PostgresStore(url)
    rails, flow = _rails(store)
    turn = rails.turn(session="s-1")
    current = flow.current(turn.context)
    result = turn.call(str(current), _args(str(current)))
    queue.put((current, str(result.outcome), result.content))
    store.close()


def test_the_phase_survives_a_restart_and_is_shared_between_processes(shared_url: str) -> None:
    shared = shared_url
    first: Store = SQLiteStore(shared) if shared.endswith(".db") else PostgresStore(shared)
    rails, _ = _rails(first)
    rails.turn(session="s-1").call("start_building", {})
    first.close()
    queue = _ctx.Queue()
    for _ in range(2):
        child = _ctx.Process(target=_next_step_in_child, args=(shared, queue))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
    assert [queue.get(timeout=5) for _ in range(2)] == [
        ("confirm_plan", "ok", INSTRUCTIONS["confirm_plan"]),
        ("submit_for_review", "ok", INSTRUCTIONS["submit_for_review"]),
    ]
