"""OpenAI Agents SDK: ``guard_agent(agent, rails)`` returns the agent with its tools guarded.

::

    agent = openai_agents.guard_agent(agent, rails)
    result = await Runner.run(agent, "...", run_config=openai_agents.run_config())

Each ``FunctionTool`` of the agent is replaced by a copy whose invoker runs
tool_call (the original invoker, with the SDK's own error formatting turned
off, is what the pipeline calls), whose schema hides bound parameters, and
whose ``is_enabled`` asks pre_turn. The tool's own input guardrails still run
first (a call one of them refuses is audited through ``framework_check``); a
refused call marks the SDK's function span as an error; image, file and text
outputs reach the model as the SDK's output items when tool_call kept their
stand-in text (``_rich``). pre_turn also runs as a blocking input guardrail (a
refused turn trips it), and post_run runs from the agent's ``on_end`` hook, or
from the ``on_end`` of the agent the run was handed off to.
``run_config()`` answers a tool the agent does not have with ``unavailable``
instead of the SDK's default of ending the run. The tools of the agent's
``mcp_servers``, listed at each run, are guarded the same way (the guarded
agent is then a ``GuardedMCPAgent``, whose ``clone`` keeps them guarded).

One ``Runner.run`` is one turn, unless the run's context is a guardrails
``Turn`` (then that turn, across runs). A call the approval gate holds is an
interruption (``needs_approval`` asks the gate); the run resumed from its
state goes on in the same turn (docs/approvals.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import sys
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ..context import ToolResult, TurnContext
from ..engine import Guardrails, Turn
from ..middleware.post_run import PostRunReport
from ..middleware.ticket import Ticket
from ..text import user_text
from ..verdicts import Outcome, model_sentence
from ._approval import gated, gates, held, plain
from ._common import Offer, Runs, aoffer, context_of
from ._framework_tools import (
    Clash,
    acall_native,
    arefused,
    check_options,
    native_tool,
    register,
    relax_required,
    watch,
)
from ._openai_items import output_items
from ._rich import Rich, sent

__all__ = ["PRE_TURN_GUARDRAIL", "guard_agent", "run_config"]

# The name of the input guardrail that runs pre_turn (its output_info is the refusal code).
PRE_TURN_GUARDRAIL = "guardrails_pre_turn"

# Every guard_agent() made, so that run_config() can find the run of an unknown tool's call.
_GUARDS: weakref.WeakSet[_Guard] = weakref.WeakSet()


# The most calls awaiting a person's approval kept for their runs to resume in.
MAX_PENDING = 10_000


class _Run:
    """One run's turn, and its offer (computed once, by whichever asks first)."""

    __slots__ = ("offer", "turn")

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.offer: asyncio.Future[Offer] | None = None


def _key(ctx: Any) -> Any:
    # Every context of one run (tool contexts included) shares the run's usage object.
    return ctx.usage


class _Guard:
    """What the guarded copies share: the engine, the context mapping, the agent's tools."""

    def __init__(
        self,
        rails: Guardrails,
        context: Callable[[Any], TurnContext] | None,
        names: list[str],
        on_report: Callable[[PostRunReport], Any] | None,
    ) -> None:
        self.rails = rails
        self.context = context
        self.names = names
        self.on_report = on_report
        # Each guarded agent has its own turn in a run (a handoff's target agent, guarded
        # by a guard_agent() of its own, starts its own turn).
        self.runs = Runs()
        # Calls waiting for a person's approval: call id -> (tool, the run they paused).
        # A resumed run (a copy of the run's context, with new usage) is found by them.
        self.pending: dict[str, tuple[str, _Run]] = {}
        # Calls the approval gate was asked about before they ran, and let through (a
        # stored approval used, or no approval needed): call id -> their ticket.
        self.admitted: dict[str, Ticket] = {}
        # The guarded copies of the MCP servers' tools, by name.
        self.mcp: dict[str, Any] = {}
        _GUARDS.add(self)

    def run(self, ctx: Any) -> _Run:
        run: _Run = self.runs.get(_key(ctx), lambda: self._resumed(ctx) or _Run(self._turn(ctx)))
        return run

    def _resumed(self, ctx: Any) -> _Run | None:
        """The paused run ``ctx`` resumes: one whose waiting call it has a decision on."""
        decided = getattr(ctx, "is_tool_approved", None)
        if not callable(decided):
            return None
        for call_id, (tool, run) in list(self.pending.items()):
            if decided(tool, call_id) is not None:
                return run
        return None

    def mcp_tool(self, tool: Any) -> Any:
        """The guarded copy of an MCP server's tool (made the first time its name is listed:
        the engine keeps the first definition of a name)."""
        found = self.mcp.get(tool.name)
        if found is None:
            # One source per server and tool name (interned: compared by identity), so that
            # another guard_agent() of an agent with the same server shares the engine's tool.
            server = getattr(getattr(tool, "tool_origin", None), "mcp_server_name", None)
            source = sys.intern(f"mcp:{server}/{tool.name}")
            found = self.mcp[tool.name] = _guarded(self, tool, None, source)
            self.names.append(tool.name)
        return found

    def wait(self, ctx: Any, tool: str, call_id: str) -> None:
        """``call_id`` waits for a person: its run is kept for the run that resumes it."""
        run = self.run(ctx)
        if call_id not in self.pending and len(self.pending) >= MAX_PENDING:
            del self.pending[next(iter(self.pending))]  # the oldest: it resumes in a new turn
        self.pending[call_id] = (tool, run)

    def _turn(self, ctx: Any) -> Turn:
        value = ctx.context
        if isinstance(value, Turn):
            return value
        if self.context is not None:
            return self.rails.turn(self.context(ctx))
        return self.rails.turn(context_of(value))

    async def offer(self, ctx: Any, agent: Any, turn_input: Any = None) -> Offer:
        """pre_turn, once per run, on the run's input (over the MCP servers' tools too)."""
        run = self.run(ctx)
        if run.offer is None:
            run.offer = asyncio.ensure_future(self._decide(run, ctx, agent, turn_input))
        return await asyncio.shield(run.offer)

    async def _decide(self, run: _Run, ctx: Any, agent: Any, turn_input: Any) -> Offer:
        if getattr(agent, "guardrails_mcp", None) is self:
            await agent.get_mcp_tools(ctx)  # their names, listed now, are decided on too
        text = _input_text(ctx.turn_input if turn_input is None else turn_input)
        return await aoffer(run.turn, text, self.names)

    async def end(self, ctx: Any, output: Any) -> None:
        run = self.runs.pop(_key(ctx))
        if run is None:
            return
        for call_id in [c for c, (_, r) in self.pending.items() if r is run]:
            del self.pending[call_id]
        text = output if isinstance(output, str) else None
        structured = None if text is not None or output is None else output
        report = await run.turn.apost_run(text, structured=structured)
        if self.on_report is not None:
            self.on_report(report)


def _input_text(turn_input: Any) -> str:
    try:
        return user_text(turn_input)
    except Exception:  # an input item this reader does not know: nothing to match
        return ""


def guard_agent(
    agent: Any,
    rails: Guardrails,
    *,
    context: Callable[[Any], TurnContext] | None = None,
    tool_options: Mapping[str, Mapping[str, Any]] | None = None,
    on_report: Callable[[PostRunReport], Any] | None = None,
) -> Any:
    """A copy of ``agent`` whose function tools run through ``rails``.

    The agent's ``FunctionTool``s are registered in ``rails`` (schemas read from
    the tools; ``tool_options`` maps a tool name to ``Tool`` options such as
    ``bind=``, ``effect=``, ``timeout=``). ``context(run_context)`` gives the
    turn's context; by default the run's ``context=`` is read by
    ``context_of``. ``on_report`` receives each run's post_run report.
    """
    from agents import FunctionTool, InputGuardrail

    check_options([t.name for t in agent.tools if isinstance(t, FunctionTool)], tool_options)
    watch(rails)
    shared = _Guard(rails, context, [], on_report)
    tools = []
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            tools.append(_guarded(shared, tool, (tool_options or {}).get(tool.name)))
            shared.names.append(tool.name)
        else:
            tools.append(tool)
    pre_turn = InputGuardrail(
        guardrail_function=_pre_turn(shared), name=PRE_TURN_GUARDRAIL, run_in_parallel=False
    )
    guarded = agent.clone(
        tools=tools,
        input_guardrails=[*agent.input_guardrails, pre_turn],
        hooks=_hooks(shared, agent.hooks),
        handoffs=_handoffs(shared, agent.handoffs),
    )
    return _with_mcp(shared, guarded) if agent.mcp_servers else guarded


def _with_mcp(shared: _Guard, agent: Any) -> Any:
    """``agent`` whose MCP servers' tools, listed at each run, are guarded like its own."""
    fields = {f.name: getattr(agent, f.name) for f in dataclasses.fields(agent) if f.init}
    return _mcp_agent_class()(**fields, guardrails_mcp=shared)


@functools.cache
def _mcp_agent_class() -> type:
    from agents import Agent

    @dataclasses.dataclass
    class GuardedMCPAgent(Agent):  # type: ignore[type-arg, misc, unused-ignore]
        """An agent whose MCP servers' tools go through tool_call (kept by ``clone``)."""

        guardrails_mcp: Any = None

        async def get_mcp_tools(self, run_context: Any) -> list[Any]:
            listed = await super().get_mcp_tools(run_context)
            return [self.guardrails_mcp.mcp_tool(tool) for tool in listed]

    return GuardedMCPAgent


def _optional(tool: Any) -> list[str]:
    """Parameters the user's function does not require (strict schemas list them all)."""
    try:
        signature = inspect.signature(tool.__wrapped__)
    except (AttributeError, TypeError, ValueError):
        props = tool.params_json_schema.get("properties", {})
        return [
            name for name, prop in props.items() if isinstance(prop, dict) and "default" in prop
        ]
    return [p.name for p in signature.parameters.values() if p.default is not p.empty]


def _guarded(
    shared: _Guard, tool: Any, options: Mapping[str, Any] | None, source: Any = None
) -> Any:
    import json

    # The tool's own invoker with the SDK's error formatting off: exceptions reach
    # the pipeline, which keeps them for the audit trail and sends the fixed sentence.
    raw = dataclasses.replace(
        tool, _failure_error_function=None, _use_default_failure_error_function=False
    ).on_invoke_tool

    async def run(call: _Call, arguments: dict[str, Any]) -> Any:
        value = await raw(call.ctx, json.dumps(arguments))
        call.rich = output_items(value)
        return value if call.rich is None else call.rich.text

    async def direct(arguments: dict[str, Any]) -> Any:
        # A backstop action, outside any run: a tool context of its own.
        from agents.tool_context import ToolContext

        text = json.dumps(arguments)
        ctx = ToolContext(None, tool_name=tool.name, tool_call_id="backstop", tool_arguments=text)
        return await raw(ctx, text)

    name = tool.name
    build = functools.partial(
        native_tool,
        name,
        relax_required(tool.params_json_schema, _optional(tool)),
        run,
        is_async=True,
        direct=direct,
        description=tool.description or "",
    )
    given = tool if source is None else source
    spec = register(shared.rails, name, build, options, source=given, clash=Clash.REFUSE)

    async def invoke(ctx: Any, arguments: str) -> Any:
        call = _Call(ctx)
        call_id = getattr(ctx, "tool_call_id", None)
        ticket = shared.admitted.pop(call_id, None) if isinstance(call_id, str) else None
        if ticket is not None:  # decided when the SDK asked whether it needs approval
            result = await _settled(ticket, call, run)
        else:
            result = await acall_native(shared.run(ctx).turn, call, name, arguments, call_id)
        if not result.ok:
            _span_error(result)
        return sent(result, call.rich)

    return dataclasses.replace(
        tool,
        params_json_schema={k: v for k, v in spec.schema.items() if k != "title"},
        on_invoke_tool=invoke,
        is_enabled=_enabled(shared, name, tool.is_enabled),
        tool_input_guardrails=[_audited(shared, g) for g in tool.tool_input_guardrails or ()]
        or tool.tool_input_guardrails,
        needs_approval=_approval(shared, name, tool.needs_approval),
    )


async def _settled(ticket: Ticket, call: _Call, run: Callable[..., Any]) -> ToolResult:
    """A call admitted before it ran: its body, and the steps after it."""
    if not ticket.admitted:
        assert ticket.result is not None
        return ticket.result
    try:
        value = await run(call, plain(ticket.arguments))
    except Exception as exc:  # read as turn.call reads a tool's exception
        return await ticket.afail(exc)
    return await ticket.acomplete(value)


def _approval(shared: _Guard, name: str, needs: Any) -> Any:
    """The tool's ``needs_approval``, noting each call that waits so its run resumes in the
    same turn; and a call the approval gate holds, which waits the same way (an interruption
    the application approves, after a person approved the stored request)."""
    if needs is False and not gates(shared.rails):
        return False

    async def needs_approval(ctx: Any, params: Any, call_id: str) -> bool:
        answer = needs(ctx, params, call_id) if callable(needs) else needs
        if inspect.isawaitable(answer):
            answer = await answer
        if not answer and gated(shared.rails, name, params):
            # Asked now, before the SDK would run it: a held call becomes an interruption;
            # any other decision (a stored approval used) is kept for the invoker.
            ticket = await shared.run(ctx).turn.aadmit(name, params, call_id)
            answer = ticket.result is not None and held(ticket.result)
            if not answer:
                shared.admitted[call_id] = ticket
        if answer and ctx.is_tool_approved(name, call_id) is None:
            shared.wait(ctx, name, call_id)
        return bool(answer)

    return needs_approval


def _enabled(shared: _Guard, name: str, enabled: Any) -> Callable[..., Any]:
    """The tool's own ``is_enabled``, then pre_turn's offer (once per run)."""

    async def is_enabled(ctx: Any, agent: Any) -> bool:
        if callable(enabled):
            allowed = enabled(ctx, agent)
            if inspect.isawaitable(allowed):
                allowed = await allowed
            if not allowed:
                return False
        elif not enabled:
            return False
        return name in {t.name for t in (await shared.offer(ctx, agent)).tools}

    return is_enabled


class _Call:
    """The SDK's per-call object (its ``ToolContext``), and a rich output the tool returned."""

    __slots__ = ("ctx", "rich")

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.rich: Rich | None = None


def _span_error(result: ToolResult) -> None:
    """Mark the SDK's function span of a refused or failed call (no exception text)."""
    from agents.tracing import SpanError, get_current_span

    span = get_current_span()
    if span is not None:
        data = {"outcome": str(result.outcome), "reason": result.reason}
        span.set_error(SpanError(message=f"guardrails: {result.outcome}", data=data))


def _audited(shared: _Guard, guardrail: Any) -> Any:
    """The tool's own input guardrail; a call it refuses is audited (``framework_check``)."""
    from agents import ToolInputGuardrail

    async def check(data: Any) -> Any:
        out = await guardrail.run(data)
        if out.behavior.get("type") != "allow":
            ctx = data.context
            ticket = shared.admitted.pop(ctx.tool_call_id, None)
            if ticket is not None and ticket.open:
                # Admitted when its approval was asked about, refused here: it never runs.
                await ticket.afail()
            else:
                await arefused(
                    shared.run(ctx).turn, ctx.tool_name, ctx.tool_arguments, ctx.tool_call_id
                )
        return out

    return ToolInputGuardrail(guardrail_function=check, name=guardrail.get_name())


def _handoffs(shared: _Guard, handoffs: list[Any]) -> list[Any]:
    """The agent's handoffs, each ending this agent's turn when the agent it hands to ends."""
    from agents import Agent, handoff

    wrapped = []
    for item in handoffs:
        made = handoff(item) if isinstance(item, Agent) else item
        wrapped.append(dataclasses.replace(made, on_invoke_handoff=_ending(shared, made)))
    return wrapped


def _ending(shared: _Guard, made: Any) -> Callable[..., Any]:
    invoke = made.on_invoke_handoff

    async def on_invoke_handoff(ctx: Any, arguments: str) -> Any:
        target = await invoke(ctx, arguments)
        # The run goes on in ``target``: its end is this agent's end too.
        return target.clone(
            hooks=_hooks(shared, target.hooks), handoffs=_handoffs(shared, target.handoffs)
        )

    return on_invoke_handoff


def _pre_turn(shared: _Guard) -> Callable[..., Any]:
    from agents import GuardrailFunctionOutput

    async def pre_turn(ctx: Any, agent: Any, turn_input: Any) -> Any:
        offered = await shared.offer(ctx, agent, turn_input)
        return GuardrailFunctionOutput(
            output_info=offered.refusal, tripwire_triggered=offered.refusal is not None
        )

    return pre_turn


def _hooks(shared: _Guard, inner: Any) -> Any:
    from agents import AgentHooks

    class GuardrailsHooks(AgentHooks):  # type: ignore[type-arg,unused-ignore]
        """post_run at the agent's end; every other event goes to the agent's own hooks."""

        async def on_end(self, context: Any, agent: Any, output: Any) -> None:
            if inner is not None:
                await inner.on_end(context, agent, output)
            await shared.end(context, output)

        def __getattribute__(self, attr: str) -> Any:
            if attr.startswith("on_") and attr != "on_end" and inner is not None:
                return getattr(inner, attr)
            return super().__getattribute__(attr)

    return GuardrailsHooks()


def run_config(base: Any = None) -> Any:
    """A ``RunConfig`` (a copy of ``base``) answering tools the agent lacks with ``unavailable``.

    The call goes through tool_call like any other, so it is counted and audited.
    """
    from agents import RunConfig

    config = base if base is not None else RunConfig()
    formatter = config.tool_error_formatter

    async def format_error(args: Any) -> Any:
        if args.kind == "tool_not_found":
            key = _key(args.run_context)
            run = next((r for g in list(_GUARDS) if (r := g.runs.peek(key)) is not None), None)
            if run is None:  # a run of an agent that was not guarded
                return model_sentence(Outcome.UNAVAILABLE)
            result = await run.turn.acall(args.tool_name, {}, args.call_id)
            return result.content
        if formatter is None:
            return None
        message = formatter(args)
        return await message if inspect.isawaitable(message) else message

    return dataclasses.replace(
        config, tool_not_found_behavior="return_error_to_model", tool_error_formatter=format_error
    )
