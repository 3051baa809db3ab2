"""The object users hold: tools, guards, hooks and recorders, and the entry points."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from . import _fair
from .context import ToolResult, TurnContext, VerdictRecord
from .errors import ConfigurationError, DuplicateNameError
from .guard import Guard, as_guard
from .middleware.post_run import PostRunReport, apost_run, post_run
from .middleware.pre_turn import PreTurnDecision, apre_turn, pre_turn
from .middleware.ticket import Ticket, aadmit, admit, aend_tickets, end_tickets, take_turn
from .middleware.tool_call import CallHook, Plan, ToolCallPipeline
from .observe.recorder import Recorder, Recorders, combine_recorders
from .rules.ceiling import TurnCeiling
from .tools import Tool
from .tools import tool as make_tool
from .verdicts import ChokePoint

__all__ = ["Guardrails", "Turn"]

log = logging.getLogger("guardrails")

_MAKING = threading.Lock()  # makes each turn's lock once, whichever thread asks first


class Turn:
    """One turn of one agent: what was offered, what was called, per-turn counters.

    Per-turn state lives here, not in the engine, so one engine serves many
    concurrent turns. ``results`` is the run record that post_run reads.
    A turn may be shared by threads: ``lock`` guards ``counters``.
    """

    __slots__ = (
        "__weakref__",
        "_lock",
        "_tickets",
        "context",
        "counters",
        "engine",
        "gated",
        "offered",
        "results",
    )

    def __init__(
        self,
        engine: Guardrails,
        context: TurnContext,
        offered: Iterable[str] | None = None,
    ) -> None:
        self.engine = engine
        self.context = context
        self.offered: frozenset[str] | None = None if offered is None else frozenset(offered)
        # Per tool an intent gate withheld at pre_turn: the gate's reject its calls carry.
        self.gated: dict[str, tuple[VerdictRecord, ...]] = {}
        self.results: list[ToolResult] = []
        self.counters: dict[str, int] = {}
        self._lock: threading.Lock | None = None
        self._tickets: set[Ticket] | None = None  # the open tickets (``admit``)

    @property
    def lock(self) -> threading.Lock:
        """The lock that guards ``counters``, made the first time it is asked for (a turn
        of a thousand in flight that counts nothing holds no lock for the collector to scan)."""
        lock = self._lock
        if lock is None:
            with _MAKING:
                lock = self._lock
                if lock is None:
                    lock = self._lock = threading.Lock()
        return lock

    def offer(self, names: Iterable[str]) -> None:
        """Record what the model was offered; any other tool is ``unavailable``."""
        self.offered = frozenset(names)

    def call(self, name: str, arguments: Any, call_id: str | None = None) -> ToolResult:
        """Run one tool call through the tool_call choke-point (sync)."""
        return self.engine._pipeline.run(self, name, arguments, call_id)

    async def acall(self, name: str, arguments: Any, call_id: str | None = None) -> ToolResult:
        """Run one tool call through the tool_call choke-point (async)."""
        engine = self.engine
        slice = engine.loop_slice
        if slice is not None and (place := _fair.enter(slice)) is not None:
            await place
            del place  # (a call in flight holds no done future)
        return await engine._pipeline.arun(self, name, arguments, call_id)

    def admit(self, name: str, arguments: Any, call_id: str | None = None) -> Ticket:
        """Decide one call whose body runs elsewhere (sync): every step ``call`` runs
        before the tool, and a ticket for the body's answer. See docs/tool_call.md."""
        return admit(self, name, arguments, call_id)

    async def aadmit(self, name: str, arguments: Any, call_id: str | None = None) -> Ticket:
        """``admit`` for async code."""
        await take_turn(self)
        return await aadmit(self, name, arguments, call_id)

    def end(self) -> list[ToolResult]:
        """End the turn (sync): every ticket still open is settled as ``error``
        (reason ``not_completed``) and audited; their results. A turn may go on after."""
        self.engine._first_end()
        return end_tickets(self) if self._tickets else []

    async def aend(self) -> list[ToolResult]:
        """``end`` for async code."""
        self.engine._first_end()
        if not self._tickets:
            return []
        await take_turn(self)
        return await aend_tickets(self)

    def __enter__(self) -> Turn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    async def __aenter__(self) -> Turn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aend()

    def pre_turn(self, input: Any, tools: Iterable[Any] | None = None) -> PreTurnDecision:
        """Decide what the model is offered, and offer it (sync). See docs/pre_turn.md."""
        return pre_turn(self, input, tools)

    async def apre_turn(self, input: Any, tools: Iterable[Any] | None = None) -> PreTurnDecision:
        """Decide what the model is offered, and offer it (async)."""
        slice = self.engine.loop_slice
        if slice is not None and (place := _fair.enter(slice)) is not None:
            await place
        return await apre_turn(self, input, tools)

    def post_run(self, output: Any = None, *, structured: Any = None) -> PostRunReport:
        """End the turn's open tickets, then check the finished run and act as its
        backstop (sync). See docs/post_run.md."""
        self.end()
        return post_run(self, output, structured=structured)

    async def apost_run(self, output: Any = None, *, structured: Any = None) -> PostRunReport:
        """``post_run`` for async code."""
        slice = self.engine.loop_slice
        if slice is not None and (place := _fair.enter(slice)) is not None:
            await place
        await self.aend()
        return await apost_run(self, output, structured=structured)


class Guardrails:
    """Tools, guards, hooks and recorders, assembled and checked once."""

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        guards: Iterable[Guard | Callable[[Any], Any]] = (),
        *,
        hooks: Iterable[CallHook] = (),
        recorder: Recorder | Iterable[Recorder] | None = None,
        max_calls_per_turn: int | None = None,
        max_result_chars: int = 16_000,
        max_argument_chars: int = 1_000_000,
        secrets: Callable[[str], Any] | None = None,
        provider_timeout: float | None = 5.0,
        policy: Any = None,
        loop_slice: float | None = _fair.DEFAULT_SLICE,
    ) -> None:
        _check_limits(loop_slice, provider_timeout, max_result_chars, max_argument_chars)
        # Async calls take turns on the event loop, a slice at a time (``_fair``).
        self.loop_slice: float | None = None if loop_slice is None else float(loop_slice)
        self._tools: dict[str, Tool] = {}
        self._guards: dict[str, Guard] = {}
        self._pending: dict[str, frozenset[str]] = {}  # guard -> scope names not registered
        self._reported = False  # whether the end of the first turn reported ``_pending``
        for t in tools:
            self._add_tool(t)
        for g in guards:
            self._add_guard(g)
        hook_list = _checked_hooks(hooks, max_calls_per_turn)
        self.recorder: Recorders | None = combine_recorders(recorder)
        self._revision: str | None = None
        self._pipeline = ToolCallPipeline(
            {},
            hooks=tuple(hook_list),
            recorder=self.recorder,
            max_result_chars=max_result_chars,
            max_argument_chars=max_argument_chars,
            secrets=secrets,
            provider_timeout=provider_timeout,
        )
        for t in self._tools.values():
            self._check_approval(t)
        self._replan()
        if policy is not None:
            self.load_policy(policy)
        self._bind_recorders()

    def _bind_recorders(self) -> None:
        """Call ``bind(engine)`` on each recorder that has one (Prometheus, OpenTelemetry).

        Binding twice is harmless, so a user's own ``bind`` call still works. A
        recorder whose ``bind`` raises is counted and logged like any recorder
        failure: the engine is built all the same.
        """
        recorders = self.recorder
        for rec in recorders.recorders if recorders is not None else ():
            try:
                bind = getattr(rec, "bind", None)
                if callable(bind):
                    bind(self)
            except Exception:
                assert recorders is not None
                recorders._failed(rec)

    # -- registration -------------------------------------------------------

    @property
    def tools(self) -> Mapping[str, Tool]:
        return MappingProxyType(self._tools)

    @property
    def guards(self) -> Mapping[str, Guard]:
        return MappingProxyType(self._guards)

    def add_tool(self, t: Tool | Callable[..., Any]) -> Tool:
        added = self._add_tool(t)
        self._replan()
        return added

    def add_guard(self, g: Guard | Callable[[Any], Any]) -> Guard:
        added = self._add_guard(g)
        self._replan()
        return added

    def _add_tool(self, t: Tool | Callable[..., Any]) -> Tool:
        spec = t if isinstance(t, Tool) else make_tool(t)
        if spec.name in self._tools:
            raise DuplicateNameError(f"tool {spec.name!r} is registered twice")
        for g in (*spec.guards, *spec.output_guards):
            self._check_guard_name(g)
        if hasattr(self, "_pipeline"):  # at construction, checked once the hooks are known
            self._check_approval(spec)
        self._tools[spec.name] = spec
        if self._pending:
            self._arrived(spec.name)
        return spec

    def _check_approval(self, spec: Tool) -> None:
        """A tool that needs approval is refused unless a hook grants approvals: without
        one its calls would run unasked (docs/approvals.md)."""
        rule = spec.approval
        if rule is None or rule.never:
            return
        if not any(getattr(h, "grants_approval", False) is True for h in self._pipeline.hooks):
            raise ConfigurationError(
                f"tool {spec.name!r} needs approval ({rule.source!r}) but no hook grants "
                "approvals: add hooks=[ApprovalGate(store)] (guardrails.approvals)"
            )

    def _add_guard(self, g: Guard | Callable[[Any], Any]) -> Guard:
        spec = as_guard(g)
        self._check_guard_name(spec)
        if spec.tools is not None:
            unknown = spec.tools - self._tools.keys()
            if unknown and self._tools:  # the tools are known: a name none has is a mistake
                raise ConfigurationError(
                    f"guard {spec.name!r} ({spec.defined_at}): unknown tool {sorted(unknown)[0]!r}"
                )
            if unknown:  # no tool yet: an adapter registers them later (``pending_scopes``)
                self._pending[spec.name] = frozenset(unknown)
        self._guards[spec.name] = spec
        return spec

    @property
    def pending_scopes(self) -> Mapping[str, frozenset[str]]:
        """The tool names that guards are scoped to and no registered tool has yet, by
        guard: a guard added while the engine had no tool waits for them."""
        return MappingProxyType(self._pending)

    def _arrived(self, name: str) -> None:
        """A tool of this name is registered: no guard waits for it any more."""
        for guard_name, names in list(self._pending.items()):
            if name in names:
                left = names - {name}
                if left:
                    self._pending[guard_name] = left
                else:
                    del self._pending[guard_name]

    def _first_end(self) -> None:
        """At the end of the first turn: each tool name a guard still waits for is
        logged, once (tools an adapter registers arrive during a run, not before it)."""
        if self._reported or not self._pending:
            return
        self._reported = True
        for guard_name, names in sorted(self._pending.items()):
            spec = self._guards.get(guard_name)
            where = "?" if spec is None else spec.defined_at
            for name in sorted(names):
                log.warning(
                    "guard %r (%s) is scoped to tool %r, which was not registered by the end "
                    "of the first turn: the guard applies to it only once a tool of that "
                    "name is registered",
                    guard_name,
                    where,
                    name,
                )

    def _check_guard_name(self, g: Guard) -> None:
        existing = self._guards.get(g.name)
        if existing is None:
            for other in self._tools.values():
                for og in (*other.guards, *other.output_guards):
                    if og.name == g.name and og is not g:
                        existing = og
        if existing is not None and existing is not g:
            raise DuplicateNameError(
                f"guard name {g.name!r} is used twice: {existing.defined_at} and {g.defined_at}"
            )

    def load_policy(self, policy: Any, *, store: Any = None, **limits: int) -> Any:
        """Load a policy (a ``Policy`` or a TOML file's path), merged with any loaded
        before, checked against the registered tools. ``limits``: ``max_values``,
        ``max_sessions``, ``max_tenants``. See docs/policy.md."""
        from .policy.attach import attach

        return attach(self, policy, store=store, **limits).policy

    def guards_at(self, point: ChokePoint | str) -> tuple[Guard, ...]:
        cp = ChokePoint(point)
        return tuple(g for g in self._guards.values() if cp in g.choke_points)

    @property
    def revision(self) -> str:
        """A content hash of the guards, tools and policy (16 hex digits).

        The same rules give the same revision in every process; audit rows,
        spans and ``guardrails_policy_revision_info`` carry it.
        """
        found: str | None = self._revision
        if found is None:
            from ._revision import revision_of

            found = self._revision = revision_of(self)
        return found

    def _replan(self) -> None:
        self._revision = None  # the rules changed: hash them again when asked
        shared = self.guards_at(ChokePoint.TOOL_CALL)
        plans = {}
        for name, t in self._tools.items():
            guards = tuple(g for g in shared if g.applies_to(name)) + t.guards
            plans[name] = Plan(t, guards, t.output_guards, any(g.is_async for g in guards))
        self._pipeline.plans = plans

    # -- entry points ---------------------------------------------------------

    def turn(
        self,
        context: TurnContext | None = None,
        *,
        offered: Iterable[str] | None = None,
        **fields: Any,
    ) -> Turn:
        """Start a turn. ``fields`` (tenant=, session=, phase=, ...) build the context."""
        if context is None:
            context = TurnContext(**fields)
        elif fields:
            context = context.evolve(**fields)
        return Turn(self, context, offered)

    def call(
        self,
        name: str,
        arguments: Any,
        *,
        context: TurnContext | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """One guarded call in a turn of its own (sync)."""
        return self.turn(context).call(name, arguments, call_id)

    async def acall(
        self,
        name: str,
        arguments: Any,
        *,
        context: TurnContext | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """One guarded call in a turn of its own (async)."""
        return await self.turn(context).acall(name, arguments, call_id)


def _check_limits(
    loop_slice: float | None,
    provider_timeout: float | None,
    max_result_chars: int,
    max_argument_chars: int,
) -> None:
    """The engine's numeric settings, refused at construction when out of range."""
    if loop_slice is not None and not (type(loop_slice) in (int, float) and 0 < loop_slice <= 1):
        raise ConfigurationError(
            f"loop_slice must be seconds in (0, 1] (or None), not {loop_slice!r}"
        )
    if provider_timeout is not None and not provider_timeout > 0:
        raise ConfigurationError("provider_timeout must be positive (or None)")
    if max_result_chars < 64:
        raise ConfigurationError("max_result_chars must be at least 64")
    if max_argument_chars < 1:
        raise ConfigurationError("max_argument_chars must be positive")


def _checked_hooks(hooks: Iterable[CallHook], max_calls_per_turn: int | None) -> list[CallHook]:
    """The call hooks in order (the per-turn ceiling first), each with before() and after()."""
    hook_list: list[CallHook] = []
    if max_calls_per_turn is not None:
        hook_list.append(TurnCeiling(max_calls_per_turn))
    hook_list.extend(hooks)
    for hook in hook_list:
        if not (callable(getattr(hook, "before", None)) and callable(getattr(hook, "after", None))):
            raise ConfigurationError(f"hook {hook!r}: needs before() and after() methods")
    return hook_list
