"""Tool-call ceiling per session: the ``limit`` path of tool_call step 6, across turns.

Counts live behind ``Counter`` (one method, ``incr(key) -> int``), so a
durable store can replace the in-memory default without touching the rule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..context import Escape, GuardResult, Invocation, ToolResult, TurnContext
from ..errors import ConfigurationError
from ..guard import Guard
from ..middleware.tool_call import Stop
from ..store import Store
from ..store.steps import Steps, aperform, call, perform
from ..verdicts import ChokePoint, EscapeReason, Outcome, Reason, Verdict
from .effects import Restrict

if TYPE_CHECKING:
    from ..middleware._pre_turn_request import PreTurnRequest

__all__ = ["Counter", "MemoryCounter", "SessionCeiling"]

_NOTHING = Restrict(only=frozenset())


def _part(text: str) -> str:
    return text.replace("%", "%25").replace(":", "%3A")


@runtime_checkable
class Counter(Protocol):
    """Adds one to ``key`` and returns the new count, atomically."""

    def incr(self, key: str, /) -> int: ...


class MemoryCounter:
    """A ``Counter`` in this process's memory (tests, single-process agents)."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def incr(self, key: str, /) -> int:
        with self._lock:
            count = self._counts.get(key, 0) + 1
            self._counts[key] = count
            return count

    def get(self, key: str) -> int:
        return self._counts.get(key, 0)


class SessionCeiling:
    """At most ``limit`` tool calls per session reach a tool; the rest get ``limit``.

    Counted at step 6, like ``TurnCeiling``. A turn without a session, or a
    counter that fails, lets the call through with an escape
    (``not_configured`` / ``store_unavailable``), unless ``fail_closed``.
    """

    __slots__ = ("counter", "fail_closed", "limit", "name")

    def __init__(
        self,
        limit: int,
        counter: Counter | None = None,
        *,
        fail_closed: bool = False,
        name: str = "session_ceiling",
    ) -> None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ConfigurationError(f"{name}: limit must be a non-negative int, not {limit!r}")
        if counter is not None and not isinstance(counter, Counter):
            raise ConfigurationError(f"{name}: the counter needs an incr(key) method")
        self.limit = limit
        self.counter: Counter = counter if counter is not None else MemoryCounter()
        self.fail_closed = fail_closed
        self.name = name

    def key(self, context: TurnContext) -> str | None:
        """The counter key of the context's session, or ``None`` without a session."""
        if context.session is None:
            return None
        # ":" and "%" are escaped in each part, so no two (tenant, session)
        # pairs share a key (tenant None and "" both mean no tenant).
        return f"tool_calls:{_part(context.tenant or '')}:{_part(context.session)}"

    def before(self, invocation: Invocation, /) -> Stop | Escape | None:
        return perform(self.counter, self._count(invocation))

    async def abefore(self, invocation: Invocation, /) -> Stop | Escape | None:
        """``before`` for ``acall``: a store counter counts without blocking the event loop."""
        if type(self.counter) is MemoryCounter:
            return self.before(invocation)
        return await aperform(self.counter, self._count(invocation))

    def _count(self, invocation: Invocation) -> Steps[Stop | Escape | None]:
        key = self.key(invocation.context)
        if key is None:
            return self._escape(EscapeReason.NOT_CONFIGURED, None)
        try:
            count = yield call("incr", key)
        except Exception as exc:
            return self._escape(EscapeReason.STORE_UNAVAILABLE, exc)
        if count > self.limit:
            return Stop(Outcome.LIMIT, Reason.CEILING)
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        return result

    def at_pre_turn(self, *, name: str | None = None) -> Guard:
        """A pre_turn guard that offers no tool once the session's ceiling is reached.

        It reads the count with the counter's ``get(key)`` method; a counter
        without one cannot be read, and the guard does not evaluate. Under
        ``apre_turn`` a counter other than ``MemoryCounter`` is read on its
        store's threads.
        """
        return Guard(
            _CeilingOffer(self),
            name=name or f"{self.name}_offer",
            at=ChokePoint.PRE_TURN,
            fail_closed=self.fail_closed,
        )

    def _escape(self, reason: EscapeReason, exc: BaseException | None) -> Stop | Escape:
        if self.fail_closed:
            return Stop(Outcome.LIMIT, Reason.CEILING, None, exc)
        return Escape(self.name, ChokePoint.TOOL_CALL, reason, exc)


class _CeilingOffer:
    """The function of ``SessionCeiling.at_pre_turn``: no tool once the ceiling is reached."""

    __slots__ = ("__name__", "ceiling", "read", "reads_store")

    def __init__(self, ceiling: SessionCeiling) -> None:
        self.__name__ = "session_ceiling_offer"
        self.ceiling = ceiling
        counter = ceiling.counter
        self.read = _reader(counter)
        # Read off the event loop under apre_turn, unless it is this process's memory.
        self.reads_store = None if type(counter) is MemoryCounter else counter

    def __call__(self, request: PreTurnRequest) -> GuardResult | Verdict:
        key = self.ceiling.key(request.context)
        if key is None or self.read is None:
            return GuardResult.not_evaluated(
                "no_session" if key is None else "counter_not_readable",
                evidence=_NOTHING,
                escape=EscapeReason.NOT_CONFIGURED,
            )
        if self.read(key) >= self.ceiling.limit:
            return GuardResult.rejected("ceiling_reached", evidence=_NOTHING)
        return Verdict.PASS


def _reader(counter: Counter) -> Callable[[str], int] | None:
    """How the count of a key is read: a store adds 0 (its ``get`` is its key-value
    table, not its counters); any other counter through its ``get(key)``, if it has one."""
    if isinstance(counter, Store):
        return lambda key: counter.incr(key, 0)
    read = getattr(counter, "get", None)
    return read if callable(read) else None
