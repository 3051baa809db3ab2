"""The paid-call choke-point: one wrapper for every call that spends money.

``PaidCall`` reserves the estimated cost against the daily cap and the
per-instance cap before the call, runs and measures it, settles the actual
cost, appends a ``paid_call`` audit row (tokens, cost, duration, outcome) and
checks the caps again after the call. Crossing a cap raises ``CapExceeded``, a
non-retryable ``LimitExceeded``: inside a tool the model sees ``limit``.

The bound under concurrency: a call is admitted only while
``spent + reserved + estimate <= cap``, atomically in the store. So the total
spent never exceeds the cap by more than the sum, over calls already admitted,
of ``actual cost - estimate``; with an estimate at least the actual cost
(for example ``max_tokens`` times the output price), never.

Reservations are leased (``_leases``): renewed while the call runs, given
back at most ``lease`` seconds after the holding process died. A settlement
that was not written (the store failed, or the SQLite pass that carried it
did not commit) is written once more in a transaction of its own, if every
lease of the call is still held: the reservation is given back and the
spend counted once, instead of the reservation staying held until its lease
lapses. The caller is told of the failure either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from typing import Any, NamedTuple

from .._aio import consume, to_the_end
from .._call_state import current
from ..errors import ConfigurationError, LimitExceeded, UsageError
from ..native._tuples import make
from ..store import AuditRow, Store, StoreUnavailable, from_micros, to_micros
from ..store.steps import Steps, akept, aperform, asubmit, call, perform
from ._leases import Held, renewer

__all__ = ["CapExceeded", "PaidCall", "TokenPrices", "Usage"]

log = logging.getLogger("guardrails")


@dataclass(frozen=True, slots=True)
class Usage:
    """What one paid call consumed."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0


class TokenPrices:
    """Cost from token counts, with prices you supply (per million tokens).

    Reads ``usage.input_tokens``/``output_tokens`` (Anthropic) or
    ``usage.prompt_tokens``/``completion_tokens`` (OpenAI) from a response
    object or dict. No price table ships with the library.
    """

    __slots__ = ("input_per_mtok", "output_per_mtok")

    def __init__(self, input_per_mtok: float, output_per_mtok: float) -> None:
        if input_per_mtok < 0 or output_per_mtok < 0:
            raise ConfigurationError("token prices must not be negative")
        self.input_per_mtok = input_per_mtok
        self.output_per_mtok = output_per_mtok

    def __call__(self, response: Any) -> Usage:
        usage = _field(response, "usage")
        tokens_in = _field(usage, "input_tokens", "prompt_tokens") or 0
        tokens_out = _field(usage, "output_tokens", "completion_tokens") or 0
        cost = (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6
        return Usage(int(tokens_in), int(tokens_out), cost)

    def most(self, max_tokens: int, prompt_tokens: int = 0) -> float:
        """The highest cost of one call: an estimate that makes the cap exact."""
        return (prompt_tokens * self.input_per_mtok + max_tokens * self.output_per_mtok) / 1e6


class CapExceeded(LimitExceeded):
    """A spending cap was crossed. ``cap`` is ``daily`` or ``instance``."""

    def __init__(self, cap: str, key: str) -> None:
        super().__init__(f"{cap} spending cap reached ({key})")
        self.cap = cap
        self.key = key


class _Ticket(NamedTuple):
    keys: tuple[str, ...]
    caps: tuple[int, ...]
    reserved: int
    instance: str | None
    start: int
    holder: str


class _Spend(NamedTuple):
    """What a finished call spent and its row, measured once: its settlement may be written twice."""

    usage: Usage
    row: AuditRow


_NOTHING = Usage()
_DAY = 86_400  # seconds in a UTC day (POSIX time counts no leap seconds)
_EDGE = 0.001
"""How close to midnight a time must be for its day to be read from the calendar again
(``datetime`` rounds a timestamp to the microsecond, which may carry it to the next day)."""


class PaidCall:
    """Wraps paid or effectful calls: caps before and after, one audit row each."""

    def __init__(
        self,
        store: Store,
        *,
        usage: Callable[[Any], Usage],
        daily_cap: float | None = None,
        instance_cap: float | None = None,
        estimate: float | Callable[[Mapping[str, Any]], float] = 0.0,
        scope: str = "default",
        name: str = "paid_call",
        clock: Callable[[], float] = time.time,
        lease: float = 60.0,
    ) -> None:
        if not lease > 0:
            raise ConfigurationError(f"{name}: lease must be positive, not {lease!r}")
        for label, cap in (("daily_cap", daily_cap), ("instance_cap", instance_cap)):
            if cap is not None and not cap > 0:
                raise ConfigurationError(f"{name}: {label} must be positive, not {cap!r}")
        if not callable(usage):
            raise ConfigurationError(f"{name}: usage must be a function of the response")
        self.store = store
        self.usage = usage
        self.daily_cap = daily_cap
        self.instance_cap = instance_cap
        self.estimate = estimate
        self.scope = scope
        self.name = name
        self.clock = clock
        self.lease = lease
        self._day: tuple[float, str] = (math.nan, "")  # the last UTC day number, and its key
        # Bound once: a call waiting for its reservation holds this, not a method of its own.
        self._lost: Callable[[_Ticket], None] = self._give_back
        self._held = Held(store, lease, clock)

    # -- the two drivers ------------------------------------------------------------

    def __call__(
        self, fn: Callable[..., Any], /, *args: Any, instance: str | None = None, **kwargs: Any
    ) -> Any:
        ticket = self._hold(perform(self.store, self._admit(instance, kwargs)))
        try:
            response = fn(*args, **kwargs)
        except Exception as exc:
            self._finish(ticket, None, exc)
            raise
        self._finish(ticket, response, None)
        return response

    async def acall(
        self, fn: Callable[..., Any], /, *args: Any, instance: str | None = None, **kwargs: Any
    ) -> Any:
        # The reservation and the settlement never block the event loop (``akept``,
        # ``aperform``). Cancelled while the reservation is being made, the
        # caller leaves at once and the reservation is given back once made.
        ticket = self._hold(await akept(self.store, self._admit(instance, kwargs), lost=self._lost))
        try:
            response = await fn(*args, **kwargs)
        except asyncio.CancelledError as exc:
            # The caller gave up: the reservation is given back (and the row
            # written), to the end even if the caller is cancelled again.
            await to_the_end(self._afinish_quietly(ticket, exc))
            raise
        except BaseException as exc:  # a failure, or a stop: the reservation is given back too
            await self._afinish(ticket, None, exc)
            raise
        await self._afinish(ticket, response, None)
        return response

    def _finish(self, ticket: _Ticket, response: Any, exc: BaseException | None) -> None:
        spend = self._spend(ticket, response, exc)
        try:
            perform(self.store, self._settle(ticket, spend, exc))
        except StoreUnavailable:
            perform(self.store, self._settle_again(ticket, spend))
            raise

    async def _afinish(self, ticket: _Ticket, response: Any, exc: BaseException | None) -> None:
        spend = self._spend(ticket, response, exc)
        try:
            await aperform(self.store, self._settle(ticket, spend, exc))
        except StoreUnavailable:
            await aperform(self.store, self._settle_again(ticket, spend))
            raise

    async def _afinish_quietly(self, ticket: _Ticket, exc: BaseException) -> None:
        """``_afinish`` of a call that ended with ``exc`` (a cancellation), which goes on."""
        with contextlib.suppress(StoreUnavailable):  # logged by _settle and _settle_again
            await self._afinish(ticket, None, exc)

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with every call going through this wrapper (sync or async, detected once)."""
        if inspect.iscoroutinefunction(fn):

            @wraps(fn)
            async def paid_async(*args: Any, **kwargs: Any) -> Any:
                return await self.acall(fn, *args, **kwargs)

            return paid_async

        @wraps(fn)
        def paid(*args: Any, **kwargs: Any) -> Any:
            return self(fn, *args, **kwargs)

        return paid

    # -- reading the counters ----------------------------------------------------------

    def spent_today(self) -> float:
        return from_micros(self.store.budget(self._daily_key())[0])

    def spent_by(self, instance: str) -> float:
        return from_micros(self.store.budget(self._instance_key(instance))[0])

    # -- pure-ish steps shared by the drivers --------------------------------------------

    def _daily_key(self) -> str:
        now = self.clock()
        # The key of the last day seen, while the clock reads a plain number inside that
        # day and not within a millisecond of its ends; anything else asks the calendar.
        if type(now) is float or type(now) is int:
            day, into = divmod(now, _DAY)
            if _EDGE <= into <= _DAY - _EDGE:
                last, key = self._day
                if day == last:
                    return key
                key = self._calendar_key(now)
                self._day = (day, key)
                return key
        return self._calendar_key(now)

    def _calendar_key(self, now: Any) -> str:
        day = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
        return f"spend:{self.scope}:day:{day}"

    def _instance_key(self, instance: str) -> str:
        return f"spend:{self.scope}:instance:{instance}"

    def _admit(self, instance: str | None, kwargs: Mapping[str, Any]) -> Steps[_Ticket]:
        if instance is None:
            state = current()
            if state is not None:
                instance = state.context.workflow or state.context.session
        if self.instance_cap is not None and instance is None:
            raise UsageError(
                f"{self.name}: an instance cap is set but the call has no workflow instance "
                "(pass instance=, or run it inside a tool call of a turn with workflow= or session=)"
            )
        estimate = self.estimate(kwargs) if callable(self.estimate) else self.estimate
        reserved = to_micros(estimate)
        keys: list[str] = []
        caps: list[int] = []
        if self.daily_cap is not None:
            keys.append(self._daily_key())
            caps.append(to_micros(self.daily_cap))
        if self.instance_cap is not None and instance is not None:
            keys.append(self._instance_key(instance))
            caps.append(to_micros(self.instance_cap))
        holder = os.urandom(16).hex()  # as random as a uuid4, a fifth of its cost
        admitted: list[str] = []
        for key, cap in zip(keys, caps, strict=True):
            now = self.clock()
            granted = yield call(
                "reserve_leased", key, holder, reserved, cap, now, now + self.lease
            )
            if not granted:
                for done in admitted:
                    yield call("settle_leased", done, holder, 0)
                kind = "daily" if key == keys[0] and self.daily_cap is not None else "instance"
                yield from self._refused(instance, kind)
                raise CapExceeded(kind, key)
            admitted.append(key)
        start = time.perf_counter_ns()
        return make(_Ticket, (tuple(keys), tuple(caps), reserved, instance, start, holder))

    def _hold(self, ticket: _Ticket) -> _Ticket:
        # Renewed from here on, by the caller once it has the ticket: a caller
        # that never gets it (cancelled meanwhile) leaves a lease that expires,
        # or has its reservation given back once it is made (``_give_back``).
        if ticket.keys:
            held = self._held  # one per wrapper, made again if its store, lease or clock changed
            if (
                held.store is not self.store
                or held.lease != self.lease
                or held.clock is not self.clock
            ):
                held = self._held = Held(self.store, self.lease, self.clock)
            renewer.hold(ticket.holder, held)
        return ticket

    def _spend(self, ticket: _Ticket, response: Any, exc: BaseException | None) -> _Spend:
        duration_us = (time.perf_counter_ns() - ticket.start) // 1000
        usage = _NOTHING
        if exc is None:
            try:
                usage = self.usage(response)
            except Exception:
                log.warning("%s: usage of the response could not be read", self.name)
                usage = Usage(cost=from_micros(ticket.reserved))
        return make(_Spend, (usage, self._row(ticket, usage, duration_us, exc)))

    def _settle(self, ticket: _Ticket, spend: _Spend, exc: BaseException | None) -> Steps[None]:
        renewer.drop(ticket.holder)
        try:
            crossed = yield from self._record(ticket, spend)
        except StoreUnavailable:
            log.error("%s: spend could not be recorded; stopping", self.name)
            raise
        state = current()
        if state is not None:
            state.paid_calls += 1
            state.tokens_in += spend.usage.tokens_in
            state.tokens_out += spend.usage.tokens_out
            state.cost += spend.usage.cost
        if crossed is not None and exc is None:
            raise CapExceeded(*crossed)

    def _record(self, ticket: _Ticket, spend: _Spend) -> Steps[tuple[str, str] | None]:
        """The settlement of every key, then the row; the first cap crossed (kind, key), if any."""
        actual = to_micros(spend.usage.cost)
        crossed: tuple[str, str] | None = None
        for index, (key, cap) in enumerate(zip(ticket.keys, ticket.caps, strict=True)):
            spent = yield call("settle_leased", key, ticket.holder, actual)
            if spent > cap and crossed is None:
                crossed = (
                    "daily" if index == 0 and self.daily_cap is not None else "instance",
                    key,
                )
        yield call("append", spend.row)
        return crossed

    def _settle_again(self, ticket: _Ticket, spend: _Spend) -> Steps[None]:
        """A settlement that was not written, once more in a transaction of its own.

        Only while every lease of the call is still held (renewed here, so
        none lapses meanwhile): then no part of the first attempt was
        written, and the spend is counted once. Its caller was already told
        of the failure; this gives the reservation back instead of leaving
        it held until its lease lapses.
        """
        if not ticket.keys:
            return  # nothing reserved
        try:
            now = self.clock()
            held = yield call("renew_leases", ticket.holder, now + self.lease)
            if held == len(ticket.keys):
                yield from self._record(ticket, spend)
                return
        except StoreUnavailable:
            pass
        log.error("%s: reservation not given back; it lapses with its lease", self.name)

    def _give_back(self, ticket: _Ticket) -> None:
        """The reservation of a caller cancelled while it was being made, given back."""
        spend = self._spend(ticket, None, asyncio.CancelledError())
        settling = asubmit(self.store, self._settle(ticket, spend, asyncio.CancelledError()))
        settling.add_done_callback(lambda done: self._give_back_again(done, ticket, spend))

    def _give_back_again(
        self, settling: asyncio.Future[None], ticket: _Ticket, spend: _Spend
    ) -> None:
        if not settling.cancelled() and isinstance(settling.exception(), StoreUnavailable):
            asubmit(self.store, self._settle_again(ticket, spend)).add_done_callback(consume)

    def _row(
        self, ticket: _Ticket, usage: Usage, duration_us: int, exc: BaseException | None
    ) -> AuditRow:
        # In column order, in one step: AuditRow's keyword-taking __new__ costs five times more.
        return make(
            AuditRow,
            (
                *self._columns(ticket.instance),
                "ok" if exc is None else "error",
                None,  # verdict
                None,  # reason
                None,  # verdicts
                None,  # escapes
                duration_us,
                usage.tokens_in,
                usage.tokens_out,
                usage.cost,
                None if exc is None else type(exc).__name__,
                None,  # error
                None,  # detail
                None,  # altered: set by the store
                None,  # id: given by the store
            ),
        )

    def _columns(self, instance: str | None) -> tuple[Any, ...]:
        """The first columns of every ``paid_call`` row: when, the tool call it was made
        in and its context (when it was made in one), the instance and this wrapper."""
        state = current()
        ctx = state.context if state is not None else None
        return (
            "paid_call",
            self.clock(),
            None if state is None else state.call_id,
            None if ctx is None else ctx.tenant,
            None if ctx is None else ctx.session,
            None if ctx is None else ctx.agent,
            instance,
            self.name,
        )

    def _refused(self, instance: str | None, kind: str) -> Steps[None]:
        # The outcome, no verdict, the reason; the other columns empty.
        columns = (*self._columns(instance), "limit", None, f"{kind}_cap")
        row = make(AuditRow, columns + (None,) * (len(AuditRow._fields) - len(columns)))
        try:
            yield call("append", row)
        except StoreUnavailable:
            log.warning("%s: refusal row not written", self.name)


def _field(obj: Any, *names: str) -> Any:
    for name in names:
        value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        if value is not None:
            return value
    return None
