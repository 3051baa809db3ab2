"""pydantic-ai (2.x): one capability guards the whole agent.

::

    agent = Agent(model, tools=[...], capabilities=[pydantic_ai.capability(rails)])
    # or, for an agent you already have: agent.run(..., capabilities=[...])

Every tool call goes through tool_call: the capability takes over validation
(``wrap_tool_validate`` keeps the raw arguments) and execution
(``wrap_tool_execute`` runs the pipeline, whose tool validates with
pydantic-ai's own validator and then runs the tool). A non-ok outcome is raised
as ``ToolFailed`` with the fixed sentence, so the model sees a failed tool
result and no retry budget is spent. What is offered goes through pre_turn
(``prepare_tools``, bound parameters hidden); a refused turn is answered
without calling the model; post_run runs in ``after_run``. One run is one turn.
A call the approval gate holds is deferred (``ApprovalRequired``); the resumed
run goes on in the same turn (docs/approvals.md).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from functools import cache
from types import SimpleNamespace
from typing import Any

from .._json_depth import deeper_than
from ..context import TurnContext
from ..engine import Guardrails, Turn
from ..middleware.admission import MAX_DEPTH
from ..middleware.post_run import PostRunReport
from ..tools import Tool
from ..verdicts import Outcome
from ._approval import held, pause
from ._common import Offer, Runs, aoffer, context_of
from ._framework_tools import (
    Clash,
    acall_native,
    arefused,
    check_options,
    native_tool,
    register,
    watch,
)
from ._media import pydantic_ai_text
from ._rich import Rich, sent

__all__ = ["capability"]


class _Call:
    """The framework's per-call object: the validation and execution handlers, and a rich
    result the tool returned (kept here while tool_call renders its stand-in)."""

    __slots__ = ("execute", "rich", "validate")

    def __init__(self, validate: Callable[[Any], Any], execute: Callable[[Any], Any]) -> None:
        self.validate = validate
        self.execute = execute
        self.rich: Rich | None = None


async def _invoke(call: _Call, arguments: dict[str, Any]) -> Any:
    # pydantic-ai's own validation (type conversion, custom validators) on what
    # tool_call admitted, bound values included; then the tool.
    value = await call.execute(await call.validate(arguments))
    text = pydantic_ai_text(value)
    if text is None:
        return value
    call.rich = Rich(text, value)
    return text


def _prompt_text(prompt: Any) -> str:
    """The text of the run's prompt: a string, or the strings of a multimodal prompt."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list | tuple):
        return "\n".join(p for p in prompt if isinstance(p, str))
    return ""


def _raw(args: Any) -> Any:
    """The model's arguments as sent: JSON text is parsed here, anything else kept
    (text nested too deep for admission too: it refuses it, unparsed)."""
    if isinstance(args, str | bytes) and not deeper_than(args, MAX_DEPTH + 1):
        try:
            return json.loads(args) if args.strip() else {}
        except ValueError:
            return args
    return args


def capability(
    rails: Guardrails,
    *,
    context: Callable[[Any], TurnContext] | None = None,
    tool_options: Mapping[str, Mapping[str, Any]] | None = None,
    on_report: Callable[[PostRunReport], Any] | None = None,
) -> Any:
    """A capability that guards every function tool of the agent it is given to.

    ``context(run_context)`` gives the turn's context (default: the run's
    ``deps`` read by ``context_of``, a ``Turn`` given as deps is used as is);
    ``tool_options`` maps a tool name to ``Tool`` options (``bind=``,
    ``effect=``, ``timeout=``, ``guards=``); ``on_report`` receives each run's
    post_run report.
    """
    watch(rails)  # a deferred call a person denies is audited through it
    shared = _Shared(rails, context, dict(tool_options or {}), on_report)
    return _capability_class()(shared, None)


class _Shared:
    """What every run's copy of one capability shares."""

    def __init__(
        self,
        rails: Guardrails,
        context: Callable[[Any], TurnContext] | None,
        tool_options: dict[str, Mapping[str, Any]],
        on_report: Callable[[PostRunReport], Any] | None,
    ) -> None:
        self.rails = rails
        self.context = context
        self.tool_options = tool_options
        self.on_report = on_report
        # Tool definitions are rebuilt at each step: within one capability (and
        # its copy for each run) a tool is known by its name.
        self.sources: dict[str, object] = {}
        # The turn of a run that ended with deferred calls, by each of that run's
        # requests in the message history the application keeps (held weakly). Not by
        # the response that asked: a streamed run hands back a copy of it.
        self.paused = Runs()


class _Capability:
    """The capability's logic; ``_capability_class`` adds pydantic-ai's base."""

    def __init__(
        self,
        shared: _Shared,
        turn: Turn | None,
        offer: Offer | None = None,
        deferred: dict[str, Any] | None = None,
    ) -> None:
        self.shared = shared
        self.rails = shared.rails
        self.turn = turn
        self.offer = offer
        self.raw: dict[str, Any] = {}
        # A resumed run: the calls the paused run deferred, by call id (a denied one is audited).
        self.deferred = deferred or {}

    # -- the run: one turn, in a capability of its own --------------------

    async def for_run(self, ctx: Any) -> Any:
        shared = self.shared
        deps = ctx.deps
        asked = _last_response(ctx.messages)
        resumed = _resumed(shared.paused, ctx.messages, asked)
        if isinstance(deps, Turn):
            turn = deps
        elif resumed is not None:
            # Deferred calls being resumed: the run goes on in the turn that asked for them,
            # with what it was offered (pre_turn is not run again).
            turn = resumed
        elif shared.context is not None:
            turn = self.rails.turn(shared.context(ctx))
        else:
            turn = self.rails.turn(context_of(deps))
        offer, deferred = None, None
        if resumed is turn:
            deferred = {
                p.tool_call_id: p for p in asked.parts if isinstance(p, _sdk().ToolCallPart)
            }
            if turn.offered is not None:
                offer = Offer([t for n, t in self.rails.tools.items() if n in turn.offered])
        return type(self)(shared, turn, offer, deferred)

    def _turn(self) -> Turn:
        if self.turn is None:  # hooks called outside a run
            self.turn = self.rails.turn()
        return self.turn

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        output = result.output
        if isinstance(output, _sdk().DeferredToolRequests):
            # The run pauses, the turn does not end: post_run waits for its resumption.
            messages = result.all_messages()
            for request in _requests_of(messages, _last_response(messages)):
                self.shared.paused.get(request, self._turn)
            return result
        text = output if isinstance(output, str) else None
        structured = None if text is not None else output
        report = await self._turn().apost_run(text, structured=structured)
        if self.shared.on_report is not None:
            self.shared.on_report(report)
        return result

    # -- what is offered --------------------------------------------------

    def _register(self, tool_def: Any) -> Tool:
        name = tool_def.name
        build = functools.partial(
            native_tool,
            name,
            tool_def.parameters_json_schema,
            _invoke,
            is_async=True,
            description=tool_def.description or "",
        )
        source = self.shared.sources.setdefault(name, object())
        options = self.shared.tool_options.get(name)
        return register(self.rails, name, build, options, source=source, clash=Clash.REFUSE)

    async def prepare_tools(self, ctx: Any, tool_defs: list[Any]) -> list[Any]:
        # Every tool stays known to pydantic-ai, so that a call to a withheld
        # one reaches tool_call (``unavailable``); the model is offered only
        # what pre_turn allows (``wrap_model_request``).
        tools = {d.name: self._register(d) for d in tool_defs}
        if self.offer is None:
            check_options(tools, self.shared.tool_options)
            self.offer = await aoffer(self._turn(), _prompt_text(ctx.prompt), tools)
        return [
            dataclasses.replace(d, parameters_json_schema=tools[d.name].schema) for d in tool_defs
        ]

    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
        offer = self.offer
        if offer is not None:
            if offer.refusal is not None:
                sdk = _sdk()
                return sdk.ModelResponse(parts=[sdk.TextPart(offer.refusal)])
            offered = {t.name for t in offer.tools}
            params = request_context.model_request_parameters
            request_context.model_request_parameters = dataclasses.replace(
                params,
                function_tools=[t for t in params.function_tools if t.name in offered],
            )
        if self.deferred:
            await self._audit_denials(request_context.messages)
        response = await handler(request_context)
        _route_unknown_calls(ctx, response)
        return response

    async def _audit_denials(self, messages: Any) -> None:
        """Deferred calls a person denied never run: each is audited as refused, once."""
        sdk, deferred = _sdk(), self.deferred
        self.deferred = {}
        denied = [
            (part, deferred[part.tool_call_id])
            for message in messages
            for part in getattr(message, "parts", ())
            if isinstance(part, sdk.ToolReturnPart)
            and part.outcome == "denied"
            and part.tool_call_id in deferred
        ]
        for part, call in denied:
            await arefused(self._turn(), call.tool_name, _raw(call.args), part.tool_call_id)

    # -- every tool call --------------------------------------------------

    async def wrap_tool_validate(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        # Validation happens in tool_call (and pydantic-ai's validator runs
        # inside it, after bound values are added): keep the raw arguments. They
        # are also what pydantic-ai shows of a deferred call (``validated_args``).
        raw = _raw(args)
        self.raw[call.tool_call_id] = (raw, handler)
        return dict(raw) if isinstance(raw, dict) else {}

    async def wrap_tool_execute(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        raw, validate = self.raw.pop(call.tool_call_id, (args, None))
        native = _Call(validate or _validated(args), handler)
        result = await acall_native(self._turn(), native, call.tool_name, raw, call.tool_call_id)
        sdk = _sdk()
        if isinstance(result.exception, sdk.CONTROL_FLOW):
            # Deferral, approval and skips are pydantic-ai's control flow, not failures:
            # they go on to the framework (the call is audited as an error meanwhile).
            raise result.exception
        if held(result) and not ctx.tool_call_approved:
            # Held for a person: deferred the pydantic-ai way (DeferredToolRequests.approvals).
            # Approved and resumed, it comes back here, and runs only on the stored approval.
            raise sdk.ApprovalRequired(pause(result))
        if result.outcome is not Outcome.OK:
            raise sdk.ToolFailed(result.content)
        return sent(result, native.rich)


def _last_response(messages: Any) -> Any:
    """The last model response of a run's messages (the one whose calls were deferred)."""
    sdk = _sdk()
    for message in reversed(messages or ()):
        if isinstance(message, sdk.ModelResponse):
            return message
    return None


def _requests_of(messages: Any, asked: Any) -> list[Any]:
    """The requests of the run that made the response ``asked`` (by its ``run_id``)."""
    run_id = getattr(asked, "run_id", None)
    if run_id is None:
        return []
    sdk = _sdk()
    return [m for m in messages if isinstance(m, sdk.ModelRequest) and m.run_id == run_id]


def _resumed(paused: Runs, messages: Any, asked: Any) -> Turn | None:
    """The turn paused at the response ``asked``, taken back; None when there is none."""
    found = [paused.pop(request) for request in _requests_of(messages, asked)]
    return next((turn for turn in found if isinstance(turn, Turn)), None)


def _route_unknown_calls(ctx: Any, response: Any) -> None:
    """Calls of tools pydantic-ai does not have are routed to tool_call (``unavailable``).

    pydantic-ai would answer them itself, before any hook, with a retry prompt
    naming its tools and spending the retry budget (a second one ends the run).
    For this step only, each such name is given a tool of no schema whose calls
    the capability answers; the model is never offered it.
    """
    manager = getattr(ctx, "tool_manager", None)
    tools = getattr(manager, "tools", None)
    if not isinstance(tools, dict):
        return
    sdk = _sdk()
    for part in getattr(response, "parts", ()):
        name = getattr(part, "tool_name", None)
        if isinstance(part, sdk.ToolCallPart) and isinstance(name, str) and name not in tools:
            tools[name] = sdk.ToolsetTool(
                toolset=sdk.NO_TOOLS,
                tool_def=sdk.ToolDefinition(name=name),
                max_retries=0,
                args_validator=sdk.ANY_ARGUMENTS,
            )


@cache
def _capability_class() -> type:
    from pydantic_ai.capabilities import AbstractCapability

    return type("GuardrailsCapability", (_Capability, AbstractCapability), {})


@cache
def _sdk() -> SimpleNamespace:
    """The pydantic-ai names the capability uses, imported on first use."""
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, SkipToolExecution, ToolFailed
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_ai.toolsets.function import FunctionToolset
    from pydantic_core import SchemaValidator, core_schema

    return SimpleNamespace(
        ANY_ARGUMENTS=SchemaValidator(core_schema.any_schema()),
        ApprovalRequired=ApprovalRequired,
        CONTROL_FLOW=(ApprovalRequired, CallDeferred, SkipToolExecution),
        DeferredToolRequests=DeferredToolRequests,
        ModelRequest=ModelRequest,
        ModelResponse=ModelResponse,
        NO_TOOLS=FunctionToolset(),
        TextPart=TextPart,
        ToolCallPart=ToolCallPart,
        ToolDefinition=ToolDefinition,
        ToolFailed=ToolFailed,
        ToolReturnPart=ToolReturnPart,
        ToolsetTool=ToolsetTool,
    )


def _validated(args: Any) -> Callable[[Any], Any]:
    async def same(arguments: Any) -> Any:
        return arguments

    return same
