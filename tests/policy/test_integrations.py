"""The worked example through a real integration (the anthropic client against a
local scripted Messages API), and the same session sync and async."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import anthropic

from guardrails import Outcome
from guardrails.integrations.anthropic import run_tool_loop
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message
from guardrails.verdicts import model_sentence

ROOT = Path(__file__).resolve().parents[2]


def _example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "policy_mail_payments", ROOT / "examples" / "policy_mail_payments.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["policy_mail_payments"] = module
    spec.loader.exec_module(module)
    return module


mail = _example()
USER = "Summarise my inbox, then pay 750 EUR to DE89 3704 0044 0532 0130 00"


def test_injected_calls_are_refused_inside_the_anthropic_tool_loop() -> None:
    rails = mail.build()
    turn = rails.turn(session="s-9", values={"payment_limit": 1000})
    script = [
        tool_use_message(("read_inbox", {})),
        tool_use_message(
            ("pay", {"iban": "GB33BUKB20201555555555", "amount": 950}),
            ("change_password", {"new_password": "letmein123"}),
            ("pay", {"iban": "DE89370400440532013000", "amount": 750}),
        ),
        text_message("Done."),
    ]
    with ScriptedMessagesAPI(script) as api:
        client = anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)
        with client:
            run_tool_loop(
                client,
                turn,
                model="claude-test",
                max_tokens=256,
                messages=[{"role": "user", "content": USER}],
            )
        sent = api.requests
    offered = {t["name"] for t in sent[0]["tools"]}
    assert "pay" in offered and "change_password" not in offered
    blocks = sent[2]["messages"][-1]["content"]
    assert [b.get("is_error", False) for b in blocks] == [True, True, False]
    assert blocks[0]["content"] == model_sentence(Outcome.INVALID_ARGS, ["amount", "iban"])
    assert blocks[1]["content"] == model_sentence(Outcome.UNAVAILABLE)
    assert [r.outcome for r in turn.results] == [
        Outcome.OK,
        Outcome.INVALID_ARGS,
        Outcome.UNAVAILABLE,
        Outcome.OK,
    ]


async def test_the_session_is_decided_the_same_sync_and_async() -> None:
    spec = importlib.util.spec_from_file_location(
        "policy_worked_example_cases", Path(__file__).with_name("test_worked_example.py")
    )
    assert spec is not None and spec.loader is not None
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    ATTACKS, USERS_OWN = cases.ATTACKS, cases.USERS_OWN

    outcomes: dict[str, list[Outcome]] = {"sync": [], "async": []}
    for mode in outcomes:
        rails = mail.build()
        first = rails.turn(session="s", values={"payment_limit": 1000})
        if mode == "sync":
            first.pre_turn("read my inbox and open https://news.example/today")
            first.call("read_inbox", {})
        else:
            await first.apre_turn("read my inbox and open https://news.example/today")
            await first.acall("read_inbox", {})
        for text, name, arguments in [*ATTACKS, *USERS_OWN]:
            turn = rails.turn(session="s", values={"payment_limit": 1000})
            if mode == "sync":
                turn.pre_turn(text)
                outcomes[mode].append(turn.call(name, arguments).outcome)
            else:
                await turn.apre_turn(text)
                outcomes[mode].append((await turn.acall(name, arguments)).outcome)
    assert outcomes["sync"] == outcomes["async"]
