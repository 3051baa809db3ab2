"""The hook that holds a call until a person approves it, and runs an approved call once.

``ApprovalGate(store)`` in an engine's ``hooks``: a call whose tool declares
``approval=`` (or whose tool the policy file gives an ``approval``), and whose
arguments the rule says need it, does not run. Its request is put in the store
(or found there) and the model reads ``unavailable`` with a fixed sentence
(reason ``approval_pending``, ``approval_denied`` or ``approval_expired``).
When a person has approved it, the same call (same tenant, session, tool and
digest of the exact arguments) consumes the approval atomically and runs,
once. When the store cannot say, the call does not run
(``store_unavailable``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from .._call_state import closed, enter
from .._conditions import ApprovalRule, parse_approval
from ..context import Invocation, ToolResult
from ..errors import ConfigurationError
from ..middleware.tool_call import Stop
from ..observe._approval_event import APPROVAL, ApprovalEvent, events_of
from ..observe.recorder import asafe_record, safe_record
from ..store import offloop
from ..store._approval_rows import Admission, ApprovalRecord
from ..verdicts import Outcome, Reason
from ._request import request_for
from ._sentences import SENTENCES
from .book import book_of

__all__ = ["ApprovalGate"]

_STOPS: dict[str, Stop] = {
    "pending": Stop(Outcome.UNAVAILABLE, Reason.APPROVAL_PENDING),
    "requested": Stop(Outcome.UNAVAILABLE, Reason.APPROVAL_PENDING),
    "denied": Stop(Outcome.UNAVAILABLE, Reason.APPROVAL_DENIED),
    "expired": Stop(Outcome.UNAVAILABLE, Reason.APPROVAL_EXPIRED),
}
DETAIL = "approval_request"


class ApprovalGate:
    """A CallHook: calls that need approval wait for a stored decision and run once."""

    __slots__ = ("book", "clock", "from_policy", "name", "rules", "ttl")

    # The engine refuses a tool that declares ``approval=`` when no hook says this.
    grants_approval = True

    def __init__(
        self,
        store: Any,
        *,
        ttl: float = 3_600.0,
        rules: Mapping[str, str | ApprovalRule] | None = None,
        clock: Callable[[], float] = time.time,
        name: str = "approvals",
    ) -> None:
        if not (type(ttl) in (int, float) and 0 < ttl < float("inf")):
            raise ConfigurationError(f"{name}: ttl must be a positive number of seconds")
        self.book = book_of(store, name)
        self.ttl = float(ttl)
        self.clock = clock
        self.name = name
        self.rules: dict[str, ApprovalRule] = {}
        for tool, spec in dict(rules or {}).items():
            rule = parse_approval(spec, f"{name}: tool {tool!r}")
            if rule is not None:
                self.rules[tool] = rule
        self.from_policy: Mapping[str, tuple[ApprovalRule, ...]] = {}

    def use_policy(self, approvals: Mapping[str, tuple[ApprovalRule, ...]]) -> None:
        """The ``approval`` rules of the engine's policy file (set when it is loaded)."""
        self.from_policy = approvals

    def rules_for(self, invocation: Invocation) -> tuple[ApprovalRule, ...]:
        """Every rule on this tool: its own, the one given here, the policy's."""
        name = invocation.name
        own = getattr(invocation.tool, "approval", None)
        given = self.rules.get(name)
        return (
            *(() if own is None else (own,)),
            *(() if given is None else (given,)),
            *self.from_policy.get(name, ()),
        )

    def needs_approval(self, invocation: Invocation) -> bool:
        """Whether any rule says this call needs approval (an unreadable condition does)."""
        arguments = invocation.arguments
        return any(rule.needs_approval(arguments) for rule in self.rules_for(invocation))

    def before(self, invocation: Invocation, /) -> Stop | None:
        if not self.needs_approval(invocation):
            return None
        now = self.clock()
        request = _request(invocation, now, self.ttl)
        if isinstance(request, Stop):
            return request
        try:
            found = self.book.approval_admit(request, now)
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            return Stop(Outcome.UNAVAILABLE, Reason.STORE_UNAVAILABLE, None, exc)
        safe_record(_recorders(invocation), APPROVAL, _event(invocation, found))
        return self._decided(invocation, found)

    async def abefore(self, invocation: Invocation, /) -> Stop | None:
        """``before`` for ``acall``: the store is asked off the event loop."""
        if not self.needs_approval(invocation):
            return None
        now = self.clock()
        request = _request(invocation, now, self.ttl)
        if isinstance(request, Stop):
            return request
        try:
            found = await offloop.run(self.book, self.book.approval_admit, request, now)
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            return Stop(Outcome.UNAVAILABLE, Reason.STORE_UNAVAILABLE, None, exc)
        await asafe_record(_recorders(invocation), APPROVAL, _event(invocation, found))
        return self._decided(invocation, found)

    def _decided(self, invocation: Invocation, found: Admission) -> Stop | None:
        # The request's id goes to the call's audit row, never to the model.
        enter(invocation, self).detail[DETAIL] = found.record.id
        return None if found.state == "run" else _STOPS[found.state]

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        # A call that needed no approval made no state: none is made for it here.
        closed(invocation, self)
        sentence = SENTENCES.get(result.reason) if result.reason is not None else None
        if sentence is None or result.outcome is not Outcome.UNAVAILABLE:
            return result
        return result._replace(content=sentence)

    async def aafter(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        return self.after(invocation, result)


def _request(invocation: Invocation, now: float, ttl: float) -> ApprovalRecord | Stop:
    """The request for ``invocation``, or the stop of a call whose arguments have no
    canonical JSON text (a bound value that is not JSON): no digest, so no request."""
    try:
        return request_for(invocation, now, ttl)
    except Exception as exc:  # TypeError, ValueError, or what a bound object raised
        error = TypeError(
            f"tool {invocation.name!r} needs approval, and its arguments are not one JSON "
            f"value (a bound value that is not JSON, or not finite): {type(exc).__name__}"
        )
        error.__cause__ = exc
        return Stop(Outcome.UNAVAILABLE, Reason.HOOK_FAILED, None, error)


def _recorders(invocation: Invocation) -> Any:
    """The engine's recorders (None outside a turn: nothing to report to)."""
    return getattr(getattr(invocation.turn, "engine", None), "recorder", None)


def _event(invocation: Invocation, found: Admission) -> ApprovalEvent:
    record = found.record
    waited = None
    if found.state == "run" and record.decided_at is not None:
        waited = max(0.0, record.decided_at - record.requested_at)
    return ApprovalEvent(
        invocation.name,
        invocation.tool is not None,
        events_of(found.state),
        waited,
        invocation.call_id,
        record.id,
    )
