"""LangChain v1 agents (``create_agent``): one middleware guards the whole agent.

::

    agent = create_agent(model, tools, middleware=[langchain.middleware(rails)])

Every tool call goes through tool_call (``wrap_tool_call``/``awrap_tool_call``)
and comes back as a ``ToolMessage`` whose content is exactly what tool_call
decided, with ``status="error"`` for every non-ok outcome. A tool's content
blocks (images, files) are sent as blocks when tool_call kept their stand-in
text unchanged (``_rich``), and a ``content_and_artifact`` tool's artifact is
kept on the message. The tools offered to the model go through pre_turn once
per run (``wrap_model_call``), with bound parameters removed from their
schemas; post_run runs when the agent ends (``after_agent``), over the final
text and the structured response, whose rewrites go back into the state. One
``invoke``/``ainvoke`` is one turn. A call the approval gate holds interrupts
the graph (``interrupt``); the resumed thread goes on in the same turn
(docs/approvals.md).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from functools import cache
from types import SimpleNamespace
from typing import Any

from ..context import ToolResult, TurnContext
from ..engine import Guardrails, Turn
from ..middleware._render import render
from ..middleware.post_run import PostRunReport
from ..tools import Tool
from ..verdicts import Outcome
from ._approval import held, pause
from ._common import Offer, aoffer, context_of, field, offer
from ._framework_tools import (
    Clash,
    acall_native,
    arefused,
    call_native,
    check_options,
    native_tool,
    refused,
    register,
    watch,
)
from ._rich import Rich, address_note, base64_note, sent

__all__ = ["REFUSAL_KEY", "STATE_KEY", "middleware", "scripted_model"]

# The state key of the run's turn (untracked: never checkpointed, never sent).
STATE_KEY = "guardrails_run"
# The response_metadata key of the AIMessage that answers a refused turn.
REFUSAL_KEY = "guardrails_refusal"
# The most threads whose run is kept (for a resumption) at once.
MAX_THREADS = 10_000


class _Run:
    """One run: its turn, and the lock that makes its sync tool calls one at a time."""

    __slots__ = ("held", "lock", "offer", "report", "turn")

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.lock = threading.Lock()
        self.offer: Offer | None = None
        self.report: PostRunReport | None = None
        # Calls the approval gate held, paused with ``interrupt``: call id -> what it showed.
        self.held: dict[str, dict[str, Any]] = {}

    def resumed(self, call_id: Any) -> bool | None:
        """For a call paused here, the application's answer to its ``interrupt`` (the
        graph is being resumed): whether it approves. None for any other call."""
        shown = self.held.pop(call_id, None) if isinstance(call_id, str) else None
        if shown is None:
            return None
        return _approves(_sdk().interrupt(shown))

    def pause(self, result: ToolResult, resumed: bool | None) -> None:
        """Pause the graph on a call the gate holds (once: a resumed call answers the model)."""
        if resumed is None and held(result) and result.call_id:
            self.held[result.call_id] = shown = pause(result)
            _sdk().interrupt(shown)


def _approves(answer: Any) -> bool:
    """Whether a resume value approves: ``True``, ``"approve"`` or ``{"type": "approve"}``
    (anything else rejects). Advisory: the call still runs only on a stored approval."""
    if isinstance(answer, dict):
        answer = answer.get("type")
    return answer is True or answer == "approve"


class _Call:
    """The framework's per-call object: the request, its handler, and what the tool's
    message carried besides text (a passed-through Command, content blocks, an artifact)."""

    __slots__ = ("artifact", "command", "handler", "request", "rich")

    def __init__(self, request: Any, handler: Callable[[Any], Any]) -> None:
        self.request = request
        self.handler = handler
        self.command: Any = None
        self.rich: Rich | None = None
        self.artifact: Any = None


@cache
def _sdk() -> SimpleNamespace:
    """The LangChain names the middleware uses, imported on first use."""
    from langchain.agents.middleware.types import ModelResponse
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.errors import GraphBubbleUp
    from langgraph.types import interrupt

    return SimpleNamespace(
        AIMessage=AIMessage,
        GraphBubbleUp=GraphBubbleUp,
        interrupt=interrupt,
        ModelResponse=ModelResponse,
        ToolMessage=ToolMessage,
        convert_to_openai_tool=convert_to_openai_tool,
    )


async def _invoke(call: _Call, arguments: dict[str, Any]) -> Any:
    request = call.request.override(tool_call={**call.request.tool_call, "args": arguments})
    out = call.handler(request)
    if inspect.isawaitable(out):
        out = await out
    if isinstance(out, _sdk().ToolMessage):
        if out.status == "error":
            # The framework's own error message (often the exception text) stays here.
            raise _FrameworkError
        call.artifact = out.artifact
        content = out.content
        if isinstance(content, list):  # content blocks: tool_call renders their stand-in
            call.rich = Rich("\n".join(_block_text(b) for b in content), content)
            return call.rich.text
        return content
    call.command = out  # a Command updating the graph's state: returned as it is
    return ""


_UNCAPPED = 1 << 62  # a stand-in is cut by tool_call, as a whole


def _block_text(block: Any) -> str:
    """The stand-in of one content block: text as it is, media as a note, never its bytes."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return render(block, _UNCAPPED)[0]
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    mime = block.get("mime_type")
    data = block.get("base64", block.get("data"))
    if isinstance(data, str):
        return base64_note(mime, data)
    url = block.get("url")
    if url is None and isinstance(block.get("image_url"), dict):
        url = block["image_url"].get("url")
    if isinstance(url, str):
        return address_note(mime, url)
    return render(block, _UNCAPPED)[0]


class _FrameworkError(Exception):
    """The tool answered with an error message of the framework's; the model sees ``error``."""


def middleware(
    rails: Guardrails,
    *,
    context: Callable[[Any], TurnContext] | None = None,
    tool_options: Mapping[str, Mapping[str, Any]] | None = None,
    on_report: Callable[[PostRunReport], Any] | None = None,
) -> Any:
    """An ``AgentMiddleware`` that guards every tool call of the agent it is given to.

    ``context(runtime)`` gives the turn's context (default: the run's
    ``context=`` read by ``context_of``, the thread id as session);
    ``tool_options`` maps a tool name to ``Tool`` options (``bind=``,
    ``effect=``, ``timeout=``, ``guards=``); ``on_report`` receives each run's
    post_run report.
    """
    watch(rails)  # a call the application rejects at its interrupt is audited through it
    return _middleware_class()(rails, context, dict(tool_options or {}), on_report)


def _thread_id(runtime: Any) -> str | None:
    """The LangGraph thread id of a node's ``Runtime`` or a tool's ``ToolRuntime``."""
    thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
    if thread is None:
        configurable = (getattr(runtime, "config", None) or {}).get("configurable") or {}
        thread = configurable.get("thread_id")
    return thread if isinstance(thread, str) else None


def _human_text(messages: Any) -> str:
    """What the user wrote: the text of the human messages (LangChain messages have no role)."""
    return "\n".join(
        m.text for m in messages or [] if getattr(m, "type", None) == "human" and m.text
    )


def _message_text(messages: Any) -> str | None:
    for message in reversed(messages or []):
        if getattr(message, "type", None) == "ai":
            text = getattr(message, "text", None)
            return text if isinstance(text, str) else None
    return None


class _Middleware:
    """The middleware's logic; ``_middleware_class`` adds LangChain's base and state."""

    def __init__(
        self,
        rails: Guardrails,
        context: Callable[[Any], TurnContext] | None,
        tool_options: dict[str, Mapping[str, Any]],
        on_report: Callable[[PostRunReport], Any] | None,
    ) -> None:
        super().__init__()
        self.rails = rails
        self.context = context
        self.tool_options = tool_options
        self.on_report = on_report
        # The run of each thread until it ends: a run resumed after an interrupt (its
        # state holds no turn: it is never checkpointed) goes on in the same turn.
        self._threads: dict[str, _Run] = {}
        self._threads_lock = threading.Lock()

    # -- the run: one turn ------------------------------------------------

    def _turn(self, runtime: Any) -> Turn:
        if self.context is not None:
            return self.rails.turn(self.context(runtime))
        context = getattr(runtime, "context", None)
        return self.rails.turn(context_of(context, session=_thread_id(runtime)))

    def _start(self, runtime: Any) -> dict[str, Any]:
        run = _Run(self._turn(runtime))
        thread = _thread_id(runtime)
        if thread is not None:
            with self._threads_lock:
                self._keep(thread, run)
        return {STATE_KEY: run}

    def _keep(self, thread: str, run: _Run) -> None:
        self._threads.pop(thread, None)
        if len(self._threads) >= MAX_THREADS:  # the oldest: if resumed, in a new turn
            del self._threads[next(iter(self._threads))]
        self._threads[thread] = run

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._start(runtime)

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._start(runtime)

    def _run(self, state: Any, runtime: Any) -> _Run:
        run = field(state, STATE_KEY)
        if isinstance(run, _Run):
            return run
        # A run resumed from a checkpoint (after an interrupt) has no turn in its
        # state: its thread's run, or (another process, no thread) a new one.
        thread = _thread_id(runtime)
        if thread is None:
            return _Run(self._turn(runtime))
        with self._threads_lock:
            found = self._threads.get(thread)
            if found is None:
                found = _Run(self._turn(runtime))
                self._keep(thread, found)
            return found

    def _finished(self, runtime: Any, run: _Run) -> None:
        thread = _thread_id(runtime)
        if thread is not None:
            with self._threads_lock:
                if self._threads.get(thread) is run:
                    del self._threads[thread]

    def _ended(self, run: _Run, report: PostRunReport) -> None:
        run.report = report
        if self.on_report is not None:
            self.on_report(report)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        run = self._run(state, runtime)
        structured = field(state, "structured_response")
        text = _message_text(field(state, "messages"))
        report = run.turn.post_run(text, structured=structured)
        self._finished(runtime, run)
        self._ended(run, report)
        return _rewritten(structured, report)

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        run = self._run(state, runtime)
        structured = field(state, "structured_response")
        text = _message_text(field(state, "messages"))
        report = await run.turn.apost_run(text, structured=structured)
        self._finished(runtime, run)
        self._ended(run, report)
        return _rewritten(structured, report)

    # -- what is offered --------------------------------------------------

    def _register(self, tool: Any) -> Tool:
        def build(**options: Any) -> Tool:
            # Converted once, when the tool is first seen.
            schema = _sdk().convert_to_openai_tool(tool)["function"]["parameters"]
            options.setdefault("description", tool.description or "")
            # A backstop action runs the tool itself (no graph, no injected state).
            return native_tool(
                tool.name, schema, _invoke, is_async=True, direct=tool.ainvoke, **options
            )

        options = self.tool_options.get(tool.name)
        return register(self.rails, tool.name, build, options, source=tool, clash=Clash.REFUSE)

    def _request(self, request: Any) -> tuple[_Run, dict[str, Tool]]:
        mine = {}
        for tool in request.tools:
            if not isinstance(tool, dict):
                mine[tool.name] = self._register(tool)
        return self._run(request.state, request.runtime), mine

    def _offered(self, request: Any, mine: dict[str, Tool], offered: Offer) -> Any:
        if offered.refusal is not None:
            sdk = _sdk()
            return sdk.ModelResponse(
                result=[
                    sdk.AIMessage(
                        content=offered.refusal,
                        response_metadata={REFUSAL_KEY: offered.refusal},
                    )
                ]
            )
        names = {t.name for t in offered.tools}
        tools = [
            mine[t.name].to_openai() if not isinstance(t, dict) else t
            for t in request.tools
            if isinstance(t, dict) or t.name in names
        ]
        return request.override(tools=tools)

    # pre_turn runs once per run, at the first model call; later calls reuse it.

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        run, mine = self._request(request)
        if run.offer is None:
            check_options(mine, self.tool_options)
            run.offer = offer(run.turn, _human_text(request.messages), mine)
        decided = self._offered(request, mine, run.offer)
        return decided if isinstance(decided, _sdk().ModelResponse) else handler(decided)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        run, mine = self._request(request)
        if run.offer is None:
            check_options(mine, self.tool_options)
            run.offer = await aoffer(run.turn, _human_text(request.messages), mine)
        decided = self._offered(request, mine, run.offer)
        return decided if isinstance(decided, _sdk().ModelResponse) else await handler(decided)

    # -- every tool call --------------------------------------------------

    def _answer(self, call: _Call, result: ToolResult) -> Any:
        if isinstance(result.exception, _sdk().GraphBubbleUp):
            # An interrupt (human in the loop) is the graph's control flow, not a failure:
            # it goes on to the graph (the call is audited as an error meanwhile).
            raise result.exception
        if result.outcome is Outcome.OK and call.command is not None:
            return call.command
        tool_call = call.request.tool_call
        ok = result.outcome is Outcome.OK
        return _sdk().ToolMessage(
            content=sent(result, call.rich),
            artifact=call.artifact if ok else None,
            tool_call_id=tool_call.get("id") or result.call_id,
            name=result.tool,
            status="success" if ok else "error",
        )

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool is not None:
            self._register(request.tool)
        run = self._run(request.state, request.runtime)
        call = _Call(request, handler)
        name, args, call_id = _parts(request.tool_call)
        with run.lock:
            resumed = run.resumed(call_id)
            if resumed is False:  # the application rejected it: it never runs
                result = refused(run.turn, name, args, call_id)
            else:
                result = call_native(run.turn, call, name, args, call_id)
            run.pause(result, resumed)
        return self._answer(call, result)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool is not None:
            self._register(request.tool)
        run = self._run(request.state, request.runtime)
        call = _Call(request, handler)
        name, args, call_id = _parts(request.tool_call)
        resumed = run.resumed(call_id)
        if resumed is False:  # the application rejected it: it never runs
            result = await arefused(run.turn, name, args, call_id)
        else:
            result = await acall_native(run.turn, call, name, args, call_id)
        run.pause(result, resumed)
        return self._answer(call, result)


def _parts(tool_call: Any) -> tuple[Any, Any, Any]:
    """A tool call's name, arguments and id, as the model sent them."""
    return tool_call.get("name"), tool_call.get("args"), tool_call.get("id")


def _rewritten(structured: Any, report: PostRunReport) -> dict[str, Any] | None:
    """The state update that puts post_run's rewrites into the structured response."""
    if structured is None or not report.changes or report.structured is None:
        return None
    rewritten: Any = dict(report.structured)
    validate = getattr(type(structured), "model_validate", None)
    if callable(validate):  # the response format's own model
        rewritten = validate(rewritten)
    return {"structured_response": rewritten}


@cache
def _middleware_class() -> type:
    from typing import Annotated, NotRequired

    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain.agents.middleware.types import PrivateStateAttr
    from langgraph.channels.untracked_value import UntrackedValue
    from typing_extensions import TypedDict

    # The run's turn: untracked (never checkpointed) and private (never in the output).
    # Functional form: a class body's annotations would be resolved in module scope,
    # where the framework's classes are not imported.
    run_field = TypedDict(  # noqa: UP013
        "run_field",
        {"guardrails_run": NotRequired[Annotated[Any, UntrackedValue, PrivateStateAttr]]},
    )
    state = type("GuardrailsState", (AgentState, run_field), {})
    return type("GuardrailsMiddleware", (_Middleware, AgentMiddleware), {"state_schema": state})


def scripted_model(*replies: Any) -> Any:
    """An offline chat model for tests and examples: LangChain's ``GenericFakeChatModel``
    answering with ``replies`` (``AIMessage``s, tool calls included) in order.

    It accepts any tools, and records each call's messages in ``.sent`` and
    the tool definitions it was bound to in ``.offered``.
    """
    return _scripted_class()(messages=iter(replies))


@cache
def _scripted_class() -> type:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from pydantic import Field

    class ScriptedChatModel(GenericFakeChatModel):
        sent: list[Any] = Field(default_factory=list)
        offered: list[Any] = Field(default_factory=list)

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            self.offered.append(list(tools))
            return self

        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            self.sent.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    return ScriptedChatModel
