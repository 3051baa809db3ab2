"""OpenAI Agents SDK: ``guard(agent, rails)`` returns the agent with its tools guarded.

::

    agent = openai_agents.guard(agent, rails)
    result = await Runner.run(agent, "...", run_config=openai_agents.run_config())

Each ``FunctionTool`` of the agent is replaced by a copy whose invoker runs
tool_call (the original invoker, with the SDK's own error formatting turned
off, is what the pipeline calls), whose schema hides bound parameters, and
whose ``is_enabled`` asks pre_turn. pre_turn also runs as a blocking input
guardrail (a refused turn trips it), and post_run runs from the agent's
``on_end`` hook. ``run_config()`` answers a tool the agent does not have with
``unavailable`` instead of the SDK's default of ending the run.

One ``Runner.run`` is one turn, unless the run's context is a guardrails
``Turn`` (then that turn, across runs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ..context import ToolResult, TurnContext
from ..engine import Guardrails, Turn
from ..middleware.post_run import PostRunReport
from ..text import user_text
from ..verdicts import Outcome, model_sentence
from ._common import Offer, Runs, aoffer, context_of
from ._framework_tools import (
    Clash,
    acall_native,
    check_options,
    native_tool,
    register,
    relax_required,
)

__all__ = ["PRE_TURN_GUARDRAIL", "guard", "run_config"]

# The name of the input guardrail that runs pre_turn (its output_info is the refusal code).
PRE_TURN_GUARDRAIL = "guardrails_pre_turn"

# Every guard() made, so that run_config() can find the run of an unknown tool's call.
_GUARDS: weakref.WeakSet[_Guard] = weakref.WeakSet()


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
        # by a guard() of its own, starts its own turn).
        self.runs = Runs()
        _GUARDS.add(self)

    def run(self, ctx: Any) -> _Run:
        run: _Run = self.runs.get(_key(ctx), lambda: _Run(self._turn(ctx)))
        return run

    def _turn(self, ctx: Any) -> Turn:
        value = ctx.context
        if isinstance(value, Turn):
            return value
        if self.context is not None:
            return self.rails.turn(self.context(ctx))
        return self.rails.turn(context_of(value))

    async def offer(self, ctx: Any, turn_input: Any = None) -> Offer:
        """pre_turn, once per run, on the run's input."""
        run = self.run(ctx)
        if run.offer is None:
            text = _input_text(ctx.turn_input if turn_input is None else turn_input)
            run.offer = asyncio.ensure_future(aoffer(run.turn, text, self.names))
        return await asyncio.shield(run.offer)

    async def end(self, ctx: Any, output: Any) -> None:
        run = self.runs.pop(_key(ctx))
        if run is None:
            return
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


def guard(
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
    return agent.clone(
        tools=tools,
        input_guardrails=[*agent.input_guardrails, pre_turn],
        hooks=_hooks(shared, agent.hooks),
    )


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


def _guarded(shared: _Guard, tool: Any, options: Mapping[str, Any] | None) -> Any:
    import json

    # The tool's own invoker with the SDK's error formatting off: exceptions reach
    # the pipeline, which keeps them for the audit trail and sends the fixed sentence.
    raw = dataclasses.replace(
        tool, _failure_error_function=None, _use_default_failure_error_function=False
    ).on_invoke_tool

    async def run(ctx: Any, arguments: dict[str, Any]) -> Any:
        return await raw(ctx, json.dumps(arguments))

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
    spec = register(shared.rails, name, build, options, source=tool, clash=Clash.REFUSE)

    async def invoke(ctx: Any, arguments: str) -> str:
        result: ToolResult = await acall_native(
            shared.run(ctx).turn, ctx, name, arguments, getattr(ctx, "tool_call_id", None)
        )
        return result.content

    enabled = tool.is_enabled

    async def is_enabled(ctx: Any, agent: Any) -> bool:
        if callable(enabled):
            allowed = enabled(ctx, agent)
            if inspect.isawaitable(allowed):
                allowed = await allowed
            if not allowed:
                return False
        elif not enabled:
            return False
        return name in {t.name for t in (await shared.offer(ctx)).tools}

    return dataclasses.replace(
        tool,
        params_json_schema={k: v for k, v in spec.schema.items() if k != "title"},
        on_invoke_tool=invoke,
        is_enabled=is_enabled,
    )


def _pre_turn(shared: _Guard) -> Callable[..., Any]:
    from agents import GuardrailFunctionOutput

    async def pre_turn(ctx: Any, agent: Any, turn_input: Any) -> Any:
        offered = await shared.offer(ctx, turn_input)
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
