"""A tool call split into its decision and its result, for a body that runs elsewhere
(a hosted tool, a server-side tool, a replayed transcript).

``admit`` runs ``ToolCallPipeline.run`` (or ``arun``) up to the body: steps 1-6
decide, and a call they let through is held in a ``Ticket`` instead of running
the tool. ``Ticket.complete`` / ``fail`` hand the body's answer to
``ToolCallPipeline.settle`` (or ``asettle``), the steps after the body that
``run`` ends with. No step is written twice.

The hooks of one call carry its state from ``before`` to ``after`` in context
variables (the audit row's details, a paid call's spend). A ticket's two halves
may run on different threads, with other calls in between, so each ticket runs
both in a context of its own (``contextvars.copy_context``, made at ``admit``);
the caller's context is left as it was.

A ticket is used once: the first ``complete``, ``fail`` or the end of its turn
settles it, under the turn's lock; any later one raises ``TicketClosed``.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping, Sequence
from functools import partial
from time import perf_counter_ns
from typing import Any, NamedTuple

from .. import _fair
from .._aio import late as is_late
from .._aio import to_the_end
from ..context import Escape, Invocation, ToolResult, VerdictRecord
from ..errors import TicketClosed, UsageError
from ..verdicts import Outcome, Reason, Verdict
from ._hooks import Stop
from ._results import failure
from .admission import Plan

__all__ = [
    "NOT_COMPLETED",
    "Ticket",
    "aadmit",
    "admit",
    "aend_tickets",
    "end_tickets",
    "take_turn",
]

NOT_COMPLETED = Stop(Outcome.ERROR, Reason.NOT_COMPLETED)
"""What a ticket still open when its turn ends is settled with."""

_FAILS = {"raised": Reason.RAISED, "timeout": Reason.TIMEOUT}
_OPEN, _SETTLING, _CLOSED = 0, 1, 2


class _Held(NamedTuple):
    """Everything steps 1-6 decided about a call whose body has not answered yet."""

    pipeline: Any
    plan: Plan
    inv: Invocation
    records: tuple[VerdictRecord, ...]
    escapes: Sequence[Escape]
    verdict: Verdict
    start: int
    secrets: dict[str, Any] | None
    began: int
    context: contextvars.Context


def _hold(
    context: contextvars.Context,
    pipeline: Any,
    plan: Plan,
    inv: Invocation,
    records: tuple[VerdictRecord, ...],
    escapes: Sequence[Escape],
    verdict: Verdict,
    start: int,
    secrets: dict[str, Any] | None,
) -> Ticket:
    """The ticket of a call steps 1-6 let through, registered with its turn at once:
    whatever stops the caller after this (a cancellation), the turn's end settles it."""
    began = perf_counter_ns()
    held = _Held(pipeline, plan, inv, records, escapes, verdict, start, secrets, began, context)
    turn = inv.turn
    ticket = Ticket(turn, held, None)
    with turn.lock:
        if turn._tickets is None:
            turn._tickets = set()
        turn._tickets.add(ticket)
    return ticket


class Ticket:
    """The decision on one tool call whose body runs elsewhere, and the way back for its
    result. Made by ``Turn.admit`` / ``aadmit``.

    ``admitted`` is True when the body may run: run it with ``arguments`` and hand
    its answer to ``complete`` (or its failure to ``fail``). Otherwise the call was
    decided without the body (refused, or answered from a replay) and ``result`` is
    already final, exactly what ``turn.call`` would have returned.
    """

    __slots__ = ("_held", "_state", "admitted", "call_id", "result", "tool", "turn")

    def __init__(self, turn: Any, held: _Held | None, result: Any) -> None:
        self.turn = turn
        self._held = held
        self.admitted = held is not None
        self.result: ToolResult | None = None if held is not None else result
        self._state = _OPEN if held is not None else _CLOSED
        decided = held.inv if held is not None else result
        self.call_id: str = decided.call_id
        self.tool: str = decided.name if held is not None else decided.tool

    @property
    def arguments(self) -> Mapping[str, Any] | None:
        """What the body receives: the validated arguments with the bound values,
        read-only at every depth, secrets excluded (None when not admitted)."""
        return None if self._held is None else self._held.inv.arguments

    def __repr__(self) -> str:
        state = "open" if self._state == _OPEN else "settling" if self.open else "settled"
        return f"<Ticket {self.call_id!r} {self.tool!r} {state}>"

    @property
    def open(self) -> bool:
        """True until the ticket is completed, failed or closed with its turn."""
        return self._state != _CLOSED

    def complete(self, output: Any) -> ToolResult:
        """The body answered ``output``: steps 7-9 and the wrap-up, as ``turn.call``."""
        return self._settle(self._claim(), None, output)

    def fail(self, error: BaseException | str = Reason.RAISED) -> ToolResult:
        """The body failed: ``error`` is its exception (read as ``turn.call`` reads a
        tool's), or the reason ``"raised"`` or ``"timeout"``."""
        stop = _failure(error)
        return self._settle(self._claim(), stop, None)

    async def acomplete(self, output: Any) -> ToolResult:
        """``complete`` for async code: output guards and hooks awaited. Once begun,
        the call is settled to its end even if the caller is cancelled meanwhile."""
        await take_turn(self.turn)
        return await self._asettle(self._claim(), None, output)

    async def afail(self, error: BaseException | str = Reason.RAISED) -> ToolResult:
        """``fail`` for async code."""
        stop = _failure(error)
        await take_turn(self.turn)
        return await self._asettle(self._claim(), stop, None)

    # -- settling -------------------------------------------------------------------

    def _claim(self) -> _Held:
        held = self._take()
        if held is None:
            raise TicketClosed(f"ticket {self.call_id!r} ({self.tool}) is already settled")
        return held

    def _take(self) -> _Held | None:
        """The held call, once: the first taker settles it; None for every later one."""
        with self.turn.lock:
            if self._state != _OPEN:
                return None
            self._state = _SETTLING
            tickets = self.turn._tickets
            if tickets is not None:
                tickets.discard(self)
        return self._held

    def _settle(self, held: _Held, stop: Stop | None, value: Any) -> ToolResult:
        args = self._settle_args(held, stop, value)
        try:
            result: ToolResult = held.context.run(held.pipeline.settle, *args)
        except BaseException:  # a stop: the call was recorded as ``interrupted``
            self._state = _CLOSED
            raise
        return self._closed(result)

    async def _asettle(self, held: _Held, stop: Stop | None, value: Any) -> ToolResult:
        """The steps after the body, in the ticket's context, run to their end
        whatever happens to the caller: the body's answer is already in hand."""
        args = self._settle_args(held, stop, value)
        task = asyncio.create_task(held.pipeline.asettle(*args), context=held.context)
        task.add_done_callback(self._settled)  # before the caller hears: it sees it closed
        result: ToolResult = await asyncio.shield(task)
        return result

    def _settled(self, task: asyncio.Task[ToolResult]) -> None:
        if task.cancelled() or task.exception() is not None:
            self._state = _CLOSED  # a stop: the call was recorded as ``interrupted``
        else:
            self._closed(task.result())

    def _closed(self, result: ToolResult) -> ToolResult:
        self.result = result  # before ``open`` turns False: whoever sees it closed sees this
        self._state = _CLOSED
        return result

    def _settle_args(self, held: _Held, stop: Stop | None, value: Any) -> tuple[Any, ...]:
        deadline = held.plan.tool.deadline_ns
        # A body that answered after the tool's timeout is late, wherever it ran.
        late = stop is None and deadline is not None and is_late(held.began, deadline)
        return (
            self.turn,
            held.plan,
            held.inv,
            held.records,
            held.escapes,
            held.verdict,
            stop,
            value,
            held.start,
            late,
            held.secrets,
        )


def _failure(error: Any) -> Stop:
    """What a body's failure handed to ``fail`` means for the call; read without
    calling anything the object defines."""
    cls = type(error)
    if issubclass(cls, Exception) and not issubclass(cls, UsageError):
        return failure(error)
    if issubclass(cls, BaseException):  # a stop or misuse of the body: its failure
        return Stop(Outcome.ERROR, Reason.RAISED, None, error)
    if cls is Reason or cls is str:
        reason = _FAILS.get(str.__str__(error))
        if reason is not None:
            return Stop(Outcome.ERROR, reason)
    raise UsageError("fail() takes an exception, or the reason 'raised' or 'timeout'")


# -- the entry points ---------------------------------------------------------------


def admit(turn: Any, name: str, arguments: Any, call_id: str | None) -> Ticket:
    """Steps 1-6 of one call; a ticket holding it when the body may run."""
    context = contextvars.copy_context()
    hold = partial(_hold, context)
    return _ticket(
        turn, context.run(turn.engine._pipeline.run, turn, name, arguments, call_id, hold)
    )


async def aadmit(turn: Any, name: str, arguments: Any, call_id: str | None) -> Ticket:
    """``admit`` for async code: async guards and hooks awaited."""
    context = contextvars.copy_context()
    coro = turn.engine._pipeline.arun(turn, name, arguments, call_id, partial(_hold, context))
    return _ticket(turn, await asyncio.create_task(coro, context=context))


def _ticket(turn: Any, got: Any) -> Ticket:
    """The ticket ``_hold`` made, or a settled one for a call decided without the body."""
    if got.__class__ is ToolResult:
        return Ticket(turn, None, got)
    ticket: Ticket = got
    return ticket


def _pending(turn: Any) -> list[tuple[Ticket, _Held]]:
    """The turn's open tickets, each taken once (one completing elsewhere is not)."""
    with turn.lock:
        tickets = list(turn._tickets or ())
    taken = []
    for ticket in tickets:
        held = ticket._take()
        if held is not None:
            taken.append((ticket, held))
    return taken


def end_tickets(turn: Any) -> list[ToolResult]:
    """Settle every ticket of ``turn`` still open as ``error`` / ``not_completed``."""
    return [ticket._settle(held, NOT_COMPLETED, None) for ticket, held in _pending(turn)]


async def aend_tickets(turn: Any) -> list[ToolResult]:
    """``end_tickets`` for async code: every ticket taken is settled, even if the
    caller is cancelled meanwhile."""
    return await to_the_end(_asettle_all(_pending(turn)))


async def _asettle_all(taken: list[tuple[Ticket, _Held]]) -> list[ToolResult]:
    return [await ticket._asettle(held, NOT_COMPLETED, None) for ticket, held in taken]


async def take_turn(turn: Any) -> None:
    """Wait for this call's turn on the event loop (``_fair``), as every async entry
    point does before any work."""
    slice = turn.engine.loop_slice
    if slice is not None and (place := _fair.enter(slice)) is not None:
        await place
