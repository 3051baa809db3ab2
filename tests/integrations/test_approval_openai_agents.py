"""OpenAI Agents SDK: a call the gate holds is an interruption of the run.

The SDK asks the tool's ``needs_approval`` before it runs a call; the guarded
tool asks the gate then, and a held call stops the run with an interruption
(its request stored). A person decides with the CLI; the application resumes
from the run's state (``state.approve(item)``, then ``Runner.run(agent,
state)``). The SDK's approval is advisory: the call runs only on the stored
approval of its exact arguments; ``state.reject`` stops it whatever the store
says.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.integrations import _approvals as ap
from tests.integrations import _frameworks as fw

fw.need("agents")

from agents import Agent, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from guardrails.integrations import openai_agents  # noqa: E402

set_tracing_disabled(True)
FINAL = "Done."


class Run:
    """A guarded agent over a scripted model that asks for the transfer, then answers."""

    def __init__(self, setup: ap.Setup, calls: int = 1) -> None:
        turns: list[Any] = [
            [function_call("transfer", dict(ap.ARGS), call_id=f"c{i}")] for i in range(calls)
        ]
        self.model = ScriptedModel([*turns, [assistant_message(FINAL)]])
        agent = Agent(name="bank", model=self.model, tools=[function_tool(setup.transfer())])
        self.agent = openai_agents.guard_agent(agent, setup.rails())
        self.config = openai_agents.run_config()

    def run(self, given: Any) -> Any:
        return asyncio.run(Runner.run(self.agent, given, run_config=self.config))

    def paused(self) -> Any:
        result = self.run("Pay bob 900.")
        [item] = result.interruptions
        assert item.tool_name == "transfer"
        return result

    def resume(self, result: Any, approve: bool) -> str:
        """Approve (or reject) the interruption and resume; what the model read of the call."""
        state = result.to_state()
        [item] = result.interruptions
        if approve:
            state.approve(item)
        else:
            state.reject(item)
        done = self.run(state)
        assert done.final_output == FINAL and not done.interruptions
        [output] = [
            i["output"]
            for i in self.model.calls[-1].input
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        return str(output)


def test_approved_with_the_cli_the_resumed_run_runs_it_once(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    paused = run.paused()
    assert setup.ran == []
    setup.decide("approve")
    assert run.resume(paused, True) == "sent 900 to bob"
    assert setup.ran == [ap.ARGS]
    assert [r.status for r in setup.requests(None)] == ["used"]
    setup.one_turn()


def test_denied_with_the_cli_it_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    paused = run.paused()
    setup.decide("deny")
    assert run.resume(paused, True) == ap.DENIED
    assert setup.ran == []


def test_an_expired_approval_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    paused = run.paused()
    setup.decide("approve")
    setup.expire()
    assert run.resume(paused, True) == ap.EXPIRED
    assert setup.ran == []


def test_the_sdks_approval_without_a_stored_one_does_not_run_it(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    paused = run.paused()
    assert run.resume(paused, True) == ap.PENDING
    assert setup.ran == []
    assert setup.request().status == "pending"


def test_the_sdks_rejection_wins_over_a_stored_approval(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    paused = run.paused()
    setup.decide("approve")
    assert run.resume(paused, False) != "sent 900 to bob"
    assert setup.ran == []
    assert [r.status for r in setup.requests(None)] == ["approved"]


def test_a_call_already_approved_runs_without_an_interruption(tmp_path: Path) -> None:
    """The model asks again in a new run after a person approved: it runs once, no pause."""
    setup = ap.setup(tmp_path)
    Run(setup).paused()
    setup.decide("approve")
    run = Run(setup)
    done = run.run("Pay bob 900.")
    assert done.final_output == FINAL and not done.interruptions
    assert setup.ran == [ap.ARGS]
