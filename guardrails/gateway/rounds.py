"""A round the upstream answered ``input_required``: audited as such, and not a call.

The client is asked for input (``asking.py``) and retries the same call: each
round is a ``tools/call`` of its own, guarded in full. The one answered
``input_required`` did nothing upstream yet: its row says outcome
``unavailable``, reason ``input_required`` (the model is told nothing: the
client gets the upstream's question), its budget settles at zero (the
``PaidCall`` of a call that raised) and this hook gives its count back to
the session ceiling, so that a call asked N questions counts once.
"""

from __future__ import annotations

from typing import Any

from ..context import Invocation, ToolResult
from ..rules import SessionCeiling
from ..store import Store, offloop
from ..verdicts import Reason
from .asking import InputRequired

__all__ = ["Rounds"]


class Rounds:
    """A call hook (before the audit's ``after``) for rounds answered ``input_required``."""

    name = "input_rounds"

    def __init__(self, store: Store, ceilings: list[SessionCeiling]) -> None:
        self.store = store
        self.ceilings = ceilings

    def before(self, invocation: Invocation, /) -> None:
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        if type(result.exception) is not InputRequired:
            return result
        for key in self._keys(invocation):
            self.store.incr(key, -1)
        return result._replace(reason=Reason.INPUT_REQUIRED)

    async def aafter(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        if type(result.exception) is not InputRequired:
            return result
        for key in self._keys(invocation):
            await offloop.run(self.store, self.store.incr, key, -1)
        return result._replace(reason=Reason.INPUT_REQUIRED)

    def _keys(self, invocation: Invocation) -> list[str]:
        keys = (ceiling.key(invocation.context) for ceiling in self.ceilings)
        return [key for key in keys if key is not None]


def round_of(result: Any) -> Any:
    """The ``InputRequiredResult`` a guarded call's result carries, or None."""
    exception = getattr(result, "exception", None)
    return exception.result if type(exception) is InputRequired else None
