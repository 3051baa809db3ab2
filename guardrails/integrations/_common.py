"""What the integrations share: reading SDK objects or dicts, choosing what to offer,
and starting a turn for each run of a framework's agent.

Each run of an agent gets a ``Turn`` whose context comes from the framework's
own run context (its session id) unless the application says otherwise. How a
framework's tools are registered and run is ``_framework_tools``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ..context import ToolResult, TurnContext
from ..engine import Guardrails, Turn
from ..errors import ConfigurationError
from ..middleware._render import render
from ..middleware.post_run import PostRunReport
from ..middleware.pre_turn import PreTurnDecision
from ..tools import Tool

__all__ = [
    "Call",
    "ContextSource",
    "Offer",
    "ReportSink",
    "Runs",
    "aanswer",
    "answer",
    "aoffer",
    "call_of",
    "context_of",
    "field",
    "items",
    "native_blocks",
    "offer",
    "reads_as_value",
    "start_turn",
    "tools_of",
]

# One tool call as the model asked for it: (name, arguments, the model's call id).
Call = tuple[Any, Any, "str | None"]


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` for an SDK object."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def items(value: Any) -> list[Any]:
    """The elements of a list-like SDK field; anything else (a number, a string) has none."""
    if isinstance(value, list | tuple):
        return list(value)
    return []


def call_of(name: Any, arguments: Any, call_id: Any) -> Call:
    """A ``Call``; a call id that is not a string is dropped (one is generated)."""
    return name, arguments, call_id if isinstance(call_id, str) else None


def answer(
    turn: Turn, calls: Iterable[Call], reply: Callable[[ToolResult, str | None], Any]
) -> list[Any]:
    """Each call through tool_call, in order; ``reply`` formats each result for the SDK."""
    return [
        reply(turn.call(name, arguments, call_id), call_id) for name, arguments, call_id in calls
    ]


async def aanswer(
    turn: Turn, calls: Iterable[Call], reply: Callable[[ToolResult, str | None], Any]
) -> list[Any]:
    """``answer`` for async tools and guards."""
    return [
        reply(await turn.acall(name, arguments, call_id), call_id)
        for name, arguments, call_id in calls
    ]


def _is_block(value: Any, types: frozenset[str]) -> bool:
    # Exact types only: a subclass's methods are the tool's code, and may raise.
    kind = value.get("type") if type(value) is dict else None
    return type(kind) is str and kind in types


def reads_as_value(result: ToolResult) -> bool:
    """Whether the model would read exactly ``result.value``'s text: an ``ok`` result
    neither cut to ``max_result_chars`` nor rewritten by a hook (a workflow step's
    instructions). Only then may an SDK send the value in a shape of its own."""
    if result.outcome != "ok" or result.truncated:
        return False
    try:
        return render(result.value, 1 << 62)[0] == result.content
    except Exception:  # a value that cannot be rendered again: its text is what there is
        return False


def native_blocks(result: ToolResult, types: frozenset[str]) -> list[dict[str, Any]] | None:
    """The content blocks an ``ok`` result is made of, for an SDK whose results carry
    blocks of ``types`` (images, files): None for any other value, a non-ok outcome, or
    a result the model does not read as its value (``reads_as_value``)."""
    value = result.value
    found = [value] if type(value) is dict else value if type(value) is list else None
    if not found or not all(_is_block(block, types) for block in found):
        return None
    return list(found) if reads_as_value(result) else None


def tools_of(source: Guardrails | Turn | Iterable[Tool]) -> list[Tool]:
    """The tools of an engine, of a turn's engine, or a list of tools as given."""
    if isinstance(source, Turn):
        source = source.engine
    if isinstance(source, Guardrails):
        return list(source.tools.values())
    return list(source)


class Offer(NamedTuple):
    """The tools offered to the model, and the code of a refused turn (None when it goes on)."""

    tools: list[Tool]
    refusal: str | None = None


def _candidates(turn: Turn, names: Iterable[str] | None) -> list[Tool]:
    candidates = tools_of(turn)
    if names is not None:
        wanted = frozenset(names)
        candidates = [t for t in candidates if t.name in wanted]
    return candidates


def _decided(decision: PreTurnDecision) -> Offer:
    refusal = decision.refusal
    return Offer(list(decision.tools), None if refusal is None else str(refusal.code))


def offer(turn: Turn, turn_input: Any = None, names: Iterable[str] | None = None) -> Offer:
    """Run pre_turn over the engine's tools (narrowed to ``names``); the turn remembers the offer."""
    return _decided(turn.pre_turn(turn_input, _candidates(turn, names)))


async def aoffer(turn: Turn, turn_input: Any = None, names: Iterable[str] | None = None) -> Offer:
    """``offer`` for async pre_turn guards."""
    return _decided(await turn.apre_turn(turn_input, _candidates(turn, names)))


_CONTEXT_FIELDS = ("tenant", "session", "phase", "agent", "workflow")


def context_of(value: Any, **defaults: str | None) -> TurnContext:
    """A ``TurnContext`` from a framework's run context.

    A ``TurnContext`` (or a ``Turn``'s) is used as is. A mapping or object gives
    its ``tenant``, ``session``, ``phase``, ``agent`` and ``workflow`` strings; a
    mapping also gives all its items as ``values`` (for bound parameters).
    ``defaults`` fill the fields the value leaves empty (a thread id as session).
    """
    if isinstance(value, Turn):
        return value.context
    if isinstance(value, TurnContext):
        return value
    found: dict[str, Any] = {}
    for key in _CONTEXT_FIELDS:
        item = field(value, key) if value is not None else None
        if not isinstance(item, str):
            item = defaults.get(key)
        if item is not None:
            found[key] = item
    values = dict(value) if isinstance(value, Mapping) else {}
    return TurnContext(**found, values=values)


class Runs:
    """Per-run state, by an object the framework shares between all the calls of one run.

    The object is held weakly and compared by identity: a run that never reports
    its end is dropped with its object, and a new object never inherits an old
    run's state. Thread-safe (frameworks run one model turn's sync tool calls
    in threads).
    """

    def __init__(self) -> None:
        self._runs: dict[int, tuple[weakref.ref[Any], Any]] = {}
        self._lock = threading.RLock()

    def get(self, owner: Any, make: Callable[[], Any]) -> Any:
        """The state of ``owner``'s run, made by ``make()`` the first time."""
        key = id(owner)
        with self._lock:
            entry = self._runs.get(key)
            if entry is not None and entry[0]() is owner:
                return entry[1]
            value = make()
            self._runs[key] = (weakref.ref(owner, lambda ref: self._drop(key, ref)), value)
            return value

    def peek(self, owner: Any) -> Any:
        """The state of ``owner``'s run, or None."""
        with self._lock:
            entry = self._runs.get(id(owner))
            return entry[1] if entry is not None and entry[0]() is owner else None

    def pop(self, owner: Any) -> Any:
        """Forget ``owner``'s run; its state, or None."""
        with self._lock:
            value = self.peek(owner)
            if value is not None:
                del self._runs[id(owner)]
            return value

    def _drop(self, key: int, ref: weakref.ref[Any]) -> None:
        with self._lock:
            entry = self._runs.get(key)
            if entry is not None and entry[0] is ref:
                del self._runs[key]


# Where a run's TurnContext comes from: a fixed context, or a function of the
# framework's run context (an ADK ``ToolContext``, an Agent Framework ``AgentContext``,
# a Claude Agent SDK hook input).
ContextSource = TurnContext | Callable[[Any], TurnContext] | None

# Called with the post_run report at the end of each run.
ReportSink = Callable[[PostRunReport], Any] | None


def start_turn(rails: Guardrails, context: ContextSource, source: Any, session: Any) -> Turn:
    """A turn for one run: the application's context, else the framework's session id."""
    if callable(context):
        made = context(source)
        if not isinstance(made, TurnContext):
            raise ConfigurationError(
                f"context function {context!r} returned {type(made).__name__}, not a TurnContext"
            )
        turn_context = made
    else:
        turn_context = context or TurnContext()
    if turn_context.session is None and isinstance(session, str) and session:
        turn_context = turn_context.evolve(session=session)
    return rails.turn(turn_context)
