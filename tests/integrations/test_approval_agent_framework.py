"""Microsoft Agent Framework: a call the gate holds becomes the framework's approval request.

The function middleware answers a held call with a ``function_approval_request``
(as a security middleware does; our pause in its ``additional_properties``),
so the run stops with it in ``user_input_requests``. A person decides with the
CLI; the application answers ``request.to_function_approval_response(approved=True)``
and the run goes on in the same turn. The framework's approval is advisory:
the call runs only on the stored approval of its exact arguments; a rejection
stops it whatever the store says.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.integrations import _approvals as ap
from tests.integrations import _frameworks as fw

af = fw.need("agent_framework")

from guardrails.integrations._approval import PAUSE_KEY  # noqa: E402
from guardrails.integrations.agent_framework import guard_agent  # noqa: E402
from guardrails.integrations.scripted_models import chat_client  # noqa: E402

FINAL = "Done."


class Run:
    """A guarded agent over a scripted chat client, one session."""

    def __init__(self, setup: ap.Setup) -> None:
        self.client = chat_client([("c1", "transfer", dict(ap.ARGS))], FINAL)
        self.agent = af.Agent(client=self.client, tools=[af.tool(setup.transfer())])
        guard_agent(self.agent, setup.rails())
        self.session = self.agent.create_session()

    def paused(self) -> Any:
        response = asyncio.run(self.agent.run("Pay bob 900.", session=self.session))
        [request] = response.user_input_requests
        assert request.additional_properties[PAUSE_KEY]["message"] == ap.PENDING
        assert request.function_call.name == "transfer"
        return request

    def resume(self, request: Any, approved: bool) -> str:
        """Answer the approval request; what the model read of the call."""
        answer = af.Message(
            role="user", contents=[request.to_function_approval_response(approved=approved)]
        )
        response = asyncio.run(self.agent.run(answer, session=self.session))
        assert response.text == FINAL and not response.user_input_requests
        messages, _ = self.client.requests[-1]
        [result] = [
            c
            for m in messages
            for c in m.contents
            if c.type == "function_result" and c.call_id == "c1"
        ]
        return str(result.result)


def test_approved_with_the_cli_the_resumed_run_runs_it_once(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    request = run.paused()
    assert setup.ran == []
    setup.decide("approve")
    assert run.resume(request, True) == "sent 900 to bob"
    assert setup.ran == [ap.ARGS]
    assert [r.status for r in setup.requests(None)] == ["used"]
    setup.one_turn()


def test_denied_with_the_cli_it_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    request = run.paused()
    setup.decide("deny")
    assert run.resume(request, True) == ap.DENIED
    assert setup.ran == []


def test_an_expired_approval_never_runs(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    request = run.paused()
    setup.decide("approve")
    setup.expire()
    assert run.resume(request, True) == ap.EXPIRED
    assert setup.ran == []


def test_the_frameworks_approval_without_a_stored_one_does_not_run_it(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    request = run.paused()
    assert run.resume(request, True) == ap.PENDING
    assert setup.ran == []
    assert setup.request().status == "pending"


def test_the_frameworks_rejection_wins_over_a_stored_approval(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    request = run.paused()
    setup.decide("approve")
    assert run.resume(request, False) != "sent 900 to bob"
    assert setup.ran == []
    assert [r.status for r in setup.requests(None)] == ["approved"]


def test_an_approval_answered_with_edited_arguments_is_a_new_request(tmp_path: Path) -> None:
    setup = ap.setup(tmp_path)
    run = Run(setup)
    request = run.paused()
    approved = setup.request()
    setup.decide("approve", approved.id)
    request.function_call.arguments = dict(ap.EDITED)
    assert run.resume(request, True) == ap.PENDING
    assert setup.ran == []
    [new] = setup.requests()
    assert new.id != approved.id and '"mallory"' in new.arguments
    assert [r.status for r in setup.requests("approved")] == ["approved"]
