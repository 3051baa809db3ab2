"""pydantic-ai: a call the gate holds is deferred for approval; a person decides with the CLI.

The run ends with ``DeferredToolRequests`` (the call in ``approvals``, our
pause in its metadata); the application resumes it with
``DeferredToolResults``. pydantic-ai's "approved" is advisory: the call runs
only on the stored approval of its exact arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integrations import _approvals as ap
from tests.integrations import _frameworks as fw

fw.need("pydantic_ai")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from guardrails.integrations import pydantic_ai  # noqa: E402
from guardrails.integrations._approval import PAUSE_KEY  # noqa: E402

FINAL = "Done."


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model asks for the transfer once, then answers."""
    if any(isinstance(m, ModelResponse) for m in messages):
        return ModelResponse(parts=[TextPart(FINAL)])
    return ModelResponse(parts=[ToolCallPart("transfer", dict(ap.ARGS), tool_call_id="c1")])


def _paused(setup: ap.Setup) -> tuple[Agent[Any, Any], Any]:
    agent = Agent(
        FunctionModel(_script),
        tools=[setup.transfer()],
        capabilities=[pydantic_ai.capability(setup.rails())],
        output_type=[str, DeferredToolRequests],
    )
    with fw.default_loop_closed():  # run_sync leaves the thread's default loop open
        first = agent.run_sync("Pay bob 900.")
    assert isinstance(first.output, DeferredToolRequests)
    [asked] = first.output.approvals
    assert asked.tool_call_id == "c1"
    assert first.output.metadata["c1"][PAUSE_KEY]["message"] == ap.PENDING
    assert setup.ran == []
    return agent, first


def _resume(agent: Agent[Any, Any], first: Any, answer: Any) -> str:
    """The application answers the deferred call; what the model read of it."""
    results = DeferredToolResults(approvals={"c1": answer})
    with fw.default_loop_closed():
        second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    assert second.output == FINAL
    [part] = [
        p
        for m in second.new_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_call_id == "c1"
    ]
    return str(part.content)


def test_approved_with_the_cli_the_resumed_run_runs_it_once(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    agent, first = _paused(setup)
    setup.decide("approve")
    assert _resume(agent, first, True) == "sent 900 to bob"
    assert setup.ran == [ap.ARGS]
    assert [r.status for r in setup.requests(None)] == ["used"]
    setup.one_turn()


def test_denied_with_the_cli_it_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    agent, first = _paused(setup)
    setup.decide("deny")
    assert ap.DENIED in _resume(agent, first, True)
    assert setup.ran == []


def test_an_expired_approval_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    agent, first = _paused(setup)
    setup.decide("approve")
    setup.expire()
    assert ap.EXPIRED in _resume(agent, first, True)
    assert setup.ran == []


@pytest.mark.parametrize("answer", [True, ToolApproved()], ids=["true", "ToolApproved"])
def test_the_frameworks_approval_without_a_stored_one_does_not_run_it(
    tmp_path: Path, answer: Any
) -> None:
    setup = ap.setup(tmp_path)
    agent, first = _paused(setup)
    assert ap.PENDING in _resume(agent, first, answer)
    assert setup.ran == []
    assert setup.request().status == "pending"


def test_an_approval_with_edited_arguments_is_a_new_request(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    agent, first = _paused(setup)
    approved = setup.request()
    setup.decide("approve", approved.id)
    assert ap.PENDING in _resume(agent, first, ToolApproved(override_args=dict(ap.EDITED)))
    assert setup.ran == []
    [new] = setup.requests()
    assert new.id != approved.id and '"mallory"' in new.arguments
    assert [r.status for r in setup.requests("approved")] == ["approved"]
