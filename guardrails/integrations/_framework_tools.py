"""A framework's own tools in the engine: registered once, run through the framework.

Every framework adapter registers the agent's tools with ``register``; what
it does when the engine already has a tool of the name is its ``Clash`` rule.
A tool the framework must run itself (its own invoker needs the framework's
per-call object: a tool context, a request and its handler) is built by
``native_tool``; that per-call object travels in a context variable set
around ``turn.call``/``acall`` by ``call_native``/``acall_native``, so the
pipeline itself stays framework-free.

A call the framework's own checks answered before the tool could run (an
earlier plugin, the agent's callback, a tool input guardrail) is audited too:
``refused``/``arefused`` send it through tool_call, where the engine's
``framework_check`` guard (added by ``watch``) rejects it, so it leaves the
same audit row, metrics and span as any refusal and its body never runs.

Such a tool's function takes ``**arguments`` (it forwards whatever was
admitted), which would make the engine allow undeclared arguments; the
framework's declared schema decides instead (``extra_of``).
"""

from __future__ import annotations

import enum
import inspect
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from ..context import ToolResult
from ..engine import Guardrails, Turn
from ..errors import ConfigurationError, DuplicateNameError, UsageError
from ..guard import Guard
from ..tools import Extra, Tool
from ..verdicts import Verdict

__all__ = [
    "FRAMEWORK_CHECK",
    "SOURCE",
    "Clash",
    "ToolOptions",
    "acall_native",
    "arefused",
    "call_native",
    "check_options",
    "extra_of",
    "native_tool",
    "refused",
    "register",
    "relax_required",
    "watch",
]

# The key of ``Tool.options`` naming the framework object a tool was registered from.
SOURCE = "framework_tool"

# Per tool name, the options of ``Tool`` (``bind=``, ``effect=``, ``guards=``, ``timeout=`` ...).
ToolOptions = Mapping[str, Mapping[str, Any]]

# (tool name, the framework's per-call object) of the framework call in progress.
_NATIVE: ContextVar[tuple[Any, Any] | None] = ContextVar("guardrails_framework_call")

# The guard through which the framework's own refusals enter the engine.
FRAMEWORK_CHECK = "framework_check"

# Set while a call the framework's own checks refused is recorded.
_REFUSED: ContextVar[bool] = ContextVar("guardrails_framework_refused", default=False)

# Registration is check-then-add: frameworks may prepare one run's tools on several threads.
_REGISTERING = threading.RLock()


class Clash(enum.Enum):
    """What ``register`` does when the engine already has a tool of the name."""

    # The application's own tool is used as it is; options given here for it
    # are a ConfigurationError (they belong where that tool is made).
    APPLICATION_WINS = "application_wins"
    # A DuplicateNameError naming the tool, unless the engine's tool was
    # registered from this very framework object (a framework that shows the
    # same tool again at each step).
    REFUSE = "refuse"


def register(
    rails: Guardrails,
    name: str,
    build: Callable[..., Tool],
    options: Mapping[str, Any] | None,
    *,
    source: Any,
    clash: Clash,
) -> Tool:
    """The engine's tool ``name``: ``build(**options)`` is added when the engine has none.

    ``options`` are this tool's ``Tool`` options (``bind=``, ``effect=`` ...; None
    when the application gave none); the tool keeps ``source``, the framework's
    tool object, in ``Tool.options[SOURCE]``. When the engine already has a tool
    of the name, ``clash`` decides.
    """
    with _REGISTERING:
        existing = rails.tools.get(name)
        if existing is None:
            settings = dict(options or {})
            settings["options"] = {**(settings.get("options") or {}), SOURCE: source}
            added = rails.add_tool(build(**settings))
            _covers(rails, name)
            return added
    if clash is Clash.REFUSE:
        if existing.options.get(SOURCE) is not source:
            raise DuplicateNameError(
                f"tool {name!r} is registered twice: once in the Guardrails and once in the agent"
            )
    elif options is not None:
        raise ConfigurationError(
            f"tool {name!r} is already registered in the engine: give its options there"
        )
    _covers(rails, name)  # the application's own tool, run for the framework
    return existing


def extra_of(schema: Any) -> Extra:
    """The ``extra`` mode of a framework's tool: what its declared schema says.

    Undeclared arguments are refused (``"reject"``) unless the schema opens
    them itself with an ``additionalProperties`` other than ``false`` (then
    ``"allow"``: the schema validates them). A schema that says nothing is closed,
    as a function without ``**kwargs`` is.
    """
    opened = schema.get("additionalProperties", False) if isinstance(schema, Mapping) else False
    return "reject" if opened is False else "allow"


def native_tool(
    name: str,
    schema: Mapping[str, Any],
    run: Callable[[Any, dict[str, Any]], Any],
    *,
    is_async: bool,
    direct: Callable[[dict[str, Any]], Any] | None = None,
    **options: Any,
) -> Tool:
    """A ``Tool`` that the framework runs: ``run(native, arguments)``.

    ``run`` invokes the framework's tool with the validated arguments (bound
    values and secrets included) and the framework's per-call object given to
    ``call_native``. ``direct(arguments)``, when given, runs the tool outside a
    framework call (a post_run backstop action); without it such a call raises
    ``UsageError`` naming the tool. ``options`` go to ``Tool`` (``description=``,
    ``bind=``, ``effect=``, ``timeout=``, ``guards=`` ...); ``extra`` defaults to
    ``extra_of(schema)``.
    """
    options.setdefault("extra", extra_of(schema))

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

    return Tool(name, afn if is_async else fn, schema, **options)


def call_native(
    turn: Turn, native: Any, name: str, arguments: Any, call_id: str | None
) -> ToolResult:
    """``turn.call`` with the framework's per-call object at hand for ``native_tool``'s ``run``."""
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


def _framework_check(invocation: Any) -> Verdict:
    """``reject`` for a call the framework's own checks refused before the tool ran."""
    return Verdict.REJECT if _REFUSED.get() else Verdict.PASS


# The tools each engine's ``framework_check`` covers: those adapters registered. A guard
# costs every call it applies to (about a direct call's own time again), so it is scoped
# to them and the application's other tools, called directly, do not pay for it.
_COVERED: weakref.WeakKeyDictionary[Guardrails, frozenset[str]] = weakref.WeakKeyDictionary()


def watch(rails: Guardrails) -> None:
    """Add the ``framework_check`` guard to ``rails`` (once), over the tools adapters
    registered there; ``register`` and ``refused`` extend it to the tools they meet."""
    with _REGISTERING:
        if rails not in _COVERED:
            mine = frozenset(n for n, t in rails.tools.items() if SOURCE in t.options)
            _cover(rails, mine)


def _cover(rails: Guardrails, names: frozenset[str]) -> None:
    """``framework_check`` over ``names`` (and the tools it covered already)."""
    covered = _COVERED.get(rails)
    wanted = names if covered is None else covered | names
    if covered is not None and wanted == covered:
        return
    existing = rails.guards.get(FRAMEWORK_CHECK)
    check = Guard(_framework_check, name=FRAMEWORK_CHECK, tools=sorted(wanted))
    if existing is None or existing.fn is not _framework_check:
        rails.add_guard(check)  # (an application's guard of that name: DuplicateNameError)
    else:
        # The engine has no call for a guard whose scope grows: put the wider one in its
        # place and plan again, as add_guard does.
        rails._guards[FRAMEWORK_CHECK] = check
        rails._replan()
    _COVERED[rails] = wanted


def _covers(rails: Guardrails, name: str) -> None:
    """``framework_check`` covers the engine's tool ``name``, once the engine is watched."""
    with _REGISTERING:
        covered = _COVERED.get(rails)
        if covered is not None and name not in covered and name in rails.tools:
            _cover(rails, frozenset((name,)))


def refused(turn: Turn, name: str, arguments: Any, call_id: str | None) -> ToolResult:
    """Audit a call the framework's own checks answered without the tool: ``unavailable``
    (``framework_check`` rejected it), or what an earlier step decided; nothing runs."""
    if isinstance(name, str):
        _covers(turn.engine, name)
    token = _REFUSED.set(True)
    try:
        return turn.call(name, arguments, call_id)
    finally:
        _REFUSED.reset(token)


async def arefused(turn: Turn, name: str, arguments: Any, call_id: str | None) -> ToolResult:
    """``refused`` for the async path."""
    if isinstance(name, str):
        _covers(turn.engine, name)
    token = _REFUSED.set(True)
    try:
        return await turn.acall(name, arguments, call_id)
    finally:
        _REFUSED.reset(token)


def check_options(
    known: Iterable[str], tool_options: Mapping[str, Any] | None, where: str = "tool_options"
) -> None:
    """``tool_options`` names only tools the agent has (raised at construction)."""
    unknown = sorted(set(tool_options or ()) - set(known))
    if unknown:
        raise ConfigurationError(f"{where}: the agent has no tool {unknown[0]!r}")


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
