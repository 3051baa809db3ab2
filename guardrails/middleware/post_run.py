"""The post_run choke-point: the backstop, after the run.

The guards registered ``at="post_run"`` see a ``RunRecord`` (every tool call of
the turn with its outcome and value, the final text, the structured output,
the context) through the same boundary as every guard. An enforced reject
carrying ``Perform`` makes the backstop call that tool through ``turn.call``,
so the tool_call guards, hooks and recorders apply; each such action is
counted, recorded (``on_event("backstop", action)``) and attempted at most once
per rule and turn, whatever its outcome. An enforced reject carrying
``Rewrite`` overwrites fields of the structured output; every overwrite is in
the report with its old and new value.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._aio import owes_record, to_the_end
from .._json_depth import deeper_than
from ..context import Escape, ToolResult, TurnContext, VerdictRecord
from ..guard import GuardOutcome
from ..observe.recorder import asafe_record, safe_record
from ..text import content_text
from ..verdicts import ChokePoint, Outcome, Verdict
from . import _paths
from ._evidence import Change, Perform, Rewrite
from ._run_record import RunRecord
from .admission import MAX_DEPTH
from .pre_turn import arun_guards, run_guards, tally

if TYPE_CHECKING:
    from ._turn import TurnLike as Turn

__all__ = [
    "BACKSTOP_COUNTER",
    "BackstopAction",
    "PostRunReport",
    "RunRecord",
    "apost_run",
    "post_run",
]

_POST_RUN = ChokePoint.POST_RUN
# The key of ``Turn.counters`` that counts backstop actions.
BACKSTOP_COUNTER = "backstop"

# Why structured output could not be read (RunRecord.structured_error).
NOT_JSON = "not_json"
NOT_AN_OBJECT = "not_an_object"
TOO_DEEP = "too_deep"


@dataclass(frozen=True, slots=True)
class BackstopAction:
    """One tool call the backstop made (``result``), or declined to repeat (``None``)."""

    guard: str
    tool: str
    arguments: Mapping[str, Any]
    result: ToolResult | None
    context: TurnContext | None = None

    @property
    def outcome(self) -> Outcome | None:
        return None if self.result is None else self.result.outcome


@dataclass(frozen=True, slots=True)
class PostRunReport:
    """What post_run decided and did.

    ``structured`` is the structured output after every rewrite (the input is
    not modified); ``changes`` lists each overwrite with its old and new value.
    """

    verdict: Verdict
    verdicts: tuple[VerdictRecord, ...]
    escapes: tuple[Escape, ...]
    actions: tuple[BackstopAction, ...]
    changes: tuple[Change, ...]
    text: str | None
    structured: Mapping[str, Any] | None
    context: TurnContext | None = None

    def verdict_of(self, guard: str) -> VerdictRecord | None:
        return next((r for r in self.verdicts if r.guard == guard), None)


# -- the two drivers ------------------------------------------------------------


def post_run(turn: Turn, output: Any = None, *, structured: Any = None) -> PostRunReport:
    """Check the run of ``turn`` and act as its backstop (sync)."""
    run = run_record(turn, output, structured)
    outcomes = run_guards(turn.engine.guards_at(_POST_RUN), run, _POST_RUN)
    actions = []
    for guard, perform in _planned(outcomes):
        with _Backstop(turn, guard, perform) as backstop:
            if backstop.go:
                backstop.result = turn.call(perform.tool, dict(perform.arguments))
        actions.append(backstop.action)
    report = _finish(turn, run, outcomes, actions)
    safe_record(turn.engine.recorder, "post_run", report)
    return report


async def apost_run(turn: Turn, output: Any = None, *, structured: Any = None) -> PostRunReport:
    """Check the run of ``turn`` and act as its backstop (async)."""
    run = run_record(turn, output, structured)
    outcomes = await arun_guards(turn.engine.guards_at(_POST_RUN), run, _POST_RUN)
    actions = []
    for guard, perform in _planned(outcomes):
        async with _Backstop(turn, guard, perform) as backstop:
            if backstop.go:
                backstop.result = await turn.acall(perform.tool, dict(perform.arguments))
        actions.append(backstop.action)
    report = _finish(turn, run, outcomes, actions)
    await asafe_record(turn.engine.recorder, "post_run", report)
    return report


class _Backstop:
    """One backstop action around the call: once per rule and turn, counted, recorded.

    The offer restricts the model, not the developer's code: for the call the
    tool is added to what the turn offered, and the offer is restored after.
    """

    __slots__ = ("_offered", "action", "go", "guard", "perform", "result", "turn")

    def __init__(self, turn: Turn, guard: str, perform: Perform) -> None:
        self.turn, self.guard, self.perform = turn, guard, perform
        self.result: ToolResult | None = None
        self._offered = turn.offered
        key = f"{BACKSTOP_COUNTER}:{guard}:{perform.tool}"
        # Attempted at most once per rule and turn: a tool that fails is not
        # called again by a second post_run of the same turn.
        self.go = key not in turn.counters
        turn.counters[key] = turn.counters.get(key, 0) + 1

    def __enter__(self) -> _Backstop:
        if self.go:
            counters = self.turn.counters
            counters[BACKSTOP_COUNTER] = counters.get(BACKSTOP_COUNTER, 0) + 1
            if self._offered is not None:
                self.turn.offer(self._offered | {self.perform.tool})
        return self

    def __exit__(self, *exc: object) -> None:
        safe_record(self.turn.engine.recorder, "backstop", self._close())

    async def __aenter__(self) -> _Backstop:
        return self.__enter__()

    async def __aexit__(self, kind: type[BaseException] | None, exc: Any, tb: Any) -> None:
        """``__exit__`` for ``apost_run``: the action is recorded off the event loop (to
        its end, even past a cancellation); after a stop of the process, at once."""
        action = self._close()
        recorder = self.turn.engine.recorder
        if exc is None or owes_record(exc):
            await to_the_end(asafe_record(recorder, "backstop", action))
        else:
            safe_record(recorder, "backstop", action)

    def _close(self) -> BackstopAction:
        self.turn.offered = self._offered
        self.action = BackstopAction(
            self.guard, self.perform.tool, self.perform.arguments, self.result, self.turn.context
        )
        return self.action


# -- pure parts -------------------------------------------------------------------


def run_record(turn: Turn, output: Any, structured: Any) -> RunRecord:
    """The ``RunRecord`` of ``turn`` with its final output.

    ``output`` may be the final text, the structured output (a mapping), or a
    message (an object, or a dict with ``role``) whose ``content`` blocks hold
    the text; ``structured`` may be a mapping, a pydantic model or JSON text.
    """
    text: str | None = None
    if isinstance(output, str):
        text = output
    elif isinstance(output, Mapping) and "role" not in output:
        # A mapping is the structured output, unless it is a message.
        structured = output if structured is None else structured
    elif output is not None:
        content = (
            output.get("content")
            if isinstance(output, Mapping)
            else getattr(output, "content", None)
        )
        text = content_text(content)
    parsed, error = _structured(structured)
    return RunRecord(tuple(turn.results), text, parsed, turn.context, error, turn)


def _structured(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, str | bytes | bytearray):
        if deeper_than(value, MAX_DEPTH + 1):  # found before the parser recurses
            return None, TOO_DEEP
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None, NOT_JSON
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if not isinstance(value, Mapping):
        return None, NOT_AN_OBJECT
    # A private copy: rewrites never modify what the caller passed.
    try:
        return copy.deepcopy(dict(value)), None
    except RecursionError:  # nested deeper than a copy can follow
        return None, TOO_DEEP


def _planned(outcomes: Sequence[GuardOutcome]) -> list[tuple[str, Perform]]:
    return [
        (record.guard, record.evidence)
        for record, _, _ in outcomes
        if record.verdict is Verdict.REJECT and record.enforced and type(record.evidence) is Perform
    ]


def _rewrite(
    structured: Mapping[str, Any] | None, outcomes: Sequence[GuardOutcome]
) -> tuple[Mapping[str, Any] | None, tuple[Change, ...]]:
    rewrites = [
        record.evidence
        for record, _, _ in outcomes
        if record.verdict is Verdict.REJECT and record.enforced and type(record.evidence) is Rewrite
    ]
    if structured is None or not rewrites:
        return structured, ()
    out = copy.deepcopy(dict(structured))
    changes: list[Change] = []
    for rewrite in rewrites:
        for change in rewrite.changes:
            try:
                _paths.put(out, change.path, change.new)
            except (LookupError, ValueError):
                continue
            changes.append(change)
    return out, tuple(changes)


def _finish(
    turn: Turn, run: RunRecord, outcomes: Sequence[GuardOutcome], actions: list[BackstopAction]
) -> PostRunReport:
    records, escapes, verdict = tally(outcomes)
    structured, changes = _rewrite(run.structured, outcomes)
    report = PostRunReport(
        verdict, records, escapes, tuple(actions), changes, run.text, structured, turn.context
    )
    return report
