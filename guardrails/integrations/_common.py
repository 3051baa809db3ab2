"""What the integrations share: reading SDK objects or dicts, choosing what to offer,
registering a framework's tools and starting a turn for each of its runs.

An adapter registers each of the agent's tools in the engine once, when the
agent is guarded, so a bad binding fails then, naming the tool. Each run of
the agent gets a ``Turn`` whose context comes from the framework's own run
context (its session id) unless the application says otherwise.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any, NamedTuple

from ..context import ToolResult, TurnContext
from ..engine import Guardrails, Turn
from ..errors import ConfigurationError, DuplicateNameError, UsageError
from ..middleware.post_run import PostRunReport
from ..middleware.pre_turn import PreTurnDecision
from ..tools import Tool

__all__ = [
    "SOURCE",
    "Call",
    "ContextSource",
    "Offer",
    "ReportSink",
    "Runs",
    "ToolOptions",
    "aanswer",
    "acall_native",
    "adopt",
    "answer",
    "aoffer",
    "call_native",
    "call_of",
    "check_options",
    "context_of",
    "field",
    "items",
    "offer",
    "register",
    "relax_required",
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


# -- framework adapters: tools the framework owns, run through tool_call -------------
#
# A framework tool is registered in the engine as a ``Tool`` whose schema is read
# from the framework's own tool object and whose implementation calls the
# framework's own invoker. That invoker needs the framework's per-call object (a
# tool context, a request and its handler); it travels in a context variable set
# around ``turn.call``/``acall``, so the pipeline itself stays framework-free.

# The key of ``Tool.options`` naming the framework object a tool was adopted from.
SOURCE = "framework_tool"

# (tool name, the framework's per-call object) of the framework call in progress.
_NATIVE: ContextVar[tuple[Any, Any] | None] = ContextVar("guardrails_framework_call")


def adopt(
    rails: Guardrails,
    name: str,
    schema: Mapping[str, Any],
    run: Callable[[Any, dict[str, Any]], Any],
    *,
    source: Any,
    is_async: bool,
    description: str = "",
    options: Mapping[str, Any] | None = None,
    direct: Callable[[dict[str, Any]], Any] | None = None,
) -> Tool:
    """Register a framework's tool in ``rails`` once; the same ``source`` again is a no-op.

    ``run(native, arguments)`` invokes the framework's tool with the validated
    arguments (bound values and secrets included) and the framework's per-call
    object given to ``call_native``. ``direct(arguments)``, when given, runs the
    tool outside a framework call (a post_run backstop action); without it such
    a call raises ``UsageError`` naming the tool. ``options`` go to ``Tool`` (``bind=``, ``effect=``,
    ``timeout=``, ``guards=`` ...). A tool of the same name from elsewhere is a
    ``DuplicateNameError`` naming it.
    """
    existing = rails.tools.get(name)
    if existing is not None:
        if existing.options.get(SOURCE) is source:
            return existing
        raise DuplicateNameError(
            f"tool {name!r} is registered twice: once in the Guardrails and once in the agent"
        )
    settings = dict(options or {})
    extra = dict(settings.pop("options", None) or {})
    extra[SOURCE] = source

    def invoke(arguments: dict[str, Any]) -> Any:
        pending = _NATIVE.get(None)
        # Only the call the framework made carries its per-call object: a nested
        # or backstop call of this tool does not borrow another call's.
        if pending is not None and pending[0] == name:
            return run(pending[1], arguments)
        if direct is None:
            raise UsageError(
                f"tool {name!r} runs only when its framework calls it: "
                "a post_run backstop action cannot call it"
            )
        return direct(arguments)

    async def afn(**arguments: Any) -> Any:
        result = invoke(arguments)
        return await result if inspect.isawaitable(result) else result

    def fn(**arguments: Any) -> Any:
        return invoke(arguments)

    tool = Tool(
        name, afn if is_async else fn, schema, description=description, options=extra, **settings
    )
    return rails.add_tool(tool)


def check_options(
    known: Iterable[str], tool_options: Mapping[str, Any] | None, where: str = "tool_options"
) -> None:
    """``tool_options`` names only tools the agent has (raised at construction)."""
    unknown = sorted(set(tool_options or ()) - set(known))
    if unknown:
        raise ConfigurationError(f"{where}: the agent has no tool {unknown[0]!r}")


def call_native(
    turn: Turn, native: Any, name: str, arguments: Any, call_id: str | None
) -> ToolResult:
    """``turn.call`` with the framework's per-call object at hand for ``adopt``'s ``run``."""
    token = _NATIVE.set((name, native))
    try:
        return turn.call(name, arguments, call_id)
    finally:
        _NATIVE.reset(token)


async def acall_native(
    turn: Turn, native: Any, name: str, arguments: Any, call_id: str | None
) -> ToolResult:
    """``call_native`` for the async path."""
    token = _NATIVE.set((name, native))
    try:
        return await turn.acall(name, arguments, call_id)
    finally:
        _NATIVE.reset(token)


def relax_required(schema: Mapping[str, Any], optional: Iterable[str]) -> dict[str, Any]:
    """A copy of ``schema`` whose ``required`` leaves out ``optional``.

    Strict schemas (OpenAI strict mode) list every property as required, those
    with defaults too; ``required`` must say what the user's function requires.
    """
    relaxed = dict(schema)
    skip = frozenset(optional)
    required = schema.get("required")
    if isinstance(required, list):
        relaxed["required"] = [r for r in required if r not in skip]
    return relaxed


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


# Per tool name, the options of ``Tool`` (``bind=``, ``effect=``, ``guards=``, ``timeout=`` ...).
ToolOptions = Mapping[str, Mapping[str, Any]]

# Where a run's TurnContext comes from: a fixed context, or a function of the
# framework's run context (an ADK ``ToolContext``, an Agent Framework ``AgentContext``,
# a Claude Agent SDK hook input).
ContextSource = TurnContext | Callable[[Any], TurnContext] | None

# Called with the post_run report at the end of each run.
ReportSink = Callable[[PostRunReport], Any] | None


def register(
    rails: Guardrails,
    name: str,
    build: Callable[..., Tool],
    options: ToolOptions | None,
) -> Tool:
    """The engine's tool ``name``; built with ``build(**options)`` and added when it is missing."""
    existing = rails.tools.get(name)
    if existing is not None:
        if options and name in options:
            raise ConfigurationError(
                f"tool {name!r} is already registered in the engine: give its options there"
            )
        return existing
    return rails.add_tool(build(**dict((options or {}).get(name, {}))))


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
