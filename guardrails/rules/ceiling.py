"""Tool-call ceiling per turn: the ``limit`` path of tool_call step 6."""

from __future__ import annotations

from ..context import Invocation, ToolResult
from ..errors import ConfigurationError
from ..middleware.tool_call import Stop
from ..verdicts import Outcome, Reason

__all__ = ["TurnCeiling"]

_KEY = "calls"
_STOP = Stop(Outcome.LIMIT, Reason.CEILING)


class TurnCeiling:
    """At most ``limit`` tool calls in one turn reach the tool; the rest get ``limit``.

    Counted at step 6, so calls refused earlier (unknown tool, bad arguments, a
    guard's reject) do not use up the allowance.
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        if type(limit) is not int or limit < 0:
            raise ConfigurationError(f"tool-call ceiling must be a non-negative int, not {limit!r}")
        self.limit = limit

    def before(self, invocation: Invocation, /) -> Stop | None:
        turn = invocation.turn
        # Read and count under the turn's lock: threads sharing a turn never overshoot.
        with turn.lock:
            counters = turn.counters
            used = counters.get(_KEY, 0)
            if used >= self.limit:
                return _STOP
            counters[_KEY] = used + 1
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        return result
