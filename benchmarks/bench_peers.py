"""Per-call cost against peer libraries: same tool, same two rules, one process.

The tool and rules are in ``_transfer.py``. Three groups, one per kind of
arguments (valid; failing the schema; passing the schema but failing a rule),
each timed in interleaved rounds with a bare call of the same function as the
floor. ``x_ours`` is a case's median over this library's pipeline median in
the same group.

How each peer is driven, offline and without a model:

- pydantic ``validate_call``: the rules checked in the function body, after
  validation (``_transfer.transfer_with_rules``).
- OpenAI Agents SDK: ``function_tool(transfer, tool_input_guardrails=[rules])``;
  per call a ``ToolContext``, the input guardrail's ``run`` and
  ``on_invoke_tool`` (the steps the SDK's runner takes for one function tool,
  without the model round trip and the run loop around them). The SDK runs a
  sync tool function in a worker thread (``asyncio.to_thread``), so it is
  measured with the sync function and again with an ``async def`` one.
- LangChain ``StructuredTool.invoke``: the rules checked in the function body
  (the tool itself has no place for them).
- LangGraph ``ToolNode`` with ``wrap_tool_call`` holding the rules, invoked
  directly with a tool-call list (no graph around it).
- chokepoint ``ChokepointInterceptor.call`` with a ``PolicySet`` of the two
  rules, calling the ``validate_call`` version of the function (chokepoint has
  no schema step of its own).

The peers come with the ``bench`` extra; a peer that is not installed gets a
row with no figure and the reason.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal

from _harness import Row, compare
from _transfer import (
    INVALID,
    OVER_LIMIT,
    VALID,
    account_open,
    transfer,
    transfer_with_rules,
    within_limit,
)
from bench_pipeline import build
from pydantic import Field

from guardrails.testing import MemoryRecorder

OURS = "guardrails tool_call (MemoryRecorder)"
ARGUMENTS = {
    "peers: valid call": VALID,
    "peers: invalid arguments (schema)": INVALID,
    "peers: rule rejects": OVER_LIMIT,
}


def _quiet(fn: Callable[[], Any]) -> Callable[[], Any]:
    """The call, with the peer's exception for a refused call caught (it is the refusal)."""

    def call() -> Any:
        try:
            return fn()
        except Exception as exc:  # every peer signals refusal differently
            return exc

    return call


def _pydantic() -> Callable[[dict[str, Any]], Callable[[], Any]]:
    from pydantic import validate_call

    validated = validate_call(transfer_with_rules)
    return lambda args: _quiet(lambda: validated(**args))


def _openai_agents(
    body: Callable[..., Any] = transfer,
) -> Callable[[dict[str, Any]], Callable[[], Any]]:
    from agents import (
        Agent,
        ToolGuardrailFunctionOutput,
        function_tool,
        set_tracing_disabled,
        tool_input_guardrail,
    )
    from agents.tool_context import ToolContext
    from agents.tool_guardrails import ToolInputGuardrailData

    set_tracing_disabled(True)
    logging.getLogger("openai.agents").setLevel(logging.CRITICAL)

    @tool_input_guardrail
    def transfer_rules(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        arguments = json.loads(data.context.tool_arguments)
        if not within_limit(arguments):
            return ToolGuardrailFunctionOutput.reject_content("over daily limit")
        if not account_open(arguments):
            return ToolGuardrailFunctionOutput.reject_content("account frozen")
        return ToolGuardrailFunctionOutput.allow()

    sdk_tool = function_tool(body, name_override="transfer", tool_input_guardrails=[transfer_rules])
    agent = Agent(name="bench", tools=[sdk_tool])
    guardrails = sdk_tool.tool_input_guardrails or []

    def case(args: dict[str, Any]) -> Callable[[], Any]:
        text = json.dumps(args)  # the model's arguments arrive as JSON text

        async def invoke() -> Any:
            ctx = ToolContext(None, tool_name="transfer", tool_call_id="c1", tool_arguments=text)
            for guardrail in guardrails:
                out = await guardrail.run(ToolInputGuardrailData(context=ctx, agent=agent))
                if out.behavior["type"] != "allow":
                    return out.behavior
            return await sdk_tool.on_invoke_tool(ctx, text)

        return invoke

    return case


def _langchain_tool() -> Callable[[dict[str, Any]], Callable[[], Any]]:
    from langchain_core.tools import StructuredTool

    lc_tool = StructuredTool.from_function(transfer_with_rules, name="transfer")
    return lambda args: _quiet(lambda: lc_tool.invoke(dict(args)))


def _langgraph_tool_node() -> Callable[[dict[str, Any]], Callable[[], Any]]:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph.prebuilt import ToolNode
    from langgraph.runtime import Runtime

    def transfer_rules(request: Any, handler: Callable[[Any], Any]) -> Any:
        arguments = request.tool_call["args"]
        if not (within_limit(arguments) and account_open(arguments)):
            return ToolMessage(
                content="rejected", tool_call_id=request.tool_call["id"], status="error"
            )
        return handler(request)

    node = ToolNode([StructuredTool.from_function(transfer)], wrap_tool_call=transfer_rules)
    # Outside a graph, ToolNode needs the runtime a graph would hand it.
    config: Any = {"configurable": {"__pregel_runtime": Runtime()}}

    def case(args: dict[str, Any]) -> Callable[[], Any]:
        return _quiet(
            lambda: node.invoke(
                [{"name": "transfer", "args": dict(args), "id": "c1", "type": "tool_call"}], config
            )
        )

    return case


def _chokepoint() -> Callable[[dict[str, Any]], Callable[[], Any]]:
    from chokepoint import BLOCK, ActionLedger, ChokepointInterceptor, PolicySet
    from pydantic import validate_call

    rules = PolicySet("transfer_rules")
    rules.require(lambda ctx: within_limit(ctx.args), on_fail=BLOCK, reason="over daily limit")
    rules.require(lambda ctx: account_open(ctx.args), on_fail=BLOCK, reason="account frozen")
    interceptor = ChokepointInterceptor([rules], ledger=ActionLedger())
    validated = validate_call(transfer)
    return lambda args: _quiet(lambda: interceptor.call("transfer", validated, args=dict(args)))


async def _async_transfer(
    account_id: str,
    amount: Annotated[float, Field(ge=0.01, description="Amount to move")],
    currency: Literal["USD", "EUR", "GBP"],
    memo: str = "",
) -> dict[str, Any]:
    """Move money out of an account."""
    return transfer(account_id, amount, currency, memo)


PEERS: dict[str, Callable[[], Callable[[dict[str, Any]], Callable[[], Any]]]] = {
    "pydantic validate_call + rules": _pydantic,
    "OpenAI Agents SDK FunctionTool + input guardrail": _openai_agents,
    "OpenAI Agents SDK, async def tool": lambda: _openai_agents(_async_transfer),
    "LangChain StructuredTool.invoke + rules": _langchain_tool,
    "LangGraph ToolNode + wrap_tool_call": _langgraph_tool_node,
    "chokepoint ChokepointInterceptor.call, 2 rules": _chokepoint,
}


def _check_peers(group: str, cases: dict[str, Callable[[], Any]]) -> None:
    # A benchmark of the wrong path is worse than none: each peer must run the
    # transfer on valid arguments and refuse it otherwise.
    import asyncio
    import inspect

    should_run = group == "peers: valid call"
    for label, case in cases.items():
        if label in ("bare call", OURS):
            continue
        result = asyncio.run(case()) if inspect.iscoroutinefunction(case) else case()
        if ("'sent'" in str(result) or '"sent"' in str(result)) is not should_run:
            raise AssertionError(f"{label} in {group!r}: unexpected result {result!r:.300}")


def run(quick: bool = False) -> list[Row]:
    makers: dict[str, Callable[[dict[str, Any]], Callable[[], Any]]] = {}
    missing: dict[str, str] = {}
    for label, setup in PEERS.items():
        try:
            makers[label] = setup()
        except ImportError as exc:
            missing[label] = f"not installed: {exc.name or exc}"
    memory = MemoryRecorder()
    turn = build(memory).turn(tenant="acme")

    def clear() -> None:
        memory.clear()
        turn.results.clear()

    rows: list[Row] = []
    for group, arguments in ARGUMENTS.items():
        args = dict(arguments)
        cases: dict[str, Callable[[], Any]] = {
            "bare call": lambda: transfer(**args),
            OURS: lambda: turn.call("transfer", args),
        }
        cases.update({label: make(args) for label, make in makers.items()})
        _check_peers(group, cases)
        group_rows = compare(group, cases, floor="bare call", quick=quick, between_rounds=clear)
        ours = next(r["median_us"] for r in group_rows if r["name"] == OURS)
        for r in group_rows:
            r["x_ours"] = round(r["median_us"] / ours, 2)
        rows += group_rows
        rows += [
            {"group": group, "name": label, "median_us": None, "note": why}
            for label, why in missing.items()
        ]
    return rows


if __name__ == "__main__":
    from run import print_rows

    print_rows(run(quick="--quick" in sys.argv))
