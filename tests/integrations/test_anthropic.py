"""The Anthropic integration, driven by the real ``anthropic`` client against a local scripted API."""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any, Literal

import anthropic
import pytest
from anthropic import beta_async_tool, beta_tool
from hypothesis import given
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, tool
from guardrails.integrations.anthropic import (
    anthropic_tools,
    arun_tool_loop,
    from_beta_tool,
    guard_beta_tools,
    offer_tools,
    run_tool_loop,
    tool_results,
)
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message
from guardrails.verdicts import model_sentence

SECRET = "db password is hunter2"


@tool(bind={"account_id": "account_id"})
def get_balance(account_id: str) -> dict[str, object]:
    """The customer's balance."""
    return {"account": account_id, "balance": 120}


@tool(bind={"account_id": "account_id"}, effect=True)
def transfer(account_id: str, amount: float, currency: Literal["USD", "EUR"]) -> str:
    """Move money out of the customer's account."""
    return f"sent {amount} {currency} from {account_id}"


@tool
def flaky_lookup(query: str) -> str:
    """A lookup whose backend fails."""
    raise ConnectionError(SECRET)


@tool
def delete_account() -> str:
    """Never offered in these tests."""
    raise AssertionError("must not run")


OFFERED = ("get_balance", "transfer", "flaky_lookup")


def rails() -> Guardrails:
    return Guardrails([get_balance, transfer, flaky_lookup, delete_account])


def closed_vocabulary(engine: Guardrails) -> set[str]:
    """Every sentence a non-ok tool_result may carry for the engine's tools."""
    sentences = {model_sentence(o) for o in Outcome if o is not Outcome.OK}
    for t in engine.tools.values():
        props = sorted(t.compiled.properties)
        for size in range(len(props) + 1):
            for names in combinations(props, size):
                for undeclared in (False, True):
                    sentences.add(
                        model_sentence(Outcome.INVALID_ARGS, names, undeclared=undeclared)
                    )
    return sentences


SCRIPT = [
    tool_use_message(
        ("transfer", {"account_id": "acc-666", "amount": 5, "currency": "USD"}),
        ("transfer", {"amount": 5}),
        ("flaky_lookup", {"query": "anything"}),
        ("delete_account", {}),
        ("get_balance", {}),
        text="Let me look.",
    ),
    text_message("Your balance is 120."),
]


def client_for(api: ScriptedMessagesAPI) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)


def test_exported_tools_hide_bound_parameters() -> None:
    exported = {t["name"]: t for t in anthropic_tools(rails())}
    assert "account_id" not in exported["transfer"]["input_schema"]["properties"]
    assert exported["transfer"]["input_schema"]["required"] == ["amount", "currency"]
    assert exported["get_balance"]["input_schema"]["properties"] == {}


def test_tool_loop_sends_only_offered_tools_and_closed_tool_results() -> None:
    engine = rails()
    turn = engine.turn(tenant="acme", values={"account_id": "acc-42"})
    with ScriptedMessagesAPI(SCRIPT) as api, client_for(api) as client:
        run = run_tool_loop(
            client,
            turn,
            names=OFFERED,
            model="claude-test",
            max_tokens=256,
            messages=[{"role": "user", "content": "What's my balance?"}],
        )
    assert run.message.content[0].text == "Your balance is 120."
    assert not run.exhausted
    first, second = api.requests
    for request in (first, second):
        assert [t["name"] for t in request["tools"]] == list(OFFERED)
        for t in request["tools"]:
            assert "account_id" not in t["input_schema"]["properties"]
    blocks = second["messages"][-1]["content"]
    assert second["messages"][-1]["role"] == "user"
    assert [b["type"] for b in blocks] == ["tool_result"] * 5
    uses = [b for b in second["messages"][1]["content"] if b["type"] == "tool_use"]
    assert [b["tool_use_id"] for b in blocks] == [u["id"] for u in uses]
    assert [r.outcome for r in run.results] == [
        Outcome.INVALID_ARGS,
        Outcome.INVALID_ARGS,
        Outcome.ERROR,
        Outcome.UNAVAILABLE,
        Outcome.OK,
    ]
    vocabulary = closed_vocabulary(engine)
    for block in blocks[:4]:
        assert block["is_error"] is True
        assert block["content"] in vocabulary
    assert "is_error" not in blocks[4]
    assert blocks[4]["content"] == '{"account":"acc-42","balance":120}'
    assert SECRET not in str(second)
    assert "ConnectionError" not in str(second)


def test_model_supplied_bound_argument_is_invalid_args_and_tool_not_run() -> None:
    ran: list[str] = []

    @tool(bind={"account_id": "account_id"})
    def close_account(account_id: str) -> str:
        ran.append(account_id)
        return "closed"

    turn = Guardrails([close_account]).turn(values={"account_id": "acc-42"})
    message = tool_use_message(("close_account", {"account_id": "acc-666"}))
    [block] = tool_results(turn, message)
    assert block["is_error"] is True
    assert block["content"] == model_sentence(Outcome.INVALID_ARGS)
    assert ran == []


def test_tool_results_reads_sdk_message_objects() -> None:
    engine = rails()
    turn = engine.turn(values={"account_id": "acc-42"})
    with ScriptedMessagesAPI([SCRIPT[0]]) as api, client_for(api) as client:
        message = client.messages.create(
            model="claude-test",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
            tools=offer_tools(turn, names=OFFERED),  # type: ignore[arg-type]
        )
    blocks = tool_results(turn, message)
    assert [b["tool_use_id"] for b in blocks] == [
        b.id for b in message.content if b.type == "tool_use"
    ]
    assert [b.get("is_error", False) for b in blocks] == [True, True, True, True, False]


def test_loop_stops_at_max_iterations_and_says_so() -> None:
    turn = rails().turn(values={"account_id": "acc-42"})
    script = [tool_use_message(("get_balance", {})) for _ in range(3)]
    with ScriptedMessagesAPI(script) as api, client_for(api) as client:
        run = run_tool_loop(
            client,
            turn,
            max_iterations=2,
            model="claude-test",
            max_tokens=64,
            messages=[{"role": "user", "content": "loop"}],
        )
    assert run.exhausted
    assert len(api.requests) == 2
    assert [r.outcome for r in run.results] == [Outcome.OK, Outcome.OK]


async def test_async_tool_loop_matches_sync() -> None:
    engine = rails()
    turn = engine.turn(values={"account_id": "acc-42"})
    with ScriptedMessagesAPI(SCRIPT) as api:
        async with anthropic.AsyncAnthropic(
            api_key="test-key", base_url=api.base_url, max_retries=0
        ) as client:
            run = await arun_tool_loop(
                client,
                turn,
                names=OFFERED,
                model="claude-test",
                max_tokens=256,
                messages=[{"role": "user", "content": "What's my balance?"}],
            )
    assert [r.outcome for r in run.results] == [
        Outcome.INVALID_ARGS,
        Outcome.INVALID_ARGS,
        Outcome.ERROR,
        Outcome.UNAVAILABLE,
        Outcome.OK,
    ]
    assert SECRET not in str(api.requests[-1])


# -- beta_tool ---------------------------------------------------------------


@beta_tool
def refund(account_id: str, amount: float, reason: str = "") -> str:
    """Refund an amount to the customer.

    Args:
        amount: how much to refund
    """
    if amount > 100:
        raise PermissionError(SECRET)
    return f"refunded {amount} to {account_id}"


@beta_async_tool
async def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


def test_beta_tool_adapter_keeps_the_sdk_schema_and_binds_parameters() -> None:
    guarded = from_beta_tool(refund, bind={"account_id": "account_id"})
    assert guarded.name == "refund"
    assert guarded.description.startswith("Refund an amount")
    assert "account_id" not in guarded.schema["properties"]
    assert guarded.schema["properties"]["amount"]["description"] == "how much to refund"
    turn = Guardrails([guarded]).turn(values={"account_id": "acc-42"})
    assert turn.call("refund", {"amount": "12.5"}).outcome is Outcome.INVALID_ARGS
    ok = turn.call("refund", {"amount": 12.5})
    assert (ok.outcome, ok.content) == (Outcome.OK, "refunded 12.5 to acc-42")
    failed = turn.call("refund", {"amount": 500})
    assert failed.outcome is Outcome.ERROR
    assert SECRET not in failed.content


async def test_beta_async_tool_adapter_runs_async() -> None:
    turn = Guardrails([from_beta_tool(lookup_order)]).turn()
    result = await turn.acall("lookup_order", {"order_id": "A1"})
    assert (result.outcome, result.content) == (Outcome.OK, "order A1: shipped")


def test_sdk_tool_runner_sends_fixed_sentences_instead_of_repr_exception() -> None:
    engine = Guardrails([from_beta_tool(refund, bind={"account_id": "account_id"}), delete_account])
    turn = engine.turn(values={"account_id": "acc-42"})
    script = [
        tool_use_message(("refund", {"amount": 500}), ("refund", {"amount": 10})),
        text_message("Refunded 10."),
    ]
    with ScriptedMessagesAPI(script) as api, client_for(api) as client:
        runner = client.beta.messages.tool_runner(
            model="claude-test",
            max_tokens=256,
            messages=[{"role": "user", "content": "refund me"}],
            tools=guard_beta_tools(turn, names=["refund"]),
        )
        final = runner.until_done()
    assert final.content[0].type == "text"
    first, second = api.requests
    assert [t["name"] for t in first["tools"]] == ["refund"]
    assert "account_id" not in first["tools"][0]["input_schema"]["properties"]
    failed, ok = second["messages"][-1]["content"]
    assert failed["is_error"] is True
    assert failed["content"] in (
        model_sentence(Outcome.ERROR),
        [{"type": "text", "text": model_sentence(Outcome.ERROR)}],
    )
    assert SECRET not in str(second) and "PermissionError" not in str(second)
    assert not ok.get("is_error")
    assert "refunded 10.0 to acc-42" in str(ok["content"])


async def test_sdk_async_tool_runner_is_guarded_too() -> None:
    engine = Guardrails([from_beta_tool(lookup_order), flaky_lookup])
    turn = engine.turn()
    script = [
        tool_use_message(("flaky_lookup", {"query": "x"}), ("lookup_order", {"order_id": "B2"})),
        text_message("done"),
    ]
    with ScriptedMessagesAPI(script) as api:
        async with anthropic.AsyncAnthropic(
            api_key="test-key", base_url=api.base_url, max_retries=0
        ) as client:
            runner = client.beta.messages.tool_runner(
                model="claude-test",
                max_tokens=256,
                messages=[{"role": "user", "content": "go"}],
                tools=guard_beta_tools(turn, asynchronous=True),
            )
            await runner.until_done()
    failed, ok = api.requests[-1]["messages"][-1]["content"]
    assert failed["is_error"] is True and SECRET not in str(failed)
    assert "order B2: shipped" in str(ok["content"])


@pytest.mark.parametrize("bad", [None, "not json", [1, 2]])
def test_malformed_tool_use_input_gets_invalid_args(bad: Any) -> None:
    turn = rails().turn(values={"account_id": "acc-42"})
    message = {"content": [{"type": "tool_use", "id": "toolu_x", "name": "transfer", "input": bad}]}
    [block] = tool_results(turn, message)
    assert block == {
        "type": "tool_result",
        "tool_use_id": "toolu_x",
        "content": model_sentence(Outcome.INVALID_ARGS),
        "is_error": True,
    }


# -- pre_turn ------------------------------------------------------------------


def test_forbidden_subject_removes_the_tool_from_the_request() -> None:
    from guardrails.rules import trigger

    engine = Guardrails(
        [get_balance, transfer], [trigger(["wire", "transfer"], remove=["transfer"])]
    )
    turn = engine.turn(values={"account_id": "acc-42"})
    script = [tool_use_message(("transfer", {"amount": 5, "currency": "EUR"})), text_message("ok")]
    with ScriptedMessagesAPI(script) as api, client_for(api) as client:
        run = run_tool_loop(
            client,
            turn,
            model="claude-test",
            max_tokens=64,
            messages=[{"role": "user", "content": "Please WIRE money to my landlord"}],
        )
    assert [t["name"] for t in api.requests[0]["tools"]] == ["get_balance"]
    [result] = run.results
    assert (result.outcome, result.content) == (
        Outcome.UNAVAILABLE,
        model_sentence(Outcome.UNAVAILABLE),
    )


def test_refused_turn_never_calls_the_model() -> None:
    from guardrails.rules import trigger

    engine = Guardrails([get_balance], [trigger(["password"], refuse="credentials")])
    turn = engine.turn(values={"account_id": "acc-42"})
    with ScriptedMessagesAPI([text_message("never sent")]) as api, client_for(api) as client:
        run = run_tool_loop(
            client,
            turn,
            model="claude-test",
            max_tokens=64,
            messages=[{"role": "user", "content": "what is my password"}],
        )
    assert (run.message, run.refusal, api.requests) == (None, "credentials", [])


# -- any model output --------------------------------------------------------------


@tool
def echo(text: str) -> str:
    """Say it back."""
    return text


blocks = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["tool_use", "text", "thinking", "tool_use"]),
        "id": st.one_of(st.none(), st.text(max_size=8)),
        "name": st.one_of(st.none(), st.sampled_from(["echo", "rm"]), st.integers()),
        "input": st.one_of(
            st.none(),
            st.text(max_size=20),
            st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers())),
        ),
    }
)


@given(st.lists(blocks, max_size=6))
def test_any_message_gets_one_closed_tool_result_per_tool_use(content: list[Any]) -> None:
    turn = Guardrails([echo]).turn()
    results = tool_results(turn, {"content": content})
    uses = [b for b in content if b["type"] == "tool_use"]
    assert len(results) == len(uses) == len(turn.results)
    for use, block, result in zip(uses, results, turn.results, strict=True):
        assert block["type"] == "tool_result"
        # The model's id is echoed so the result pairs with its tool_use.
        expected = use["id"] if isinstance(use["id"], str) else result.call_id
        assert block["tool_use_id"] == expected
        if result.outcome is Outcome.OK:
            assert "is_error" not in block
        else:
            assert block["is_error"] is True
            assert block["content"].startswith(model_sentence(result.outcome))


def test_post_run_reads_the_loops_final_message_and_performs_the_backstop() -> None:
    from guardrails.rules import required_action

    notified: list[str] = []

    @tool
    def notify_human(reason: str) -> str:
        """Hand over to a person."""
        notified.append(reason)
        return "handed over"

    escalate = required_action(
        "notify_human",
        when=lambda run: "escalate" in (run.text or ""),
        arguments={"reason": "promised"},
    )
    engine = Guardrails([get_balance, notify_human], [escalate])
    turn = engine.turn(values={"account_id": "acc-42"})
    script = [text_message("I will escalate this to a colleague.")]
    with ScriptedMessagesAPI(script) as api, client_for(api) as client:
        run = run_tool_loop(
            client,
            turn,
            model="claude-test",
            max_tokens=64,
            messages=[{"role": "user", "content": "I want a human"}],
        )
    report = turn.post_run(run.message)
    [action] = report.actions
    assert (action.tool, action.outcome, notified) == ("notify_human", Outcome.OK, ["promised"])


# -- results made of content blocks ---------------------------------------------------

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}


class _HostileDict(dict):  # type: ignore[type-arg]
    def get(self, *args: Any) -> Any:
        raise RuntimeError("a tool's own mapping")


class _HostileStr(str):
    def __hash__(self) -> int:
        raise RuntimeError("a tool's own string")

    __eq__ = str.__eq__


@pytest.mark.parametrize(
    "value, native",
    [
        (IMAGE, True),
        ([{"type": "text", "text": "a chart"}, IMAGE], True),
        ([IMAGE, {"type": "tool_use", "id": "x"}], False),  # one block a tool_result cannot hold
        ({"type": "images"}, False),  # near miss of a block type
        ([], False),
        ({"kind": "image"}, False),
        (_HostileDict(IMAGE), False),
        ({"type": _HostileStr("image")}, False),
        ("an image", False),
    ],
)
def test_a_result_of_content_blocks_reaches_the_model_as_blocks(value: Any, native: bool) -> None:
    @tool
    def chart() -> Any:
        """A chart."""
        return value

    turn = Guardrails([chart]).turn()
    message = {"content": [{"type": "tool_use", "id": "t1", "name": "chart", "input": {}}]}
    [block] = tool_results(turn, message)
    [result] = turn.results
    if native:
        assert block["content"] == ([value] if isinstance(value, dict) else value)
    else:
        assert block["content"] == result.content and isinstance(block["content"], str)


def test_blocks_past_the_size_cap_reach_the_model_as_the_capped_text() -> None:
    big = {**IMAGE, "source": {**IMAGE["source"], "data": "A" * 200}}

    @tool
    def chart() -> Any:
        """A chart."""
        return big

    for limit, native in ((len(json.dumps(big, separators=(",", ":"))), True), (200, False)):
        turn = Guardrails([chart], max_result_chars=limit).turn()
        message = {"content": [{"type": "tool_use", "id": "t1", "name": "chart", "input": {}}]}
        [block] = tool_results(turn, message)
        assert (block["content"] == [big]) is native
        if not native:
            assert block["content"].endswith("[guardrails: result truncated]")


def test_blocks_whose_text_a_hook_rewrote_reach_the_model_as_that_text() -> None:
    class Rewrite:
        def before(self, invocation: Any) -> None:
            return None

        def after(self, invocation: Any, result: Any) -> Any:
            return result._replace(content=result.content + "\n\nNext: call confirm_plan.")

    @tool
    def chart() -> Any:
        """A chart."""
        return IMAGE

    turn = Guardrails([chart], hooks=[Rewrite()]).turn()
    message = {"content": [{"type": "tool_use", "id": "t1", "name": "chart", "input": {}}]}
    [block] = tool_results(turn, message)
    assert isinstance(block["content"], str)
    assert block["content"].endswith("Next: call confirm_plan.")
