"""Step-gated workflows: the model cannot skip a step, and learns the next one only by succeeding."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, GuardResult, Invocation, Outcome, Verdict, tool
from guardrails.errors import ConfigurationError
from guardrails.rules.workflow import Step, Workflow
from guardrails.store import MemoryStore, PostgresStore, SQLiteStore, Store
from tests._examples import examples

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


@settings(max_examples=examples(60))
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


# -- exactly once ------------------------------------------------------------------


def _held_rails(store: Store, entered: Any, release: Any) -> tuple[Guardrails, Workflow]:
    """The first step blocks inside the tool until ``release`` is set."""

    def start_building(note: str = "") -> None:
        entered.set()
        assert release.wait(60)

    flow = _workflow(store)
    steps = [tool(start_building), *(_step_tool(n) for n in STEPS[1:])]
    return Guardrails(steps, hooks=[flow]), flow


def test_a_step_running_in_one_call_is_in_progress_for_a_concurrent_call(store: Store) -> None:
    entered, release = threading.Event(), threading.Event()
    rails, flow = _held_rails(store, entered, release)
    results: list[Any] = []
    first = threading.Thread(
        target=lambda: results.append(rails.turn(session="s").call("start_building", {}))
    )
    first.start()
    assert entered.wait(60)
    second = rails.turn(session="s").call("start_building", {})
    assert (second.outcome, second.reason, second.content) == (
        Outcome.UNAVAILABLE,
        "in_progress",
        SENTENCE,
    )
    assert flow.running(rails.turn(session="s").context) == "start_building"
    release.set()
    first.join(60)
    assert results[0].outcome is Outcome.OK
    assert results[0].content == INSTRUCTIONS["start_building"]
    assert flow.current(rails.turn(session="s").context) == "confirm_plan"
    assert flow.running(rails.turn(session="s").context) is None


def test_a_failed_or_rejected_step_gives_the_phase_back(store: Store) -> None:
    rails, flow = _rails(store)
    turn = rails.turn(session="s")
    assert turn.call("start_building", {"note": "explode"}).outcome is Outcome.ERROR
    assert (flow.current(turn.context), flow.running(turn.context)) == ("start_building", None)
    assert turn.call("start_building", {}).outcome is Outcome.OK
    assert turn.call("confirm_plan", {"note": "no"}).outcome is Outcome.INVALID_ARGS
    assert turn.call("confirm_plan", _args("confirm_plan")).outcome is Outcome.OK


class _FailsToSave(MemoryStore):
    """Lets a step claim the phase, then cannot save the step's success."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def compare_and_set(self, key: str, expected: str | None, new: str, /) -> bool:
        if self.broken and expected is not None and expected.startswith("__running__:"):
            raise OSError("disk full")
        return super().compare_and_set(key, expected, new)


def test_a_step_whose_success_was_not_saved_never_runs_again_until_resolved() -> None:
    store = _FailsToSave()
    runs: list[str] = []

    def start_building(note: str = "") -> None:
        runs.append("ran")

    flow = _workflow(store)
    rails = Guardrails([tool(start_building), *(_step_tool(n) for n in STEPS[1:])], hooks=[flow])
    turn = rails.turn(session="s")
    store.broken = True
    lost = turn.call("start_building", {})
    assert (lost.outcome, lost.reason, lost.content) == (
        Outcome.UNAVAILABLE,
        "store_unavailable",
        SENTENCE,
    )
    store.broken = False
    again = turn.call("start_building", {})
    assert (again.outcome, again.reason) == (Outcome.UNAVAILABLE, "in_progress")
    assert runs == ["ran"]
    assert flow.running(turn.context) == "start_building"
    assert flow.resolve(turn.context, completed=True)
    assert flow.current(turn.context) == "confirm_plan"
    assert not flow.resolve(turn.context, completed=True)
    assert turn.call("confirm_plan", _args("confirm_plan")).outcome is Outcome.OK


def test_resolve_not_completed_lets_the_step_run_again() -> None:
    store = _FailsToSave()
    rails, flow = _rails(store)
    turn = rails.turn(session="s")
    turn.call("start_building", {})
    store.broken = True
    turn.call("confirm_plan", _args("confirm_plan"))
    store.broken = False
    assert flow.running(turn.context) == "confirm_plan"
    assert flow.resolve(turn.context, completed=False)
    assert turn.call("confirm_plan", _args("confirm_plan")).outcome is Outcome.OK


def test_step_tools_may_not_use_the_reserved_phase_names() -> None:
    for name in ("__done__", "__running__:x"):
        with pytest.raises(ConfigurationError, match="reserved"):
            Workflow("w", [(name, "go")], MemoryStore())


def _race_in_child(url: str, barrier: Any, queue: Any, marker: str) -> None:
    store: Store = SQLiteStore(url) if url.endswith(".db") else PostgresStore(url)

    def start_building(note: str = "") -> None:
        with open(marker, "a") as f:
            f.write("ran\n")

    flow = _workflow(store)
    rails = Guardrails([tool(start_building), *(_step_tool(n) for n in STEPS[1:])], hooks=[flow])
    barrier.wait(60)
    result = rails.turn(session="race").call("start_building", {})
    queue.put((str(result.outcome), result.reason, result.content))
    store.close()


def test_concurrent_processes_run_one_step_exactly_once(shared_url: str, tmp_path: Path) -> None:
    setup: Store = (
        SQLiteStore(shared_url) if shared_url.endswith(".db") else PostgresStore(shared_url)
    )
    _rails(setup)[1].reset(_rails(setup)[0].turn(session="race").context)
    setup.close()
    marker = str(tmp_path / "ran.txt")
    workers = 6
    barrier, queue = _ctx.Barrier(workers), _ctx.Queue()
    children = [
        _ctx.Process(target=_race_in_child, args=(shared_url, barrier, queue, marker))
        for _ in range(workers)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    results = [queue.get(timeout=5) for _ in range(workers)]
    oks = [r for r in results if r[0] == "ok"]
    assert oks == [("ok", None, INSTRUCTIONS["start_building"])]
    assert all(
        r[0] == "unavailable" and r[1] in ("in_progress", "out_of_order")
        for r in results
        if r[0] != "ok"
    )
    assert Path(marker).read_text() == "ran\n"
