"""Google ADK: a call the gate holds asks for ADK's tool confirmation.

The invocation pauses with ADK's ``adk_request_confirmation`` (our pause in
its payload, the sentence as its hint); a person decides with the CLI; the
application answers the confirmation (``{"confirmed": true}``) and the
invocation goes on. ADK's confirmation is advisory: the call runs only on the
stored approval of its exact arguments; a rejected confirmation stops it
whatever the store says.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.integrations import _approvals as ap
from tests.integrations import _frameworks as fw

fw.need("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402
from google.genai import types  # noqa: E402

from guardrails.integrations._approval import PAUSE_KEY  # noqa: E402
from guardrails.integrations.google_adk import plugin  # noqa: E402
from guardrails.integrations.scripted_models import adk_model  # noqa: E402
from guardrails.verdicts import Outcome, model_sentence  # noqa: E402

FINAL = "Done."


class Run:
    """A guarded agent on an in-memory runner, one session."""

    def __init__(self, setup: ap.Setup) -> None:
        self.llm = adk_model([("c1", "transfer", dict(ap.ARGS))], FINAL)
        agent = LlmAgent(name="bank", model=self.llm, tools=[FunctionTool(setup.transfer())])
        guard = plugin(agent, setup.rails())
        self.runner = InMemoryRunner(app=App(name="bank", root_agent=agent, plugins=[guard]))
        self.session: Any = None

    async def _send(self, message: types.Content) -> list[Any]:
        if self.session is None:
            self.session = await self.runner.session_service.create_session(
                app_name="bank", user_id="u"
            )
        return [
            event
            async for event in self.runner.run_async(
                user_id="u", session_id=self.session.id, new_message=message
            )
        ]

    def paused(self) -> str:
        """The run pauses for a confirmation; its function call id."""
        ask = types.Content(role="user", parts=[types.Part(text="Pay bob 900.")])
        events = asyncio.run(self._send(ask))
        [asked] = [
            c
            for e in events
            for c in e.get_function_calls()
            if c.name == "adk_request_confirmation"
        ]
        confirmation = asked.args["toolConfirmation"]
        assert confirmation["payload"][PAUSE_KEY]["message"] == ap.PENDING
        return str(asked.id)

    def resume(self, asked: str, confirmed: bool) -> str:
        """Answer the confirmation; what the model read of the call."""
        answer = types.FunctionResponse(
            id=asked, name="adk_request_confirmation", response={"confirmed": confirmed}
        )
        asyncio.run(
            self._send(types.Content(role="user", parts=[types.Part(function_response=answer)]))
        )
        [response] = [
            p.function_response.response
            for p in self.llm.requests[-1].contents[-1].parts or ()
            if p.function_response is not None and p.function_response.id == "c1"
        ]
        [value] = response.values()
        return str(value)


def test_approved_with_the_cli_the_confirmed_invocation_runs_it_once(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    asked = run.paused()
    assert setup.ran == []
    setup.decide("approve")
    assert run.resume(asked, True) == "sent 900 to bob"
    assert setup.ran == [ap.ARGS]
    assert [r.status for r in setup.requests(None)] == ["used"]
    setup.one_turn()


def test_denied_with_the_cli_it_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    asked = run.paused()
    setup.decide("deny")
    assert run.resume(asked, True) == ap.DENIED
    assert setup.ran == []


def test_an_expired_approval_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    asked = run.paused()
    setup.decide("approve")
    setup.expire()
    assert run.resume(asked, True) == ap.EXPIRED
    assert setup.ran == []


def test_a_confirmation_without_a_stored_approval_does_not_run_it(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    asked = run.paused()
    assert run.resume(asked, True) == ap.PENDING
    assert setup.ran == []
    assert setup.request().status == "pending"


def test_a_rejected_confirmation_wins_over_a_stored_approval(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    asked = run.paused()
    setup.decide("approve")
    assert run.resume(asked, False) == model_sentence(Outcome.UNAVAILABLE)
    assert setup.ran == []
    assert [r.status for r in setup.requests(None)] == ["approved"]
