"""Guards, and the boundary that keeps whatever a guard does from escaping it.

A guard is a plain callable that takes the subject of its choke-point and
returns a ``Verdict`` or a ``GuardResult``. ``@guard`` attaches a name and
options. Whatever happens inside the guard (an exception, a timeout, a return
value that is not a verdict, missing configuration) becomes ``not_evaluated``
plus a recorded ``Escape``; a fail-closed guard gives ``reject`` instead, and
the escape is recorded all the same.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from time import perf_counter_ns
from typing import Any, overload

from ._aio import (
    acall_with_timeout,
    await_with_timeout,
    call_with_timeout,
    late,
    run_coroutine,
    stops,
)
from .context import Escape, GuardResult, VerdictRecord
from .errors import ConfigurationError, NotConfigured, UsageError
from .native._tuples import make
from .observe._metric_names import FAULT_REASONS
from .store import offloop
from .verdicts import ChokePoint, EscapeReason, Outcome, Verdict

__all__ = ["Guard", "GuardOutcome", "PlainStep", "evaluate_plain", "guard", "plain_steps"]

log = logging.getLogger("guardrails")

_new = make  # tuple.__new__ without its call path
_Record = VerdictRecord
# Members read once: on Python 3.11 ``Enum.MEMBER`` goes through the class's
# ``__getattr__``, several times the cost of a global.
_NOT_EVALUATED = Verdict.NOT_EVALUATED
_PASS = Verdict.PASS
_REJECT = Verdict.REJECT
_ESCAPE_TIMEOUT = EscapeReason.TIMEOUT
_ESCAPE_INVALID_RETURN = EscapeReason.INVALID_RETURN
_ESCAPE_DECLINED = EscapeReason.DECLINED
_ESCAPE_OBSERVE_ONLY = EscapeReason.OBSERVE_ONLY
_ESCAPE_NOT_CONFIGURED = EscapeReason.NOT_CONFIGURED
_ESCAPE_RAISED = EscapeReason.RAISED

_REJECT_OUTCOMES = frozenset({Outcome.INVALID_ARGS, Outcome.LIMIT, Outcome.UNAVAILABLE})

# What one evaluation produced: the record, an escape or None, and the
# parameter names a rejecting guard pointed at.
GuardOutcome = tuple[VerdictRecord, Escape | None, tuple[str, ...]]


class Guard:
    """A named rule with its options. Calling it calls the function directly."""

    __slots__ = (
        "_deadline_ns",
        "_plain",
        "choke_points",
        "defined_at",
        "fail_closed",
        "fn",
        "is_async",
        "name",
        "observe",
        "outcome",
        "reads_store",
        "timeout",
        "tools",
    )

    def __init__(
        self,
        fn: Callable[[Any], Any],
        *,
        name: str | None = None,
        at: ChokePoint | str | Iterable[ChokePoint | str] = ChokePoint.TOOL_CALL,
        outcome: Outcome | str = Outcome.UNAVAILABLE,
        fail_closed: bool = False,
        timeout: float | None = None,
        observe: bool = False,
        tools: Iterable[str] | None = None,
    ) -> None:
        if not callable(fn):
            raise ConfigurationError(f"guard {name or fn!r}: not callable")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        if type(self.name) is not str:
            raise ConfigurationError(f"guard {fn!r}: the name must be a str")
        self.defined_at = _where(fn)
        points = (at,) if isinstance(at, str) else tuple(at)
        try:
            self.choke_points = frozenset(ChokePoint(p) for p in points)
        except ValueError:
            raise ConfigurationError(
                f"guard {self.name!r} ({self.defined_at}): unknown choke-point in {points!r}"
            ) from None
        if not self.choke_points:
            raise ConfigurationError(f"guard {self.name!r} ({self.defined_at}): no choke-point")
        try:
            self.outcome = Outcome(outcome)
        except ValueError:
            self.outcome = None  # type: ignore[assignment]
        if self.outcome not in _REJECT_OUTCOMES:
            raise ConfigurationError(
                f"guard {self.name!r} ({self.defined_at}): a reject maps to invalid_args, "
                f"limit or unavailable, not {outcome!r}"
            )
        if timeout is not None and not timeout > 0:
            raise ConfigurationError(f"guard {self.name!r}: timeout must be positive")
        self.fail_closed = fail_closed
        self.timeout = timeout
        self._deadline_ns = None if timeout is None else int(timeout * 1e9)
        self.observe = observe
        self.tools = None if tools is None else frozenset(tools)
        self.is_async = _is_async(fn)
        # A sync guard whose function reads a store says so (``reads_store``, the
        # store): under the async drivers it runs on the store's threads.
        self.reads_store = None if self.is_async else getattr(fn, "reads_store", None)
        # A sync guard without timeout or observe mode: the short path in evaluate().
        self._plain = (
            not self.is_async and timeout is None and not observe and self.reads_store is None
        )

    def __call__(self, subject: Any) -> Any:
        return self.fn(subject)

    def __repr__(self) -> str:
        return f"<Guard {self.name!r} at {sorted(self.choke_points)}>"

    @property
    def plain(self) -> bool:
        """A sync guard without timeout or observe mode (see ``evaluate_plain``)."""
        return self._plain

    def applies_to(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools

    # -- the boundary -------------------------------------------------------

    def evaluate(self, subject: Any, point: ChokePoint) -> GuardOutcome:
        """Run the guard from sync code; never raises (but see ``stops``)."""
        start = perf_counter_ns()
        try:
            if self._plain:
                returned = self.fn(subject)
                if type(returned) is Verdict and returned is not _NOT_EVALUATED:
                    # The common case, kept short: a plain pass or reject.
                    elapsed = perf_counter_ns() - start
                    record = _new(_Record, (self.name, point, returned, None, None, elapsed, True))
                    return record, None, ()
            elif self.is_async:
                returned = run_coroutine(self.fn(subject), self.timeout)
            elif self.timeout is None:
                returned = self.fn(subject)
            else:
                returned = call_with_timeout(self.fn, self.timeout, subject)
        except UsageError:
            raise
        except Exception as exc:
            return self._failed(point, start, exc)
        except BaseException as exc:
            if stops(exc):
                raise
            return self._failed(point, start, exc)
        if late(start, self._deadline_ns):
            # An answer after the deadline (a guard that blocked, or swallowed
            # its cancellation) is a timeout, whatever it says.
            return self._failed(point, start, None, _ESCAPE_TIMEOUT)
        return self.interpret(returned, point, start)

    async def aevaluate(self, subject: Any, point: ChokePoint) -> GuardOutcome:
        """Run the guard from async code; never raises (but see ``stops``)."""
        if self.reads_store is not None:
            # The same boundary, on the store's threads: the event loop goes on.
            return await offloop.run(self.reads_store, self.evaluate, subject, point)
        start = perf_counter_ns()
        try:
            if self.is_async:
                if self.timeout is None:
                    returned = await self.fn(subject)
                else:
                    returned = await await_with_timeout(self.fn(subject), self.timeout)
            elif self.timeout is None:
                returned = self.fn(subject)
            else:
                returned = await acall_with_timeout(self.fn, self.timeout, subject)
        except UsageError:
            raise
        except Exception as exc:
            return self._failed(point, start, exc)
        except BaseException as exc:
            if stops(exc):
                raise
            return self._failed(point, start, exc)
        if late(start, self._deadline_ns):
            return self._failed(point, start, None, _ESCAPE_TIMEOUT)
        return self.interpret(returned, point, start)

    def interpret(self, returned: Any, point: ChokePoint, start: int) -> GuardOutcome:
        """Turn what the guard returned into a record (pure)."""
        elapsed = perf_counter_ns() - start
        cls = type(returned)
        if cls is Verdict:
            verdict: Verdict = returned
            reason = evidence = None
            params: tuple[str, ...] = ()
            escape_reason: EscapeReason | None = None
        elif cls is GuardResult:
            verdict, reason, evidence = returned.verdict, returned.reason, returned.evidence
            params, escape_reason = _checked_extras(returned.params, returned.escape)
            if (
                type(verdict) is not Verdict
                or params is None
                or not (reason is None or type(reason) is str)
            ):
                return self._failed(point, start, None, _ESCAPE_INVALID_RETURN)
        else:
            return self._failed(point, start, None, _ESCAPE_INVALID_RETURN)

        if verdict is _NOT_EVALUATED:
            # A guard may say why it declined (for example not_configured).
            why = escape_reason or _ESCAPE_DECLINED
            return self._failed(point, start, None, why, reason, evidence)
        escape = None
        if self.observe:
            if verdict is _REJECT:
                escape = Escape(self.name, point, _ESCAPE_OBSERVE_ONLY)
        elif escape_reason is not None and (verdict is _PASS or escape_reason in FAULT_REASONS):
            # A pass let through on purpose (an escape), or a refusal because the
            # guard could not decide (a fault, as a fail-closed guard's).
            escape = Escape(self.name, point, escape_reason)
        record = _new(
            _Record, (self.name, point, verdict, reason, evidence, elapsed, not self.observe)
        )
        return record, escape, params

    def _failed(
        self,
        point: ChokePoint,
        start: int,
        exc: BaseException | None,
        reason: EscapeReason | None = None,
        code: str | None = None,
        evidence: Any = None,
    ) -> GuardOutcome:
        if reason is None:
            if isinstance(exc, TimeoutError):
                reason = _ESCAPE_TIMEOUT
            elif isinstance(exc, NotConfigured):
                reason = _ESCAPE_NOT_CONFIGURED
            else:
                reason = _ESCAPE_RAISED
        if exc is not None:
            log.debug("guard %r raised at %s", self.name, point, exc_info=exc)
        verdict = _REJECT if self.fail_closed and not self.observe else _NOT_EVALUATED
        record = VerdictRecord(
            self.name,
            point,
            verdict,
            code or str(reason),
            evidence,
            perf_counter_ns() - start,
            not self.observe,
        )
        return record, Escape(self.name, point, reason, exc), ()


# One plain guard as the loop reads it: the guard, its function and its name.
PlainStep = tuple["Guard", Callable[[Any], Any], str]


def plain_steps(guards: Iterable[Guard]) -> tuple[PlainStep, ...]:
    """The steps of ``evaluate_plain``, made once (at registration)."""
    return tuple((g, g.fn, g.name) for g in guards)


def evaluate_plain(
    steps: tuple[PlainStep, ...], subject: Any, point: ChokePoint
) -> tuple[list[VerdictRecord], bool] | list[GuardOutcome]:
    """Plain guards (``Guard.plain``) evaluated in one loop; never raises (but see ``stops``).

    While every guard answers a bare ``pass`` or ``reject``: ``(records,
    rejected)``, one clock read per guard (each record's duration runs from the
    end of the guard before it). As soon as one does anything else (raises,
    declines, returns a ``GuardResult`` or junk), the outcomes of every guard
    exactly as ``evaluate`` gives them; no guard is called twice.
    """
    records: list[VerdictRecord] = []
    append = records.append
    rejected = False
    clock = perf_counter_ns()
    for guard, fn, name in steps:
        try:
            returned = fn(subject)
        except UsageError:
            raise
        except Exception as exc:
            return _and_the_rest(steps, records, guard._failed(point, clock, exc), subject, point)
        except BaseException as exc:
            if stops(exc):
                raise
            return _and_the_rest(steps, records, guard._failed(point, clock, exc), subject, point)
        now = perf_counter_ns()
        if returned is not _PASS:
            if returned is not _REJECT:
                outcome = guard.interpret(returned, point, clock)
                return _and_the_rest(steps, records, outcome, subject, point)
            rejected = True
        append(_new(_Record, (name, point, returned, None, None, now - clock, True)))
        clock = now
    return records, rejected


def _and_the_rest(
    steps: tuple[PlainStep, ...],
    records: list[VerdictRecord],
    outcome: GuardOutcome,
    subject: Any,
    point: ChokePoint,
) -> list[GuardOutcome]:
    """The outcomes so far in ``evaluate``'s form, then the remaining guards' own."""
    done: list[GuardOutcome] = [(record, None, ()) for record in records]
    done.append(outcome)
    done.extend(step[0].evaluate(subject, point) for step in steps[len(done) :])
    return done


_ESCAPE_REASONS = frozenset(EscapeReason)


def _checked_extras(params: Any, escape: Any) -> tuple[Any, Any]:
    """``(params as a tuple of names, escape)``; params is None when malformed.

    Only exact types are read (a tuple or list of exact ``str``; an
    ``EscapeReason`` or its exact string), so nothing the guard defined runs here.
    """
    cls = type(params)
    if cls is not tuple and cls is not list:
        return None, None
    if not all(type(name) is str for name in params):
        return None, None
    if escape is None:
        return tuple(params), None
    if (type(escape) is EscapeReason or type(escape) is str) and escape in _ESCAPE_REASONS:
        return tuple(params), EscapeReason(escape)
    return None, None


@overload
def guard(fn: Callable[[Any], Any], /) -> Guard: ...
@overload
def guard(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    at: ChokePoint | str | Iterable[ChokePoint | str] = ChokePoint.TOOL_CALL,
    outcome: Outcome | str = Outcome.UNAVAILABLE,
    fail_closed: bool = False,
    timeout: float | None = None,
    observe: bool = False,
    tools: Iterable[str] | None = None,
) -> Callable[[Callable[[Any], Any]], Guard]: ...
def guard(
    fn: Callable[[Any], Any] | None = None, /, **options: Any
) -> Guard | Callable[[Callable[[Any], Any]], Guard]:
    """Make a function a guard. Works bare (``@guard``) or with options.

    Options: ``name`` (defaults to the function's name), ``at`` (the
    choke-point or choke-points; default ``tool_call``), ``outcome`` (what a
    ``reject`` means at tool_call: ``invalid_args``, ``limit`` or
    ``unavailable``, the default), ``fail_closed``, ``timeout`` (seconds),
    ``observe`` (record, never enforce) and ``tools`` (names the guard applies
    to at tool_call; default all).
    """
    if fn is not None:
        return Guard(fn, **options)

    def decorate(f: Callable[[Any], Any]) -> Guard:
        return Guard(f, **options)

    return decorate


def as_guard(obj: Any) -> Guard:
    """A ``Guard`` from a guard or any callable (named after it)."""
    return obj if isinstance(obj, Guard) else Guard(obj)


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a class with async __call__
    )


def _where(fn: Any) -> str:
    method = type(fn).__call__ if not inspect.isfunction(fn) else None
    code = getattr(fn, "__code__", None) or getattr(method, "__code__", None)
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{code.co_firstlineno}"
