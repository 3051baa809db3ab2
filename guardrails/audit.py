"""The append-only audit log: a row for every tool call and every choke-point decision.

``AuditLog`` is both a ``CallHook`` and a ``Recorder``; register it as both::

    audit = AuditLog(store)
    rails = Guardrails(tools, hooks=[audit], recorder=[audit])

As a hook (put it first, so its ``after`` runs last) it writes the row of
every call that reached step 6, before the result is returned, and decides
what happens when the row cannot be written:

- a tool declared ``effect=True`` first writes a ``call_started`` row; if that
  fails the tool does not run and the outcome is ``unavailable``
  (reason ``audit_unavailable``);
- a read-only tool runs; a final row that cannot be written is added to the
  result as an escape with reason ``audit_unavailable``.

As a recorder it writes the rows of calls refused before step 6 (unknown
tool, not offered, bad arguments, a guard's reject) and of ``pre_turn``,
``post_run`` and ``backstop`` events. Argument values are never written;
exception text only with ``exception_text=True``.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._call_state import CallState, closed, opened
from .context import Escape, Invocation, ToolResult, TurnContext, VerdictRecord
from .middleware.tool_call import Stop
from .native._tuples import make, replaced
from .observe._approval_event import APPROVAL
from .observe._audit_json import decode_escapes, decode_verdicts
from .store import AuditRow, Store, offloop
from .store.held import hold
from .verdicts import ChokePoint, EscapeReason, Outcome, Reason, Verdict

__all__ = ["AUDITED", "AuditLog", "decode_escapes", "decode_verdicts"]

log = logging.getLogger("guardrails")

AUDITED = "audited"
"""The flag ``AuditLog.after`` puts on a result whose row it wrote."""

_MAX_ERROR_CHARS = 2000
_EVENT_DETAIL = ("offered", "withheld", "refusal", "guard", "tool", "outcome")


class AuditLog:
    """Writes audit rows to a ``Store``. Holds configuration only."""

    __slots__ = ("_engine", "clock", "exception_text", "name", "store")

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        exception_text: bool = False,
        name: str = "audit",
    ) -> None:
        self.store = store
        self.clock = clock
        self.exception_text = exception_text
        self.name = name
        self._engine: Any = None  # the engine this log records for (bind)

    def bind(self, engine: Any) -> AuditLog:
        """Record ``engine``'s revision on the rows of events that carry no turn.

        The engine calls it when it is given the log as a recorder.
        """
        self._engine = engine
        return self

    # -- CallHook ---------------------------------------------------------------

    def before(self, invocation: Invocation, /) -> Stop | None:
        row = self._started(invocation)
        if row is None:
            return None
        try:
            self.store.append(row)
        except Exception as exc:
            return _not_started(invocation, exc)
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        row = self._final(invocation, result)
        try:
            self.store.append(row)
        except Exception as exc:
            return self._missed(result, exc)
        return _with_flag(result)

    async def abefore(self, invocation: Invocation, /) -> Stop | None:
        """``before`` for ``acall``: the row is written off the event loop."""
        row = self._started(invocation)
        if row is None:
            return None
        try:
            await offloop.append(self.store, row)
        except Exception as exc:
            return _not_started(invocation, exc)
        return None

    async def aafter(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        """``after`` for ``acall``: committed off the loop before the result returns."""
        row = self._final(invocation, result)
        try:
            await offloop.append(self.store, row)
        except Exception as exc:
            return self._missed(result, exc)
        return _with_flag(result)

    def _started(self, invocation: Invocation) -> AuditRow | None:
        """The ``call_started`` row of an effectful tool, or None for a read-only one."""
        opened(invocation, self)  # the tool body (a PaidCall) adds its spend to this call
        tool = invocation.tool
        if tool is None or not tool.effect:
            return None
        ctx = invocation.context
        return AuditRow(
            "call_started", self.clock(), invocation.call_id, ctx.tenant, ctx.session,
            ctx.agent, ctx.workflow, invocation.name,
        )  # fmt: skip

    def _final(self, invocation: Invocation, result: ToolResult) -> AuditRow:
        state = closed(invocation, self)
        try:
            revision = _revision(invocation.turn)
            return self.tool_row(result, invocation.context, state, revision=revision)
        except Exception:  # a value nothing could encode: keep the row, without it
            return self._minimal_row(result, invocation.context)

    def _missed(self, result: ToolResult, exc: Exception) -> ToolResult:
        log.warning("audit row of call %s not written", result.call_id)
        missed = Escape(self.name, ChokePoint.TOOL_CALL, EscapeReason.AUDIT_UNAVAILABLE, exc)
        return result._replace(escapes=(*result.escapes, missed), flags=(*result.flags, AUDITED))

    # -- Recorder -----------------------------------------------------------------

    def on_tool_result(self, result: ToolResult, /) -> None:
        if AUDITED not in result.flags:
            self.store.append(self._row_of(result, None))

    def on_turn_result(self, turn: Any, result: ToolResult, /) -> None:
        """What ``Recorders`` calls: the turn gives refused calls their tenant and session."""
        if AUDITED not in result.flags:
            self.store.append(self._row_of(result, getattr(turn, "context", None), turn))

    def on_event(self, kind: str, payload: Any, /) -> None:
        if kind != APPROVAL:  # the held or run call's own row names its request
            self.store.append(self._event(kind, payload))

    async def aon_turn_result(self, turn: Any, result: ToolResult, /) -> None:
        """``on_turn_result`` for the async entry points: written off the event loop."""
        if AUDITED not in result.flags:
            row = self._row_of(result, getattr(turn, "context", None), turn)
            await offloop.append(self.store, row)

    async def aon_event(self, kind: str, payload: Any, /) -> None:
        """``on_event`` for the async entry points: written off the event loop."""
        if kind != APPROVAL:
            row = self._event(kind, payload)
            if not hold(self.store, row):  # (within a held call: committed with its row)
                await offloop.append(self.store, row)

    def _event(self, kind: str, payload: Any) -> AuditRow:
        try:
            return self.event_row(kind, payload)
        except Exception:
            return AuditRow(kind, self.clock(), detail=_INCOMPLETE)

    def _row_of(
        self, result: ToolResult, context: TurnContext | None, turn: Any = None
    ) -> AuditRow:
        try:
            return self.tool_row(result, context, None, revision=_revision(turn))
        except Exception:
            return self._minimal_row(result, context)

    def _minimal_row(self, result: ToolResult, context: TurnContext | None) -> AuditRow:
        """The columns that cannot fail; ``detail`` says the rest was unencodable."""
        ctx = context if isinstance(context, TurnContext) else _NO_CONTEXT
        return AuditRow(
            "tool_call", self.clock(), _code(getattr(result, "call_id", None)), ctx.tenant,
            ctx.session, ctx.agent, ctx.workflow, _code(getattr(result, "tool", None)),
            _code(getattr(result, "outcome", None)), _code(getattr(result, "verdict", None)),
            detail=_INCOMPLETE,
        )  # fmt: skip

    # -- rows -------------------------------------------------------------------------

    def tool_row(
        self,
        result: ToolResult,
        context: TurnContext | None,
        state: CallState | None,
        *,
        revision: str | None = None,
    ) -> AuditRow:
        """The row of one tool call. No argument values; exception text only if opted in.

        ``revision`` (the engine's rules, ``Guardrails.revision``) goes into ``detail``.
        """
        ctx = context or _NO_CONTEXT
        exc = result.exception
        verdicts, escapes = result.verdicts, result.escapes
        outcome, verdict, reason = result.outcome, result.verdict, result.reason
        tokens_in: int | None = None  # the spend of a call that paid for nothing
        tokens_out: int | None = None
        cost: float | None = None
        if state is not None and state.paid_calls > 0:
            tokens_in, tokens_out, cost = state.tokens_in, state.tokens_out, state.cost
        detail = None  # ``_tool_detail`` only when there is one: most rows have none
        if revision is not None or result.truncated or result.flags or (state and state.detail):
            detail = _tool_detail(result, state, revision)
        # A tuple in column order (built in one step: no starred item): AuditRow's
        # keyword-taking __new__ costs as much as the rest.
        return make(
            AuditRow,
            (
                "tool_call",
                self.clock(),
                result.call_id,
                ctx.tenant,
                ctx.session,
                ctx.agent,
                ctx.workflow,
                result.tool,
                # The pipeline's own codes read as their plain text without a call.
                outcome._value_ if type(outcome) is Outcome else _code(outcome),
                verdict._value_ if type(verdict) is Verdict else _code(verdict),
                None
                if reason is None
                else reason._value_
                if type(reason) is Reason
                else _code(reason),
                encode_verdicts(verdicts) if verdicts else None,
                encode_escapes(escapes) if escapes else None,
                result.duration_ns // 1000,
                tokens_in,
                tokens_out,
                cost,
                None if exc is None else _type_name(exc),
                _error_text(exc) if self.exception_text else None,
                None if detail is None else _json(detail),
                None,  # altered: set by the store
                None,  # id: given by the store
            ),
        )

    def event_row(self, kind: str, payload: Any) -> AuditRow:
        """The row of a pre_turn, post_run or backstop decision."""
        found: Any = getattr(payload, "context", None)
        ctx: TurnContext = found if issubclass(type(found), TurnContext) else _NO_CONTEXT
        verdict = getattr(payload, "verdict", None)
        records = getattr(payload, "verdicts", None) or getattr(payload, "records", None) or ()
        detail = {k: v for k in _EVENT_DETAIL if (v := _read(payload, k)) is not _ABSENT}
        revision = _revision(payload, via_turn=True) or _revision(self)
        if revision is not None:
            detail["revision"] = revision
        result = getattr(payload, "result", None)
        return AuditRow(
            kind,
            self.clock(),
            getattr(result, "call_id", None),
            ctx.tenant,
            ctx.session,
            ctx.agent,
            ctx.workflow,
            detail.get("tool") if type(detail.get("tool")) is str else None,
            None,
            _code(verdict),
            None,
            encode_verdicts(records),
            encode_escapes(getattr(payload, "escapes", None) or ()),
            detail=_json(detail) if detail else None,
        )

    # -- queries --------------------------------------------------------------------

    def rows(self, **filters: str) -> Iterator[AuditRow]:
        """Every row matching ``filters`` (column = value), oldest first, fetched in pages."""
        after = 0
        while True:
            page = self.store.audit_rows(after_id=after, limit=500, **filters)
            yield from page
            if len(page) < 500:
                return
            after = page[-1].id or 0

    def outcomes(self, **filters: str) -> Counter[tuple[str | None, str | None]]:
        """How many tool calls ended in each ``(tool, outcome)``."""
        return Counter((r.tool, r.outcome) for r in self.rows(kind="tool_call", **filters))


_NO_CONTEXT = TurnContext()
_INCOMPLETE = '{"row": "incomplete: a value could not be encoded"}'
_type_qualname = type.__dict__["__qualname__"].__get__
_FLAGS = ToolResult._fields.index("flags")


def _tool_detail(
    result: ToolResult, state: CallState | None, revision: str | None
) -> dict[str, Any] | None:
    """A tool row's ``detail``: the call state's, the revision, truncation and flags."""
    detail = None
    if state is not None and state.detail:
        detail = dict(state.detail)
    if revision is not None:
        detail = {} if detail is None else detail
        detail["revision"] = revision
    if result.truncated or result.flags:
        detail = {} if detail is None else detail
        if result.truncated:
            detail["truncated"] = True
        if result.flags:
            detail["flags"] = [f for f in result.flags if f != AUDITED]
    return detail


def _revision(turn: Any, *, via_turn: bool = False) -> str | None:
    """The revision of the turn's engine (``via_turn``: of the payload's turn), or None.

    An ``AuditLog`` passed as ``turn`` gives its bound engine's.
    """
    try:
        if via_turn:
            turn = getattr(turn, "turn", None)
        engine = turn._engine if type(turn) is AuditLog else getattr(turn, "engine", None)
        found = getattr(engine, "revision", None)
    except Exception:  # a hostile object: the row is written without it
        return None
    return found if type(found) is str else None


def _not_started(invocation: Invocation, exc: Exception) -> Stop:
    log.warning("audit log unavailable; %s not run", invocation.name)
    return Stop(Outcome.UNAVAILABLE, Reason.AUDIT_UNAVAILABLE, None, exc)


def _with_flag(result: ToolResult) -> ToolResult:
    # ToolResult._replace costs a microsecond on every audited call; ``replaced`` not.
    return replaced(result, _FLAGS, (*result.flags, AUDITED))


def encode_verdicts(records: Iterable[VerdictRecord]) -> str | None:
    out = [
        {
            "guard": r.guard,
            "choke_point": str(r.choke_point),
            "verdict": str(r.verdict),
            "reason": _code(r.reason),
            "enforced": r.enforced is True,
        }
        for r in records
    ]
    return _json(out) if out else None


def encode_escapes(escapes: Iterable[Escape]) -> str | None:
    out = [
        {
            "guard": e.guard,
            "choke_point": str(e.choke_point),
            "reason": _code(e.reason),
            "exception": None if e.exception is None else _type_name(e.exception),
        }
        for e in escapes
    ]
    return _json(out) if out else None


def _error_text(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ raises
        return f"<unprintable {_type_name(exc)}>"
    return str.__str__(text)[:_MAX_ERROR_CHARS] if issubclass(type(text), str) else None


def _type_name(value: object) -> str:
    """The class name, read without running anything the class defines."""
    return str(_type_qualname(type(value)))


def _code(value: Any) -> str | None:
    """A code or name as plain text: a ``str`` (subclass) read as ``str``, anything else marked."""
    if value is None:
        return None
    if issubclass(type(value), str):  # not isinstance: it may read a hostile __class__
        return str.__str__(value)
    return f"<not text: {_type_name(value)}>"


def _opaque(value: Any) -> str:
    return f"<not JSON: {_type_name(value)}>"


# What ``json.dumps(value, default=_opaque)`` builds on every call, built once (an encoder
# keeps no state between calls).
_encode = json.JSONEncoder(default=_opaque).encode


def _json(value: Any) -> str:
    """JSON text of ``value``; what JSON cannot hold is named by its type, never printed."""
    try:
        return _encode(value)
    except (ValueError, RecursionError):  # a cycle, or nesting too deep
        return json.dumps({"unencodable": _type_name(value)})


_ABSENT = object()


def _read(payload: Any, name: str) -> Any:
    try:
        return _plain(getattr(payload, name))
    except AttributeError:
        return _ABSENT
    except Exception:  # a property that raises: say it could not be read
        return "<unreadable>"


_SCALARS = (str, int, float, bool)


def _plain(value: Any, depth: int = 0) -> Any:
    """Names and codes only: strings, and containers or codes built from them.

    Types are read with ``type()``, never ``isinstance`` (which may run a
    hostile ``__class__``); whatever is not one of these is named by its type.
    """
    kind = type(value)
    if value is None or kind in _SCALARS:
        return value
    if depth > 32:
        return _type_name(value)
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, list | tuple | frozenset | set):
        return [_plain(v, depth + 1) for v in value]
    if issubclass(kind, dict) or hasattr(value, "items"):
        return {_key(k): _plain(v, depth + 1) for k, v in value.items()}
    code = getattr(value, "code", None)
    if type(code) is str:
        return {"code": code, "guard": _code(getattr(value, "guard", None))}
    return _type_name(value)


def _key(key: Any) -> str:
    kind = type(key)
    if kind in (int, float, bool):
        return str(key)
    return _code(key) or "None"
