"""What each framework adapter adds to a run of the framework's own agent.

For each framework, one agent run (an offline model that asks for the tool
calls, then answers in text) is timed unguarded and guarded, in interleaved
rounds; the floor is the unguarded run, so ``added_us`` is what the adapter
costs per run: pre_turn once, the tool calls through tool_call, post_run once.
Two groups per framework: one tool call per run, and four in one model step.

The tool is ``_transfer.transfer`` with valid arguments. The models are
stateless (they answer from the last message), so one agent serves every run:

- OpenAI Agents SDK: a ``Model`` subclass; ``Runner.run`` (async);
  ``openai_agents.guard_agent(agent, rails)`` and ``run_config()``.
- LangChain v1: a ``BaseChatModel`` subclass; ``create_agent(...).invoke``
  (sync: its tool calls run in threads); ``langchain.middleware(rails)``.
- pydantic-ai: ``FunctionModel``; ``agent.run`` (async);
  ``pydantic_ai.capability(rails)``.

A framework that is not installed gets a row with no figure and the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from _harness import Row, compare, row
from _transfer import VALID, transfer

from guardrails import Guardrails

CALLS = (1, 4)
UNGUARDED = "unguarded run"
GUARDED = "guarded run"


def _rails() -> Guardrails:
    return Guardrails()


# -- OpenAI Agents SDK ------------------------------------------------------------------


def _openai_agents(calls: int) -> dict[str, Callable[[], Any]]:
    from agents import (
        Agent,
        ModelResponse,
        RunConfig,
        Runner,
        Usage,
        function_tool,
        set_tracing_disabled,
    )
    from agents.models.interface import Model
    from agents.testing import assistant_message, function_call

    from guardrails.integrations import openai_agents

    set_tracing_disabled(True)
    logging.getLogger("openai.agents").setLevel(logging.CRITICAL)

    class Stateless(Model):  # type: ignore[misc]
        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kw: Any
        ) -> Any:
            answered = isinstance(input, list) and any(
                isinstance(i, dict) and i.get("type") == "function_call_output" for i in input
            )
            if answered:
                output = [assistant_message("done")]
            else:
                output = [function_call("transfer", VALID, call_id=f"c{i}") for i in range(calls)]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kw: Any) -> Any:
            raise NotImplementedError

    agent = Agent(name="bench", tools=[function_tool(transfer)], model=Stateless())
    guarded = openai_agents.guard_agent(agent, _rails())
    plain_config = RunConfig()
    guarded_config = openai_agents.run_config()

    async def unguarded() -> Any:
        return await Runner.run(agent, "move money", run_config=plain_config)

    async def guarded_run() -> Any:
        return await Runner.run(guarded, "move money", run_config=guarded_config)

    return {UNGUARDED: unguarded, GUARDED: guarded_run}


# -- LangChain v1 -----------------------------------------------------------------------


def _langchain(calls: int) -> dict[str, Callable[[], Any]]:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from guardrails.integrations import langchain

    class Stateless(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "stateless"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatResult:
            if isinstance(messages[-1], ToolMessage):
                message = AIMessage("done")
            else:
                message = AIMessage(
                    "",
                    tool_calls=[
                        {"name": "transfer", "args": dict(VALID), "id": f"c{i}"}
                        for i in range(calls)
                    ],
                )
            return ChatResult(generations=[ChatGeneration(message=message)])

    plain = create_agent(Stateless(), [transfer])
    guarded = create_agent(Stateless(), [transfer], middleware=[langchain.middleware(_rails())])
    inputs = {"messages": [{"role": "user", "content": "move money"}]}
    return {UNGUARDED: lambda: plain.invoke(inputs), GUARDED: lambda: guarded.invoke(inputs)}


# -- pydantic-ai ------------------------------------------------------------------------


def _pydantic_ai(calls: int) -> dict[str, Callable[[], Any]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from guardrails.integrations import pydantic_ai

    def stateless(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("transfer", dict(VALID), tool_call_id=f"c{i}")
                    for i in range(calls)
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    plain = Agent(FunctionModel(stateless), tools=[transfer])
    guarded = Agent(
        FunctionModel(stateless), tools=[transfer], capabilities=[pydantic_ai.capability(_rails())]
    )

    async def unguarded() -> Any:
        return await plain.run("move money")

    async def guarded_run() -> Any:
        return await guarded.run("move money")

    return {UNGUARDED: unguarded, GUARDED: guarded_run}


FRAMEWORKS: dict[str, Callable[[int], dict[str, Callable[[], Any]]]] = {
    "OpenAI Agents SDK": _openai_agents,
    "LangChain v1": _langchain,
    "pydantic-ai": _pydantic_ai,
}


def run(quick: bool = False) -> list[Row]:
    rows: list[Row] = []
    for framework, build in FRAMEWORKS.items():
        for calls in CALLS:
            group = f"frameworks: {framework}, {calls} tool call{'s' if calls > 1 else ''} per run"
            try:
                cases = build(calls)
            except ImportError as exc:
                rows.append(row(group, "not installed", 0.0, note=str(exc)))
                continue
            rows.extend(compare(group, cases, floor=UNGUARDED, quick=quick))
    return rows


if __name__ == "__main__":
    for r in run(quick=True):
        print(r)
