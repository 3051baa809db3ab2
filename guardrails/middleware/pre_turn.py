"""The pre_turn choke-point: what the model is offered, before it is called.

The guards registered ``at="pre_turn"`` see a ``PreTurnRequest`` (the user's
text, the candidate tool names, the turn context) through the same boundary as
every guard (``Guard.evaluate``). An enforced reject carrying a ``Restrict``
takes tools out of the offer; any other enforced reject refuses the turn, with
the reject's reason as the code the caller can show. What is offered is
remembered on the turn (``Turn.offer``), so tool_call answers ``unavailable``
for the rest.

Under ``apre_turn`` (and ``apost_run``, which shares the runner) a sync guard
whose function reads a store says so with a ``reads_store`` attribute (the
store): ``Guard.aevaluate`` runs it on that store's threads (``store.offloop``),
never on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..context import Escape, TurnContext, VerdictRecord
from ..errors import UsageError
from ..guard import Guard, GuardOutcome
from ..observe.recorder import asafe_record, safe_record
from ..text import Text, user_text
from ..tools import Tool
from ..verdicts import ChokePoint, Verdict, combine
from ._evidence import Restrict
from ._pre_turn_request import PreTurnRequest

if TYPE_CHECKING:
    from ._turn import TurnLike as Turn

__all__ = [
    "PreTurnDecision",
    "PreTurnRequest",
    "Refusal",
    "apre_turn",
    "arun_guards",
    "gate_records",
    "pre_turn",
    "run_guards",
    "tool_name",
]

_PRE_TURN = ChokePoint.PRE_TURN
_EMPTY: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Refusal:
    """The turn is refused: ``code`` is for the caller to show; ``guard`` decided it."""

    code: str
    guard: str


@dataclass(frozen=True, slots=True)
class PreTurnDecision:
    """What pre_turn decided.

    ``tools`` are the offered tools in the format the caller passed them;
    ``offered`` their names; ``withheld`` maps each candidate not offered to
    the guards that withheld it. A refused turn offers nothing.
    """

    tools: tuple[Any, ...]
    offered: tuple[str, ...]
    refusal: Refusal | None
    verdict: Verdict
    verdicts: tuple[VerdictRecord, ...] = ()
    escapes: tuple[Escape, ...] = ()
    withheld: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)
    context: TurnContext | None = None

    @property
    def refused(self) -> bool:
        return self.refusal is not None


# -- the generic runner: every choke-point evaluates guards through this ------


def run_guards(guards: Sequence[Guard], subject: Any, point: ChokePoint) -> list[GuardOutcome]:
    """Evaluate each guard on ``subject`` at ``point`` (sync); never raises."""
    return [g.evaluate(subject, point) for g in guards]


async def arun_guards(
    guards: Sequence[Guard], subject: Any, point: ChokePoint
) -> list[GuardOutcome]:
    """Evaluate each guard on ``subject`` at ``point`` (async); never raises."""
    return [await g.aevaluate(subject, point) for g in guards]


def tally(
    outcomes: Sequence[GuardOutcome],
) -> tuple[tuple[VerdictRecord, ...], tuple[Escape, ...], Verdict]:
    """The records, escapes and combined (enforced) verdict of one evaluation."""
    records = tuple(o[0] for o in outcomes)
    escapes = tuple(o[1] for o in outcomes if o[1] is not None)
    return records, escapes, combine(r.verdict for r in records if r.enforced)


# -- the two drivers ------------------------------------------------------------


def pre_turn(turn: Turn, turn_input: Any, tools: Iterable[Any] | None = None) -> PreTurnDecision:
    """Decide what ``turn`` offers the model (sync)."""
    request, candidates = _request(turn, turn_input, tools)
    guards = turn.engine.guards_at(_PRE_TURN)
    decision = _finish(turn, request, candidates, run_guards(guards, request, _PRE_TURN))
    safe_record(turn.engine.recorder, "pre_turn", decision)
    return decision


async def apre_turn(
    turn: Turn, turn_input: Any, tools: Iterable[Any] | None = None
) -> PreTurnDecision:
    """Decide what ``turn`` offers the model (async)."""
    request, candidates = _request(turn, turn_input, tools)
    guards = turn.engine.guards_at(_PRE_TURN)
    outcomes = await arun_guards(guards, request, _PRE_TURN)
    decision = _finish(turn, request, candidates, outcomes)
    await asafe_record(turn.engine.recorder, "pre_turn", decision)
    return decision


# -- pure parts -------------------------------------------------------------------


def tool_name(tool: Any) -> str:
    """The name of a tool given as a ``Tool``, a name, or an Anthropic/OpenAI/MCP definition."""
    if isinstance(tool, Tool):
        return tool.name
    if isinstance(tool, str):
        return tool
    if isinstance(tool, Mapping):
        inner = tool.get("function")
        if tool.get("type") == "function" and isinstance(inner, Mapping):
            tool = inner
        name = tool.get("name")
    else:
        name = getattr(tool, "name", None)
    if not isinstance(name, str):
        raise UsageError(f"cannot tell the name of tool {type(tool).__name__}")
    return name


def _request(
    turn: Turn, turn_input: Any, tools: Iterable[Any] | None
) -> tuple[PreTurnRequest, dict[str, Any]]:
    if tools is None:
        tools = turn.engine.tools.values()
    if isinstance(tools, str | bytes | Mapping):
        raise UsageError("tools must be a list of tools, names or definitions")
    candidates: dict[str, Any] = {}
    for item in tools:
        candidates.setdefault(tool_name(item), item)
    text = Text(user_text(turn_input))
    request = PreTurnRequest(text, tuple(candidates), turn.context, turn_input, turn)
    return request, candidates


def decide(
    names: Sequence[str], outcomes: Sequence[GuardOutcome]
) -> tuple[list[str], Refusal | None, dict[str, tuple[str, ...]]]:
    """Apply the enforced rejects to the candidate names (pure, order-independent)."""
    offered = list(names)
    refusal: Refusal | None = None
    withheld: dict[str, list[str]] = {}
    for record, _, _ in outcomes:
        if record.verdict is not Verdict.REJECT or not record.enforced:
            continue
        evidence = record.evidence
        if type(evidence) is Restrict:
            kept = set(evidence.apply(names))
            for name in names:
                if name not in kept:
                    withheld.setdefault(name, []).append(record.guard)
            offered = [n for n in offered if n in kept]
        elif refusal is None or record.guard < refusal.guard:
            # Several refusals: the one reported is chosen by guard name, so the
            # decision does not depend on registration order.
            refusal = Refusal(record.reason or record.guard, record.guard)
    if refusal is not None:
        offered = []
    return offered, refusal, {k: tuple(sorted(v)) for k, v in withheld.items()}


def gate_records(
    offered: Sequence[str], outcomes: Sequence[GuardOutcome]
) -> dict[str, tuple[VerdictRecord, ...]]:
    """Per tool withheld by a ``Restrict`` that names its gate, the gate's ``reject``
    that a call of it in this turn carries (``Restrict.gates``)."""
    kept = set(offered)
    out: dict[str, list[VerdictRecord]] = {}
    for record, _, _ in outcomes:
        evidence = record.evidence
        if record.verdict is not Verdict.REJECT or not record.enforced:
            continue
        if type(evidence) is not Restrict or not evidence.gates:
            continue
        for tool, gate in evidence.gates.items():
            # Only a tool this rule itself takes out, and that is not offered.
            if tool not in kept and not evidence.apply((tool,)):
                out.setdefault(tool, []).append(
                    VerdictRecord(gate, ChokePoint.TOOL_CALL, Verdict.REJECT, record.reason)
                )
    return {tool: tuple(sorted(rows)) for tool, rows in out.items()}


def _finish(
    turn: Turn,
    request: PreTurnRequest,
    candidates: dict[str, Any],
    outcomes: Sequence[GuardOutcome],
) -> PreTurnDecision:
    records, escapes, verdict = tally(outcomes)
    offered, refusal, withheld = decide(request.tools, outcomes)
    turn.offer(offered)
    turn.gated = gate_records(offered, outcomes)
    decision = PreTurnDecision(
        tools=tuple(candidates[n] for n in offered),
        offered=tuple(offered),
        refusal=refusal,
        verdict=verdict,
        verdicts=records,
        escapes=escapes,
        withheld=MappingProxyType(withheld),
        context=turn.context,
    )
    return decision
