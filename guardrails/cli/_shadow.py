"""``guardrails policy test``: recorded calls replayed through a policy, no tool run.

Each recorded turn is a JSON object on one line of a JSONL file::

    {"session": "s-1", "user": "Pay my landlord", "context": {"payment_limit": 500},
     "calls": [{"name": "list_payees", "arguments": {}, "result": [...]},
               {"name": "pay", "arguments": {"iban": "...", "amount": 900}, "result": "paid"}]}

A turn's user text goes through ``pre_turn`` (intent gates); each call is
admitted (``turn.admit``) and, when admitted, its recorded result is handed
over (``ticket.complete``) so provenance sees it as the tool's answer. Turns
of one session share their session's provenance and ceilings, in file order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..context import ToolResult, TurnContext
from ..engine import Guardrails
from ..errors import ConfigurationError
from ..policy.policy import Policy
from ..verdicts import Verdict

if TYPE_CHECKING:
    from ..middleware.pre_turn import PreTurnDecision

__all__ = ["MAX_LINE", "Refusal", "Replay", "read_turns", "replay", "report"]

# A recorded turn longer than this (characters) is refused as unusable input.
MAX_LINE = 16 * 1024 * 1024
_TURN_KEYS = {"session", "user", "context", "calls"}
_CALL_KEYS = {"id", "name", "arguments", "result", "error"}
# Places listed per rule in the report; the count is always whole.
_SHOWN = 5


@dataclass(frozen=True)
class RecordedCall:
    name: str
    arguments: Mapping[str, Any]
    result: Any
    error: bool
    call_id: str | None
    where: str


@dataclass(frozen=True)
class RecordedTurn:
    session: str
    user: str | None
    context: Mapping[str, Any]
    calls: tuple[RecordedCall, ...]


@dataclass(frozen=True)
class Refusal:
    """One recorded call the policy would now refuse: where, which tool, who, why."""

    where: str
    tool: str
    rule: str
    reason: str


@dataclass(frozen=True)
class Replay:
    """What a replay found: calls per tool, and every refusal."""

    turns: int
    calls: Mapping[str, int] = field(default_factory=dict)
    refusals: tuple[Refusal, ...] = ()


def read_turns(path: str) -> list[RecordedTurn]:
    """The recorded turns of a JSONL file; ``ConfigurationError`` naming the line otherwise."""
    turns = []
    try:
        with open(path, encoding="utf-8") as file:
            for number, line in enumerate(_lines(file, path), start=1):
                if line.strip():
                    turns.append(_turn(f"{path}:{number}", line))
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"{path}: not UTF-8 text") from None
    if not turns:
        raise ConfigurationError(f"{path}: no recorded turns")
    return turns


def _lines(file: Any, path: str) -> Iterator[str]:
    while line := file.readline(MAX_LINE + 1):
        if len(line) > MAX_LINE:
            raise ConfigurationError(f"{path}: a line is longer than {MAX_LINE} characters")
        yield line


def _turn(where: str, line: str) -> RecordedTurn:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ConfigurationError(f"{where}: not JSON ({str(exc).splitlines()[0][:200]})") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{where}: a turn is an object with 'calls'")
    _only(where, data, _TURN_KEYS)
    user, context, calls = data.get("user"), data.get("context", {}), data.get("calls")
    session = data.get("session", where)
    if not isinstance(session, str) or not (user is None or isinstance(user, str)):
        raise ConfigurationError(f"{where}: 'session' and 'user' are strings")
    if not isinstance(context, dict):
        raise ConfigurationError(f"{where}: 'context' is an object of named values")
    if not isinstance(calls, list):
        raise ConfigurationError(f"{where}: 'calls' is a list of calls")
    return RecordedTurn(
        session, user, context, tuple(_call(f"{where}: calls[{i}]", c) for i, c in enumerate(calls))
    )


def _call(where: str, data: Any) -> RecordedCall:
    if not isinstance(data, dict):
        raise ConfigurationError(f"{where}: a call is an object with 'name' and 'arguments'")
    _only(where, data, _CALL_KEYS)
    name, arguments, call_id = data.get("name"), data.get("arguments"), data.get("id")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise ConfigurationError(f"{where}: 'name' is a string and 'arguments' an object")
    if not (call_id is None or isinstance(call_id, str)):
        raise ConfigurationError(f"{where}: 'id' is a string")
    error = data.get("error", False)
    if not isinstance(error, bool) or (error and "result" in data):
        raise ConfigurationError(f"{where}: 'error' is true or false, and an error has no result")
    return RecordedCall(name, arguments, data.get("result"), error, call_id, where)


def _only(where: str, data: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key {unknown[0]!r}; expected {sorted(known)}")


def replay(policy: Policy, tools: Mapping[str, Any], turns: list[RecordedTurn]) -> Replay:
    """Every recorded call admitted under ``policy``; admitted ones completed with their result."""
    rails = Guardrails(list(tools.values()), policy=policy)
    counts: dict[str, int] = {}
    refusals: list[Refusal] = []
    for recorded in turns:
        context = TurnContext(session=recorded.session, values=recorded.context)
        with rails.turn(context) as turn:
            decision = None if recorded.user is None else turn.pre_turn(recorded.user)
            for call in recorded.calls:
                counts[call.name] = counts.get(call.name, 0) + 1
                ticket = turn.admit(call.name, call.arguments, call_id=call.call_id)
                if not ticket.admitted:
                    if ticket.result is not None and not ticket.result.ok:
                        refusals.append(_refusal(call, ticket.result, decision))
                elif call.error:
                    ticket.fail("raised")
                else:
                    ticket.complete(call.result)
    return Replay(len(turns), counts, tuple(refusals))


def _refusal(call: RecordedCall, result: ToolResult, decision: PreTurnDecision | None) -> Refusal:
    """Who refused and why: the first rejecting guard, or the pre_turn gate that withheld it."""
    # A call of a tool an intent gate withheld carries the gate's reject itself
    # (``policy:TOOL.intent``); another pre_turn rule's is read from the decision.
    verdicts = list(result.verdicts)
    gates = decision.withheld.get(call.name, ()) if decision is not None else ()
    if gates and decision is not None and not verdicts:
        verdicts = [v for v in decision.verdicts if v.guard in gates]
    rejecting = [v for v in verdicts if v.verdict is Verdict.REJECT and v.enforced]
    if rejecting:
        first = rejecting[0]
        return Refusal(call.where, call.name, first.guard, first.reason or result.outcome.value)
    if gates:
        return Refusal(call.where, call.name, ", ".join(gates), "withheld by pre_turn")
    reason = getattr(result.reason, "value", result.reason)
    return Refusal(call.where, call.name, "-", f"{result.outcome.value}/{reason}")


def report(done: Replay, source: str) -> str:
    """The text ``policy test`` prints: a summary, then per tool and rule what was refused."""
    total = sum(done.calls.values())
    lines = [
        f"replayed {total} calls in {done.turns} turns from {source}: "
        f"{len(done.refusals)} would be refused"
    ]
    for tool in sorted(done.calls):
        mine = [r for r in done.refusals if r.tool == tool]
        lines.append(f"{tool}: {len(mine)} of {done.calls[tool]} calls refused")
        by_rule: dict[tuple[str, str], list[str]] = {}
        for refusal in mine:
            by_rule.setdefault((refusal.rule, refusal.reason), []).append(refusal.where)
        for (rule, reason), where in sorted(by_rule.items()):
            shown = ", ".join(where[:_SHOWN]) + (", ..." if len(where) > _SHOWN else "")
            lines.append(f"  {rule} {reason}: {len(where)} ({shown})")
    return "\n".join(lines)
