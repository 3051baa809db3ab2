"""Microsoft Agent Framework: an existing ``Agent`` guarded by one call.

::

    agent = guard(Agent(client=client, tools=[get_weather]), rails)
    response = await agent.run("What is the weather in Paris?")

``guard`` registers the agent's function tools in the engine (schema from each
tool's own ``parameters()``) and adds three middleware to the agent: one per
run (a ``Turn``, pre_turn over the input, post_run over the answer), one per
model request (only the offered tools are sent), and one per tool call (the
tool_call pipeline; the model reads our outcome's content, never the
framework's error text). The tool itself still runs through the framework
(``call_next``), with the arguments tool_call admitted and the bound ones added.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..engine import Guardrails, Turn
from ..tools import Tool
from ._common import ContextSource, ReportSink, start_turn
from ._framework_tools import Clash, ToolOptions, check_options, register

__all__ = ["RUN_KEY", "guard", "tool_from"]

# Where the run's Turn travels to the tool middleware: the framework forwards
# ``function_invocation_kwargs`` to every FunctionInvocationContext of the run.
RUN_KEY = "guardrails_turn"
_MARK = "guardrails_outcome"

# The run's Turn, for the middleware around each model request (the framework
# does not forward ``function_invocation_kwargs`` there).
_RUN: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("guardrails_agent_framework_run")

# The framework's context and continuation of the call being run, for the tool
# that tool_call runs (``_through_framework``).
_CALL: contextvars.ContextVar[tuple[Any, Callable[[], Awaitable[None]]]] = contextvars.ContextVar(
    "guardrails_agent_framework_call"
)


def tool_from(function_tool: Any, **options: Any) -> Tool:
    """A guarded ``Tool`` for an Agent Framework ``FunctionTool``.

    The schema is the tool's own ``parameters()`` (``required`` lists the
    parameters without a default); ``options`` are those of ``Tool``.
    """
    name = function_tool.name
    options.setdefault("description", function_tool.description or "")
    return Tool(name, _through_framework, function_tool.parameters(), **options)


async def _through_framework(**arguments: Any) -> Any:
    # The admitted arguments (bound ones included) replace the model's, and the
    # framework runs the tool: its own conversion, injection and result parsing.
    context, call_next = _CALL.get()
    context.arguments = arguments
    await call_next()
    return _result_value(context.result)


def _result_value(result: Any) -> Any:
    if isinstance(result, list) and all(getattr(c, "type", None) == "text" for c in result):
        return "".join(c.text for c in result)
    return result


def _input_messages(messages: Any) -> list[dict[str, Any]]:
    return [{"role": str(m.role), "content": m.text or ""} for m in messages or ()]


def guard(
    agent: Any,
    rails: Guardrails,
    *,
    tool_options: ToolOptions | None = None,
    context: ContextSource = None,
    on_report: ReportSink = None,
) -> Any:
    """Guard ``agent`` (an ``agent_framework.Agent``) with ``rails``; returns the same agent.

    ``tool_options`` gives per-tool ``Tool`` options (``{"transfer": {"bind": {...},
    "effect": True}}``); ``context`` a ``TurnContext`` or a function of the
    framework's ``AgentContext`` returning one (default: the session id of the
    run); ``on_report`` receives each run's post_run report.
    """
    from agent_framework import FunctionTool

    declared = (getattr(agent, "default_options", None) or {}).get("tools") or []
    function_tools = [t for t in declared if isinstance(t, FunctionTool)]
    check_options([t.name for t in function_tools], tool_options, "guard(agent)")
    for ft in function_tools:
        options = (tool_options or {}).get(ft.name)
        build = functools.partial(tool_from, ft)
        register(rails, ft.name, build, options, source=ft, clash=Clash.APPLICATION_WINS)
    middleware = list(getattr(agent, "middleware", None) or [])
    agent.middleware = [*middleware, *_middleware(_Guarding(rails, context, on_report))]
    return agent


class _Guarding:
    """What the three middleware do, with the engine, the context source and the report sink."""

    def __init__(self, rails: Guardrails, context: ContextSource, on_report: ReportSink) -> None:
        self.rails = rails
        self.context = context
        self.on_report = on_report

    async def run(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        """One agent run: a turn, pre_turn over the input, post_run over the answer."""
        turn = start_turn(self.rails, self.context, ctx, getattr(ctx.session, "session_id", None))
        candidates = _known(self.rails, [t.name for t in _tools_of(ctx)])
        decision = await turn.apre_turn(_input_messages(ctx.messages), candidates)
        if decision.refusal is not None:
            ctx.result = _refused(str(decision.refusal.code))
            return
        ctx.function_invocation_kwargs[RUN_KEY] = turn
        token = _RUN.set(turn)
        try:
            await call_next()
        finally:
            if not ctx.stream:
                # A streamed run goes on while the caller reads the stream.
                _RUN.reset(token)
        await _after_run(ctx, turn, self.on_report)

    async def request(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        """One model request: unknown calls answered by tool_call, only offered tools sent."""
        turn = _RUN.get(None)
        if turn is not None:
            await _answer_unknown_calls(turn, ctx.messages, _names(ctx.options))
            if ctx.options:
                tools = _shown(ctx.options, turn.offered, self.rails)
                ctx.options = {**ctx.options, "tools": tools}
        await call_next()

    async def call(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        """One tool call through tool_call; the tool runs through ``call_next``."""
        turn = ctx.kwargs.get(RUN_KEY)
        if not isinstance(turn, Turn):  # a call outside a guarded run: a turn of its own
            session = getattr(ctx.session, "session_id", None)
            turn = start_turn(self.rails, self.context, ctx, session)
        token = _CALL.set((ctx, call_next))
        try:
            result = await turn.acall(
                ctx.function.name, _arguments(ctx.arguments), ctx.metadata.get("call_id")
            )
        finally:
            _CALL.reset(token)
        ctx.result = result.content


def _middleware(guarding: _Guarding) -> list[Any]:
    from agent_framework import AgentMiddleware, ChatMiddleware, FunctionMiddleware

    class RunGuard(AgentMiddleware):  # type: ignore[misc, unused-ignore]
        async def process(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
            await guarding.run(ctx, call_next)

    class RequestGuard(ChatMiddleware):  # type: ignore[misc, unused-ignore]
        async def process(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
            await guarding.request(ctx, call_next)

    class CallGuard(FunctionMiddleware):  # type: ignore[misc, unused-ignore]
        async def process(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
            await guarding.call(ctx, call_next)

    return [RunGuard(), RequestGuard(), CallGuard()]


def _tools_of(ctx: Any) -> list[Any]:
    agent_options = getattr(ctx.agent, "default_options", None) or {}
    run_tools = ctx.tools if ctx.tools is not None else (ctx.options or {}).get("tools")
    found = list(agent_options.get("tools") or [])
    if isinstance(run_tools, list | tuple):
        found += list(run_tools)
    elif run_tools is not None:
        found.append(run_tools)
    return [t for t in found if isinstance(getattr(t, "name", None), str)]


def _known(rails: Guardrails, names: list[str]) -> list[str]:
    # Tools the engine does not know (hosted tools, MCP tools) are not decided here.
    return [n for n in dict.fromkeys(names) if n in rails.tools]


def _name(tool: Any) -> Any:
    return tool.get("name") if isinstance(tool, Mapping) else getattr(tool, "name", None)


def _shown(options: Any, offered: frozenset[str] | None, rails: Guardrails) -> list[Any]:
    """The tools a request offers: those pre_turn offered, with the engine's schema when it hides bound ones.

    Only what is sent to the model changes: the framework runs the tools it already holds.
    """
    shown = []
    for tool in options.get("tools") or ():
        engine_tool = rails.tools.get(_name(tool))
        if engine_tool is None:
            shown.append(tool)  # not the engine's to decide (hosted or MCP tools)
        elif offered is None or engine_tool.name in offered:
            shown.append(_declared(tool, engine_tool) if engine_tool.bound else tool)
    return shown


# Per tool name: (framework tool, engine tool, the declaration-only copy the model is shown).
_DECLARED: dict[str, tuple[Any, Tool, Any]] = {}


def _declared(tool: Any, engine_tool: Tool) -> Any:
    from agent_framework import FunctionTool

    if not isinstance(tool, FunctionTool):
        return tool
    cached = _DECLARED.get(engine_tool.name)
    if cached is not None and cached[0] is tool and cached[1] is engine_tool:
        return cached[2]
    schema = engine_tool.to_mcp()["inputSchema"]
    shown = FunctionTool(name=tool.name, description=tool.description, input_model=schema)
    _DECLARED[engine_tool.name] = (tool, engine_tool, shown)
    return shown


def _names(options: Any) -> frozenset[Any]:
    return frozenset(_name(t) for t in (options or {}).get("tools") or ())


async def _answer_unknown_calls(turn: Turn, messages: Any, known: frozenset[Any]) -> None:
    """Calls of tools the agent does not have, answered by tool_call instead of the framework.

    The framework answers them itself, before any function middleware, with a
    sentence that repeats the name the model made up; here each such answer is
    replaced, once, by tool_call's (``unavailable``), which also records the call.
    """
    from agent_framework import Content

    asked = {
        c.call_id: c
        for m in messages
        for c in m.contents
        if c.type == "function_call" and c.name not in known
    }
    for message in messages:
        for i, content in enumerate(message.contents):
            call = asked.get(content.call_id) if content.type == "function_result" else None
            if call is None or (content.additional_properties or {}).get(_MARK):
                continue
            result = await turn.acall(call.name, call.parse_arguments(), call.call_id)
            message.contents[i] = Content.from_function_result(
                call.call_id,
                result=result.content,
                additional_properties={_MARK: result.outcome.value},
            )


def _arguments(arguments: Any) -> Any:
    dump = getattr(arguments, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True)
    return arguments


def _refused(code: str) -> Any:
    from agent_framework import AgentResponse

    return AgentResponse(messages=[], additional_properties={"guardrails_refusal": code})


async def _after_run(ctx: Any, turn: Turn, on_report: ReportSink) -> None:
    response = ctx.result
    if getattr(response, "messages", None) is None:
        # A streamed run: post_run runs on the final response.
        add = getattr(ctx, "stream_result_transforms", None)
        if isinstance(add, list):

            async def finish(final: Any) -> Any:
                await _report(turn, final, on_report)
                return final

            add.append(finish)
        return
    await _report(turn, response, on_report)


async def _report(turn: Turn, response: Any, on_report: ReportSink) -> None:
    report = await turn.apost_run(getattr(response, "text", None) or "")
    props = getattr(response, "additional_properties", None)
    if isinstance(props, dict):
        props["guardrails_post_run"] = report
    if on_report is not None:
        on_report(report)
