"""Microsoft Agent Framework: an existing ``Agent`` guarded by one call.

::

    agent = guard_agent(Agent(client=client, tools=[get_weather]), rails)
    response = await agent.run("What is the weather in Paris?")

``guard_agent`` registers the agent's function tools in the engine (schema from
each tool's own ``parameters()``) and adds three middleware to the agent: one
per run (a ``Turn``, pre_turn over the input, post_run over the answer; a run
that answers approval requests goes on in the turn that asked), one per model
request (only the offered tools are sent; the arguments of each call the model
asks for are kept as it wrote them, before the framework validates and strips
them), and one per tool call (the tool_call pipeline on those arguments; the
model reads our outcome's content, never the framework's error text). The tool
itself still runs through the framework (``call_next``), with the arguments
tool_call admitted and the bound ones added. A call the approval gate holds is
answered with the framework's ``function_approval_request`` (docs/approvals.md).
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from ..context import ToolResult
from ..engine import Guardrails, Turn
from ..tools import Tool
from ._approval import held, pause
from ._common import ContextSource, ReportSink, Runs, start_turn
from ._framework_tools import (
    Clash,
    ToolOptions,
    arefused,
    check_options,
    extra_of,
    register,
    watch,
)
from ._media import agent_framework_text
from ._rich import Rich, sent

__all__ = ["RUN_KEY", "guard_agent", "tool_from"]

# Where the run's Turn travels to the tool middleware: the framework forwards
# ``function_invocation_kwargs`` to every FunctionInvocationContext of the run.
RUN_KEY = "guardrails_turn"
_MARK = "guardrails_outcome"

# The run's Turn, for the middleware around each model request (the framework
# does not forward ``function_invocation_kwargs`` there).
_RUN: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("guardrails_agent_framework_run")


class _Call(NamedTuple):
    """The framework's context and continuation of the call being run, for the tool that
    tool_call runs (``_through_framework``), and where a rich result waits."""

    context: Any
    call_next: Callable[[], Awaitable[None]]
    rich: list[Rich]


_CALL: contextvars.ContextVar[_Call] = contextvars.ContextVar("guardrails_agent_framework_call")


def tool_from(function_tool: Any, **options: Any) -> Tool:
    """A guarded ``Tool`` for an Agent Framework ``FunctionTool``.

    The schema is the tool's own ``parameters()`` (``required`` lists the
    parameters without a default; undeclared arguments are refused unless it
    opens them); ``options`` are those of ``Tool``.
    """
    name = function_tool.name
    schema = function_tool.parameters()
    options.setdefault("description", function_tool.description or "")
    options.setdefault("extra", extra_of(schema))
    return Tool(name, _through_framework, schema, **options)


async def _through_framework(**arguments: Any) -> Any:
    # The admitted arguments (bound ones included) replace the model's, and the
    # framework runs the tool: its own conversion, injection and result parsing.
    call = _CALL.get()
    context = call.context
    if arguments != _arguments(context.arguments):
        # What the model sent (and a person approved) stays what the framework shows
        # and checks an approval against; the bound values are added to what runs,
        # as the framework's own middleware adds hidden arguments.
        context.metadata.setdefault("original_arguments_for_messages", context.arguments)
        context.arguments = arguments
    await call.call_next()
    return _result_value(context.result, call.rich)


def _result_value(result: Any, rich: list[Rich]) -> Any:
    """What tool_call renders: the text of text contents; a stand-in for media (kept in ``rich``)."""
    text = agent_framework_text(result)
    if text is not None:
        rich.append(Rich(text, result))
        return text
    if isinstance(result, list) and all(getattr(c, "type", None) == "text" for c in result):
        return "".join(c.text for c in result)
    return result


def _input_messages(messages: Any) -> list[dict[str, Any]]:
    return [{"role": str(m.role), "content": m.text or ""} for m in messages or ()]


def guard_agent(
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
    check_options([t.name for t in function_tools], tool_options, "guard_agent(agent)")
    for ft in function_tools:
        options = (tool_options or {}).get(ft.name)
        build = functools.partial(tool_from, ft)
        register(rails, ft.name, build, options, source=ft, clash=Clash.APPLICATION_WINS)
    watch(rails)  # a call a person rejects at an approval is audited through it
    middleware = list(getattr(agent, "middleware", None) or [])
    agent.middleware = [*middleware, *_middleware(_Guarding(rails, context, on_report))]
    return agent


class _Guarding:
    """What the three middleware do, with the engine, the context source and the report sink."""

    def __init__(self, rails: Guardrails, context: ContextSource, on_report: ReportSink) -> None:
        self.rails = rails
        self.context = context
        self.on_report = on_report
        # Per turn: the arguments of each call as the model wrote them, by call id.
        self.asked = Runs()
        # The turn of a run that stopped for approvals, by each call's function_call
        # content (held weakly: the approval request the application answers holds it).
        self.paused = Runs()

    async def run(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        """One agent run: a turn, pre_turn over the input, post_run over the answer."""
        turn = await self._resumed(ctx.messages)
        if turn is None:
            session = getattr(ctx.session, "session_id", None)
            turn = start_turn(self.rails, self.context, ctx, session)
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
        await _after_run(ctx, turn, self)

    async def _resumed(self, messages: Any) -> Turn | None:
        """The turn that asked for the approvals these messages answer (their arguments kept);
        a call the person rejected is audited as refused (it never runs)."""
        turn = None
        for content in _contents(messages, "function_approval_response"):
            call = content.function_call
            found = self.paused.pop(call) if call is not None else None
            if not isinstance(found, Turn):
                continue
            turn = found
            if content.approved:
                self.asked.get(turn, dict)[call.call_id] = call.arguments
            else:
                await arefused(turn, call.name, call.arguments, call.call_id)
        return turn

    def pause(self, turn: Turn, response: Any) -> bool:
        """Keep ``turn`` for the approval requests of ``response``; whether there were any."""
        requests = [
            c
            for c in getattr(response, "user_input_requests", None) or ()
            if c.type == "function_approval_request" and c.function_call is not None
        ]
        for request in requests:
            self.paused.get(request.function_call, lambda: turn)
        return bool(requests)

    async def request(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        """One model request: unknown calls answered by tool_call, only offered tools sent;
        the calls the model asks for are kept as it wrote them."""
        turn = _RUN.get(None)
        if turn is not None:
            await _answer_unknown_calls(turn, ctx.messages, _names(ctx.options))
            if ctx.options:
                tools = _shown(ctx.options, turn.offered, self.rails)
                ctx.options = {**ctx.options, "tools": tools}
        await call_next()
        if turn is None:
            return
        asked = self.asked.get(turn, dict)

        def keep(response: Any) -> Any:
            for call in _contents(getattr(response, "messages", None), "function_call"):
                asked[call.call_id] = call.arguments
            return response

        if ctx.stream:
            ctx.stream_result_hooks.append(keep)
        else:
            keep(ctx.result)

    async def call(self, ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        """One tool call through tool_call; the tool runs through ``call_next``."""
        turn = ctx.kwargs.get(RUN_KEY)
        if not isinstance(turn, Turn):  # a call outside a guarded run: a turn of its own
            session = getattr(ctx.session, "session_id", None)
            turn = start_turn(self.rails, self.context, ctx, session)
        call_id = ctx.metadata.get("call_id")
        asked = self.asked.peek(turn)
        # The model's own arguments (undeclared ones included); the framework's
        # validated copy only for a call whose request was not seen here.
        arguments = asked.pop(call_id, _MISSING) if asked is not None else _MISSING
        if arguments is _MISSING:
            arguments = _arguments(ctx.arguments)
        call = _Call(ctx, call_next, [])
        token = _CALL.set(call)
        try:
            result = await turn.acall(ctx.function.name, arguments, call_id)
        finally:
            _CALL.reset(token)
        if held(result) and ctx.metadata.get("approval_response") is None:
            # Held for a person: the framework's own approval request, as a security
            # middleware answers. Approved, the call comes back here (with its
            # ``approval_response``) and runs only on the stored approval.
            ctx.result = _approval_request(ctx, result, arguments)
            return
        ctx.result = sent(result, call.rich[-1] if call.rich else None)


def _approval_request(ctx: Any, result: ToolResult, arguments: Any) -> Any:
    """The framework's approval request for a call the gate holds (our pause attached)."""
    from agent_framework import Content

    occurrence = ctx.metadata.get("function_call_occurrence_id") or result.call_id
    function_call = Content.from_function_call(
        call_id=result.call_id,
        name=result.tool,
        arguments=arguments if isinstance(arguments, dict) else {},
        id=occurrence,
    )
    return Content.from_function_approval_request(
        id=occurrence, function_call=function_call, additional_properties=pause(result)
    )


_MISSING = object()


def _contents(messages: Any, kind: str) -> list[Any]:
    """The contents of ``kind`` in ``messages``."""
    return [
        c
        for m in messages or ()
        for c in getattr(m, "contents", None) or ()
        if getattr(c, "type", None) == kind
    ]


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


async def _after_run(ctx: Any, turn: Turn, guarding: _Guarding) -> None:
    response = ctx.result
    if getattr(response, "messages", None) is None:
        # A streamed run: post_run runs on the final response.
        add = getattr(ctx, "stream_result_transforms", None)
        if isinstance(add, list):

            async def finish(final: Any) -> Any:
                await _report(turn, final, guarding)
                return final

            add.append(finish)
        return
    await _report(turn, response, guarding)


async def _report(turn: Turn, response: Any, guarding: _Guarding) -> None:
    if guarding.pause(turn, response):
        return  # stopped for approvals: the turn goes on when they are answered
    on_report = guarding.on_report
    report = await turn.apost_run(getattr(response, "text", None) or "")
    props = getattr(response, "additional_properties", None)
    if isinstance(props, dict):
        props["guardrails_post_run"] = report
    if on_report is not None:
        on_report(report)
