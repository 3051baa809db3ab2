"""Google ADK: an existing agent guarded by one plugin on its ``Runner``.

::

    runner = InMemoryRunner(agent=agent, plugins=[plugin(agent, rails)])

The plugin registers the agent tree's function tools in the engine (schema
from each tool's own declaration) and, for every run of the runner: starts a
``Turn`` (session from the ADK session), runs pre_turn over the user's message
before each model request (only offered tools are sent), and runs post_run
when the run ends.

It leaves ADK's own order in place: every plugin's and the agent's
``before_tool_callback`` run, then ADK's ``require_confirmation`` gate, and
only then the tool, which is where tool_call runs (the plugin puts itself in
front of the tool's ``run_async``; the tool runs with the arguments tool_call
admitted and the bound ones added). A call one of those callbacks answered is
audited as refused by the ``framework_check`` guard and the model gets the
callback's answer; a call waiting for confirmation is not audited until it
runs. Unknown and withheld tools are answered from ``on_tool_error_callback``.
A call the approval gate holds asks for ADK's tool confirmation
(``request_confirmation``); the confirmed call comes back through tool_call
(docs/approvals.md).
"""

from __future__ import annotations

import contextvars
import functools
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from ..context import ToolResult
from ..engine import Guardrails, Turn
from ..middleware._render import render
from ..tools import Tool
from ._approval import held, pause
from ._common import ContextSource, ReportSink, reads_as_value, start_turn
from ._framework_tools import (
    Clash,
    ToolOptions,
    arefused,
    check_options,
    extra_of,
    register,
    watch,
)
from ._rich import Rich, binary_note, sent, url_note

__all__ = ["plugin", "tool_from"]

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class _Call:
    """The call being run: the ADK tool's own ``run_async``, its ToolContext, and a result
    with media parts the tool returned (kept here while tool_call renders its stand-in)."""

    __slots__ = ("rich", "run_async", "tool_context")

    def __init__(self, run_async: Any, tool_context: Any) -> None:
        self.run_async = run_async
        self.tool_context = tool_context
        self.rich: Rich | None = None


_CALL: contextvars.ContextVar[_Call] = contextvars.ContextVar("guardrails_adk_call")


def tool_from(adk_tool: Any, **options: Any) -> Tool:
    """A guarded ``Tool`` for an ADK tool (a ``FunctionTool`` or a plain function).

    The schema is the tool's own declaration (``required`` lists the
    parameters without a default; undeclared arguments are refused unless it
    opens them); ``options`` are those of ``Tool``.
    """
    adk_tool = _as_adk_tool(adk_tool)
    declaration = adk_tool._get_declaration()  # ADK exposes it only through this method
    schema = _schema_of(declaration)
    options.setdefault("description", adk_tool.description or "")
    options.setdefault("extra", extra_of(schema))
    return Tool(adk_tool.name, _through_adk, schema, **options)


def _as_adk_tool(item: Any) -> Any:
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.function_tool import FunctionTool

    return item if isinstance(item, BaseTool) else FunctionTool(item)


def _schema_of(declaration: Any) -> dict[str, Any]:
    if declaration is None:
        return dict(_EMPTY_SCHEMA)
    schema = declaration.parameters_json_schema
    if schema is None and declaration.parameters is not None:
        schema = declaration.parameters.json_schema.model_dump(mode="json", exclude_none=True)
    return dict(schema) if isinstance(schema, dict) else dict(_EMPTY_SCHEMA)


async def _through_adk(**arguments: Any) -> Any:
    call = _CALL.get()
    value = await call.run_async(args=arguments, tool_context=call.tool_context)
    call.rich = _media(value)
    return value if call.rich is None else call.rich.text


def _media(value: Any) -> Rich | None:
    """A stand-in for a result carrying media ``Part``s (alone, or in a list or dict, as ADK
    finds them): each part a note, never its bytes; None for a result without media."""
    from google.genai import types

    def text(item: Any) -> Any:
        if not isinstance(item, types.Part):
            return item
        if item.inline_data is not None and item.inline_data.data is not None:
            return binary_note(item.inline_data.mime_type, len(item.inline_data.data))
        if item.file_data is not None:
            return url_note(item.file_data.mime_type, item.file_data.file_uri)
        return item.text or ""

    if isinstance(value, types.Part):
        return Rich(str(text(value)), value)
    if isinstance(value, list | tuple) and any(isinstance(v, types.Part) for v in value):
        parts = [text(v) for v in value]
        return Rich(
            "\n".join(p if isinstance(p, str) else render(p, _UNCAPPED)[0] for p in parts), value
        )
    if isinstance(value, dict) and any(isinstance(v, types.Part) for v in value.values()):
        return Rich(render({k: text(v) for k, v in value.items()}, _UNCAPPED)[0], value)
    return None


_UNCAPPED = 1 << 62  # a stand-in is cut by tool_call, as a whole


def _agent_tools(agent: Any) -> Iterator[Any]:
    from google.adk.tools.base_tool import BaseTool

    for item in getattr(agent, "tools", None) or ():
        if isinstance(item, BaseTool) or (callable(item) and not hasattr(item, "get_tools")):
            yielded = _as_adk_tool(item)
            if hasattr(yielded, "_get_declaration"):
                yield yielded
    for sub in getattr(agent, "sub_agents", None) or ():
        yield from _agent_tools(sub)


def _text(content: Any) -> str:
    parts = getattr(content, "parts", None) or ()
    return "\n".join(p.text for p in parts if getattr(p, "text", None))


def plugin(
    agent: Any,
    rails: Guardrails,
    *,
    tool_options: ToolOptions | None = None,
    context: ContextSource = None,
    on_report: ReportSink = None,
    name: str = "guardrails",
) -> Any:
    """A ``BasePlugin`` that guards ``agent`` (and its sub-agents) with ``rails``.

    ``tool_options`` gives per-tool ``Tool`` options (``{"transfer": {"bind": {...},
    "effect": True}}``); ``context`` a ``TurnContext`` or a function of the
    ADK ``InvocationContext`` returning one (default: the ADK session id);
    ``on_report`` receives each run's post_run report.
    """
    found = {t.name: t for t in _agent_tools(agent)}
    check_options(found, tool_options, "plugin(agent)")
    for tool_name, adk_tool in found.items():
        _register(rails, adk_tool, (tool_options or {}).get(tool_name))
    watch(rails)
    return _plugin(_Guarding(rails, context, on_report), name)


def _register(rails: Guardrails, adk_tool: Any, options: Mapping[str, Any] | None) -> Tool:
    build = functools.partial(tool_from, adk_tool)
    return register(
        rails, adk_tool.name, build, options, source=adk_tool, clash=Clash.APPLICATION_WINS
    )


class _Guarding:
    """What the plugin does, with the engine, the context source and the report sink.

    The ADK contexts (``InvocationContext``, and the callback and tool contexts)
    all carry ``invocation_id``, ``session`` and ``user_content``.
    """

    def __init__(self, rails: Guardrails, context: ContextSource, on_report: ReportSink) -> None:
        self.rails = rails
        self.context = context
        self.on_report = on_report
        self.runs: dict[str, _Run] = {}
        # Calls waiting for a person's confirmation: call id -> the invocation they paused.
        # ADK resumes that invocation (same id) with the confirmation: its run, and so its
        # turn, is kept until then (one pre_turn, one post_run).
        self.waiting: dict[str, str] = {}

    def run_of(self, adk_context: Any) -> _Run:
        run = self.runs.get(adk_context.invocation_id)
        if run is None:
            session = getattr(adk_context.session, "id", None)
            turn = start_turn(self.rails, self.context, adk_context, session)
            run = _Run(turn, _text(adk_context.user_content))
            self.runs[adk_context.invocation_id] = run
        return run

    async def request(self, callback_context: Any, llm_request: Any) -> None:
        run = self.run_of(callback_context)
        for adk_tool in (llm_request.tools_dict or {}).values():
            if hasattr(adk_tool, "_get_declaration"):
                # A toolset's tools are known only now; they get default options.
                _register(self.rails, adk_tool, None)
        await run.decide(list(llm_request.tools_dict or {}))
        _restrict(llm_request, run.turn.offered, self.rails)

    def guard(self, tool: Any) -> None:
        """Put tool_call in front of the tool's ``run_async`` (for this plugin's runs)."""
        current = tool.__dict__.get("run_async")
        if isinstance(current, _GuardedRun):
            current.guardings.add(self)
        elif hasattr(tool, "_get_declaration"):
            tool.run_async = _GuardedRun(tool.name, tool.run_async, self)

    async def run_tool(self, run: _Run, name: str, run_async: Any, args: Any, ctx: Any) -> Any:
        call_id = ctx.function_call_id
        self.waiting.pop(call_id, None)
        run.seen.add(call_id)
        # A call the gate held and paused here, now resumed with the person's confirmation.
        resumed = call_id in run.held
        run.held.discard(call_id)
        confirmation = getattr(ctx, "tool_confirmation", None)
        if resumed and not getattr(confirmation, "confirmed", False):
            # Rejected at the confirmation: it never runs, whatever the store says.
            return _answer(await arefused(run.turn, name, args, call_id), None)
        call = _Call(run_async, ctx)
        token = _CALL.set(call)
        try:
            result = await run.turn.acall(name, args, call_id)
        finally:
            _CALL.reset(token)
        if held(result) and not resumed:
            # Held for a person: ADK's confirmation request pauses the invocation. Confirmed,
            # it comes back here and runs only on the stored approval of its arguments.
            ctx.request_confirmation(hint=result.content, payload=pause(result))
            run.held.add(call_id)
            self.wait(call_id, ctx.invocation_id)
        return _answer(result, call.rich)

    async def answered(self, tool: Any, tool_args: Any, tool_context: Any) -> None:
        """After a call: one that never reached the tool was answered by another check."""
        run = self.runs.get(tool_context.invocation_id)
        call_id = tool_context.function_call_id
        if run is None or call_id in run.seen:
            if run is not None:
                run.seen.discard(call_id)
            return
        self.waiting.pop(call_id, None)  # (a rejected confirmation comes back here)
        waiting = getattr(tool_context.actions, "requested_tool_confirmations", None) or {}
        if call_id in waiting:  # audited when it runs, in this run's turn
            self.wait(call_id, tool_context.invocation_id)
        else:
            await arefused(run.turn, tool.name, tool_args, call_id)

    def wait(self, call_id: str, invocation_id: str) -> None:
        if len(self.waiting) >= MAX_WAITING:
            # The oldest: its invocation, when it resumes, does so in a new turn.
            oldest = self.waiting.pop(next(iter(self.waiting)))
            if oldest not in self.waiting.values():
                self.runs.pop(oldest, None)
        self.waiting[call_id] = invocation_id

    async def unanswered(self, tool: Any, tool_args: Any, tool_context: Any) -> Any:
        """A call ADK could not run (an unknown or withheld tool): tool_call answers it."""
        run = self.run_of(tool_context)
        if tool_context.function_call_id in run.seen:
            return None  # the tool's own failure, already answered and audited
        result = await run.turn.acall(tool.name, tool_args, tool_context.function_call_id)
        return _answer(result, None)

    async def finish(self, invocation_context: Any) -> None:
        invocation = invocation_context.invocation_id
        if invocation in self.waiting.values():
            return  # paused for a confirmation: the invocation goes on when it comes
        run = self.runs.pop(invocation, None)
        if run is not None:
            report = await run.turn.apost_run(_final_text(invocation_context))
            if self.on_report is not None:
                self.on_report(report)


def _plugin(guarding: _Guarding, name: str) -> Any:
    from google.adk.plugins.base_plugin import BasePlugin

    class GuardrailsPlugin(BasePlugin):  # type: ignore[misc, unused-ignore]
        runs = guarding.runs  # the runs in progress, by invocation id

        async def before_run_callback(self, *, invocation_context: Any) -> Any:
            guarding.run_of(invocation_context)
            return None

        async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> Any:
            await guarding.request(callback_context, llm_request)
            return None

        async def before_tool_callback(
            self, *, tool: Any, tool_args: Any, tool_context: Any
        ) -> Any:
            guarding.guard(tool)
            return None

        async def after_tool_callback(
            self, *, tool: Any, tool_args: Any, tool_context: Any, result: Any
        ) -> Any:
            await guarding.answered(tool, tool_args, tool_context)
            return None

        async def on_tool_error_callback(
            self, *, tool: Any, tool_args: Any, tool_context: Any, error: Exception
        ) -> Any:
            return await guarding.unanswered(tool, tool_args, tool_context)

        async def after_run_callback(self, *, invocation_context: Any) -> None:
            await guarding.finish(invocation_context)

        async def on_run_error_callback(self, *, invocation_context: Any, error: Exception) -> None:
            # A run that failed is not checked: its turn is dropped.
            guarding.runs.pop(invocation_context.invocation_id, None)

    return GuardrailsPlugin(name=name)


class _Run:
    """One runner invocation: its turn, the user's text, and the tools pre_turn decided on."""

    def __init__(self, turn: Turn, text: str) -> None:
        self.turn = turn
        self.text = text
        self.decided: frozenset[str] = frozenset()
        self.seen: set[Any] = set()  # the call ids tool_call answered, until their after-callback
        self.held: set[Any] = set()  # the call ids paused for a confirmation of the gate's request

    async def decide(self, names: list[str]) -> None:
        # A sub-agent's request may bring tools not decided yet: decide on all of them again.
        wanted = frozenset(n for n in names if n in self.turn.engine.tools)
        if wanted <= self.decided:
            return
        self.decided |= wanted
        await self.turn.apre_turn(self.text, sorted(self.decided))


# The most calls kept waiting for a confirmation at once.
MAX_WAITING = 10_000


class _GuardedRun:
    """A tool's ``run_async`` with tool_call in front, for the runs of the plugins guarding it.

    The tool object may be shared by runners the plugin does not guard: their
    calls reach the tool's own ``run_async`` as before.
    """

    def __init__(self, name: str, run_async: Any, guarding: _Guarding) -> None:
        self.name = name
        self.run_async = run_async
        self.guardings: weakref.WeakSet[_Guarding] = weakref.WeakSet([guarding])

    async def __call__(self, *, args: Any, tool_context: Any) -> Any:
        for guarding in list(self.guardings):
            run = guarding.runs.get(tool_context.invocation_id)
            if run is not None:
                return await guarding.run_tool(run, self.name, self.run_async, args, tool_context)
        return await self.run_async(args=args, tool_context=tool_context)

    def __deepcopy__(self, memo: Any) -> _GuardedRun:
        # A method, as the one it stands for: a copied tool (an LlmRequest's deep
        # copy) shares it.
        return self


def _answer(result: ToolResult, rich: Rich | None) -> Any:
    """What ADK sends the model: ``{"error": ...}`` for refusals; for ``ok`` the tool's own value
    (a dict or list as it is, media parts as ADK sends them) when the model would read exactly
    its text (not cut, redacted or rewritten by a hook), else tool_call's text."""
    if not result.ok:
        return {"error": result.content}
    if rich is not None:
        return sent(result, rich)
    if isinstance(result.value, dict | list) and reads_as_value(result):
        return result.value
    return result.content


def _restrict(llm_request: Any, offered: frozenset[str] | None, rails: Guardrails) -> None:
    """Only offered tools in the request, each declared with the engine's schema (bound ones hidden)."""

    def keep(tool_name: Any) -> bool:
        return offered is None or tool_name in offered or tool_name not in rails.tools

    tools_dict = llm_request.tools_dict
    for tool_name in [n for n in tools_dict if not keep(n)]:
        del tools_dict[tool_name]
    for declared in getattr(llm_request.config, "tools", None) or ():
        declarations = getattr(declared, "function_declarations", None)
        if not declarations:
            continue
        kept = [d for d in declarations if keep(d.name)]
        for d in kept:
            engine_tool = rails.tools.get(d.name)
            if engine_tool is not None and engine_tool.bound:
                d.parameters = None
                d.parameters_json_schema = engine_tool.to_mcp()["inputSchema"]
        declared.function_declarations = kept


def _final_text(invocation: Any) -> str:
    texts = [
        _text(event.content)
        for event in getattr(invocation.session, "events", None) or ()
        if event.invocation_id == invocation.invocation_id
        and event.author != "user"
        and event.content is not None
    ]
    texts = [t for t in texts if t]
    return texts[-1] if texts else ""
