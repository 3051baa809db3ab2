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
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from functools import cache
from types import SimpleNamespace
from typing import Any

from ..context import TurnContext
from ..engine import Guardrails, Turn
from ..middleware.post_run import PostRunReport
from ..tools import Tool
from ..verdicts import Outcome
from ._common import Offer, aoffer, context_of
from ._framework_tools import Clash, acall_native, check_options, native_tool, register

__all__ = ["capability"]


class _Call:
    """The framework's per-call object: the validation and execution handlers."""

    __slots__ = ("execute", "validate")

    def __init__(self, validate: Callable[[Any], Any], execute: Callable[[Any], Any]) -> None:
        self.validate = validate
        self.execute = execute


async def _invoke(call: _Call, arguments: dict[str, Any]) -> Any:
    # pydantic-ai's own validation (type conversion, custom validators) on what
    # tool_call admitted, bound values included; then the tool.
    return await call.execute(await call.validate(arguments))


def _prompt_text(prompt: Any) -> str:
    """The text of the run's prompt: a string, or the strings of a multimodal prompt."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list | tuple):
        return "\n".join(p for p in prompt if isinstance(p, str))
    return ""


def _raw(args: Any) -> Any:
    """The model's arguments as sent: JSON text is parsed here, anything else kept."""
    if isinstance(args, str | bytes):
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
    return _capability_class()(rails, context, dict(tool_options or {}), on_report, {}, None)


class _Capability:
    """The capability's logic; ``_capability_class`` adds pydantic-ai's base."""

    def __init__(
        self,
        rails: Guardrails,
        context: Callable[[Any], TurnContext] | None,
        tool_options: dict[str, Mapping[str, Any]],
        on_report: Callable[[PostRunReport], Any] | None,
        sources: dict[str, object],
        turn: Turn | None,
    ) -> None:
        self.rails = rails
        # Tool definitions are rebuilt at each step: within one capability (and
        # its copy for each run) a tool is known by its name.
        self.sources = sources
        self.context = context
        self.tool_options = tool_options
        self.on_report = on_report
        self.turn = turn
        self.offer: Offer | None = None
        self.raw: dict[str, Any] = {}

    # -- the run: one turn, in a capability of its own --------------------

    async def for_run(self, ctx: Any) -> Any:
        deps = ctx.deps
        if isinstance(deps, Turn):
            turn = deps
        elif self.context is not None:
            turn = self.rails.turn(self.context(ctx))
        else:
            turn = self.rails.turn(context_of(deps))
        return type(self)(
            self.rails, self.context, self.tool_options, self.on_report, self.sources, turn
        )

    def _turn(self) -> Turn:
        if self.turn is None:  # hooks called outside a run
            self.turn = self.rails.turn()
        return self.turn

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        output = result.output
        text = output if isinstance(output, str) else None
        structured = None if text is not None else output
        report = await self._turn().apost_run(text, structured=structured)
        if self.on_report is not None:
            self.on_report(report)
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
        source = self.sources.setdefault(name, object())
        options = self.tool_options.get(name)
        return register(self.rails, name, build, options, source=source, clash=Clash.REFUSE)

    async def prepare_tools(self, ctx: Any, tool_defs: list[Any]) -> list[Any]:
        # Every tool stays known to pydantic-ai, so that a call to a withheld
        # one reaches tool_call (``unavailable``); the model is offered only
        # what pre_turn allows (``wrap_model_request``).
        tools = {d.name: self._register(d) for d in tool_defs}
        if self.offer is None:
            check_options(tools, self.tool_options)
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
        return await handler(request_context)

    # -- every tool call --------------------------------------------------

    async def wrap_tool_validate(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        # Validation happens in tool_call (and pydantic-ai's validator runs
        # inside it, after bound values are added): keep the raw arguments.
        self.raw[call.tool_call_id] = (_raw(args), handler)
        return {}

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
        if result.outcome is not Outcome.OK:
            raise sdk.ToolFailed(result.content)
        return result.content


@cache
def _capability_class() -> type:
    from pydantic_ai.capabilities import AbstractCapability

    return type("GuardrailsCapability", (_Capability, AbstractCapability), {})


@cache
def _sdk() -> SimpleNamespace:
    """The pydantic-ai names the capability uses, imported on first use."""
    from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, SkipToolExecution, ToolFailed
    from pydantic_ai.messages import ModelResponse, TextPart

    return SimpleNamespace(
        CONTROL_FLOW=(ApprovalRequired, CallDeferred, SkipToolExecution),
        ModelResponse=ModelResponse,
        TextPart=TextPart,
        ToolFailed=ToolFailed,
    )


def _validated(args: Any) -> Callable[[Any], Any]:
    async def same(arguments: Any) -> Any:
        return arguments

    return same
