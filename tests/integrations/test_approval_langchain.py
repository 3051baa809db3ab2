"""LangChain / LangGraph: a call the gate holds pauses the graph with ``interrupt``.

The interrupt's value carries our pause (``guardrails_approval``); a person
decides with the CLI; the application resumes the thread with
``Command(resume="approve")`` (or ``{"type": "approve"}``; anything else
rejects). The graph's "approve" is advisory: the call runs only on the stored
approval of its exact arguments. Driven with ``invoke`` and ``ainvoke``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.integrations import _approvals as ap
from tests.integrations import _frameworks as fw

fw.need("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from guardrails.integrations import langchain  # noqa: E402
from guardrails.integrations._approval import PAUSE_KEY  # noqa: E402
from guardrails.verdicts import Outcome, model_sentence  # noqa: E402

FINAL = "Done."
CONFIG = {"configurable": {"thread_id": "t-1"}}
ASK = {"messages": [{"role": "user", "content": "Pay bob 900."}]}


class Graph:
    """A guarded agent on a checkpointer, driven sync or async."""

    def __init__(self, setup: ap.Setup, asynchronous: bool) -> None:
        call = {"name": "transfer", "args": dict(ap.ARGS), "id": "c1"}
        self.chat = langchain.scripted_model(
            AIMessage(content="", tool_calls=[call]), AIMessage(content=FINAL)
        )
        self.agent = create_agent(
            self.chat,
            [StructuredTool.from_function(setup.transfer())],
            middleware=[langchain.middleware(setup.rails())],
            checkpointer=InMemorySaver(),
        )
        self.asynchronous = asynchronous

    def run(self, given: Any) -> Any:
        if self.asynchronous:
            return asyncio.run(self.agent.ainvoke(given, CONFIG))
        return self.agent.invoke(given, CONFIG)

    def paused(self) -> None:
        out = self.run(ASK)
        [pending] = out["__interrupt__"]
        assert pending.value[PAUSE_KEY]["message"] == ap.PENDING

    def resume(self, answer: Any) -> str:
        """Resume the thread; what the model read of the call."""
        out = self.run(Command(resume=answer))
        assert "__interrupt__" not in out
        assert out["messages"][-1].content == FINAL
        [message] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
        return str(message.content)


@pytest.fixture(params=["invoke", "ainvoke"])
def asynchronous(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "ainvoke")


def test_approved_with_the_cli_the_resumed_graph_runs_it_once(
    tmp_path: Path, asynchronous: bool
) -> None:
    setup = ap.setup(tmp_path)
    graph = Graph(setup, asynchronous)
    graph.paused()
    assert setup.ran == []
    setup.decide("approve")
    assert graph.resume("approve") == "sent 900 to bob"
    assert setup.ran == [ap.ARGS]
    assert [r.status for r in setup.requests(None)] == ["used"]
    setup.one_turn()


def test_denied_with_the_cli_it_never_runs(tmp_path: Path, asynchronous: bool) -> None:
    setup = ap.setup(tmp_path)
    graph = Graph(setup, asynchronous)
    graph.paused()
    setup.decide("deny")
    assert graph.resume({"type": "approve"}) == ap.DENIED
    assert setup.ran == []


def test_an_expired_approval_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    graph = Graph(setup, False)
    graph.paused()
    setup.decide("approve")
    setup.expire()
    assert graph.resume("approve") == ap.EXPIRED
    assert setup.ran == []


def test_the_graphs_approval_without_a_stored_one_does_not_run_it(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    graph = Graph(setup, False)
    graph.paused()
    assert graph.resume("approve") == ap.PENDING
    assert setup.ran == []
    assert setup.request().status == "pending"


def test_the_applications_rejection_wins_over_a_stored_approval(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    graph = Graph(setup, False)
    graph.paused()
    setup.decide("approve")
    assert graph.resume({"type": "reject"}) == model_sentence(Outcome.UNAVAILABLE)
    assert setup.ran == []
    assert [r.status for r in setup.requests(None)] == ["approved"]  # not used


def test_two_held_calls_of_one_step_are_two_interrupts_answered_by_id(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    calls = [
        {"name": "transfer", "args": dict(ap.ARGS), "id": "c1"},
        {"name": "transfer", "args": dict(ap.EDITED), "id": "c2"},
    ]
    chat = langchain.scripted_model(
        AIMessage(content="", tool_calls=calls), AIMessage(content=FINAL)
    )
    agent = create_agent(
        chat,
        [StructuredTool.from_function(setup.transfer())],
        middleware=[langchain.middleware(setup.rails())],
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke(ASK, CONFIG)
    paused = {i.value[PAUSE_KEY]["call_id"]: i.id for i in out["__interrupt__"]}
    assert sorted(paused) == ["c1", "c2"]
    for request in setup.requests():
        setup.decide("approve", request.id)
    answers = {paused["c1"]: "approve", paused["c2"]: {"type": "reject"}}
    out = agent.invoke(Command(resume=answers), CONFIG)
    read = {m.tool_call_id: m.content for m in out["messages"] if isinstance(m, ToolMessage)}
    assert read == {"c1": "sent 900 to bob", "c2": model_sentence(Outcome.UNAVAILABLE)}
    assert setup.ran == [ap.ARGS]
