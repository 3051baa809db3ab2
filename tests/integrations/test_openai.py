"""OpenAI-style function calling: definitions in and out, tool_calls through tool_call."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails import ConfigurationError, Guardrails, Outcome, tool
from guardrails.integrations.openai import (
    atool_messages,
    function_call_outputs,
    load_tools,
    offer_tools,
    openai_tools,
    tool_messages,
)
from guardrails.verdicts import model_sentence

SECRET = "token=sk-live-123"


@tool(bind={"account_id": "account_id"})
def get_orders(account_id: str, status: Literal["open", "closed"] = "open") -> list[str]:
    """The customer's orders."""
    return [f"{account_id}:{status}:1"]


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError(SECRET)


def assistant(*calls: tuple[str, Any], call_ids: bool = True) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}" if call_ids else None,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for i, (name, arguments) in enumerate(calls)
        ],
    }


def test_export_hides_bound_parameters() -> None:
    [exported] = openai_tools(Guardrails([get_orders]))
    assert exported["type"] == "function"
    assert exported["function"]["name"] == "get_orders"
    assert "account_id" not in exported["function"]["parameters"]["properties"]


def test_load_tools_round_trips_definitions_and_names_missing_implementations() -> None:
    definitions = [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers.",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"],
                },
            },
        }
    ]
    [add] = load_tools(definitions, {"add": lambda a, b: a + b})
    assert openai_tools([add]) == definitions
    turn = Guardrails([add]).turn()
    [message] = tool_messages(turn, assistant(("add", '{"a": 1}')))
    assert message["content"] == model_sentence(Outcome.INVALID_ARGS, ["b"])
    with pytest.raises(ConfigurationError, match="'add'"):
        load_tools(definitions, {})


def test_tool_calls_become_tool_messages_with_closed_content() -> None:
    turn = Guardrails([get_orders, explode]).turn(values={"account_id": "acc-7"})
    offered = offer_tools(turn, names=["get_orders"])
    assert [t["function"]["name"] for t in offered] == ["get_orders"]
    message = assistant(
        ("get_orders", json.dumps({"status": "closed"})),
        ("get_orders", json.dumps({"account_id": "acc-666"})),
        ("explode", "{}"),
        ("get_orders", "{not json"),
    )
    replies = tool_messages(turn, message)
    assert [m["tool_call_id"] for m in replies] == ["call_0", "call_1", "call_2", "call_3"]
    assert [m["role"] for m in replies] == ["tool"] * 4
    assert replies[0]["content"] == '["acc-7:closed:1"]'
    assert replies[1]["content"] == model_sentence(Outcome.INVALID_ARGS)
    assert replies[2]["content"] == model_sentence(Outcome.UNAVAILABLE)
    assert replies[3]["content"] == model_sentence(Outcome.INVALID_ARGS)
    assert SECRET not in str(replies)


def test_sdk_shaped_objects_are_read_like_dicts() -> None:
    openai = pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionMessage

    message = ChatCompletionMessage.model_validate(assistant(("explode", "")))
    assert isinstance(message, openai.BaseModel)
    turn = Guardrails([explode]).turn()
    [reply] = tool_messages(turn, message)
    assert reply == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": model_sentence(Outcome.ERROR),
    }


async def test_async_matches_sync() -> None:
    engine = Guardrails([get_orders, explode])
    message = assistant(("get_orders", "{}"), ("explode", "{}"), ("nope", "{}"))
    sync = tool_messages(engine.turn(values={"account_id": "a"}), message)
    asynchronous = await atool_messages(engine.turn(values={"account_id": "a"}), message)
    assert sync == asynchronous


def test_a_call_without_an_id_is_answered_with_the_generated_one() -> None:
    turn = Guardrails([get_orders]).turn(values={"account_id": "a"})
    [reply] = tool_messages(turn, assistant(("get_orders", "{}"), call_ids=False))
    assert reply["tool_call_id"] == turn.results[0].call_id


@given(
    name=st.one_of(st.none(), st.text(max_size=20), st.integers()),
    arguments=st.one_of(st.none(), st.text(max_size=40), st.integers(), st.lists(st.integers())),
)
def test_any_model_output_gets_a_closed_answer(name: Any, arguments: Any) -> None:
    turn = Guardrails([get_orders, explode]).turn(values={"account_id": "a"})
    message = {"tool_calls": [{"id": "c", "function": {"name": name, "arguments": arguments}}]}
    [reply] = tool_messages(turn, message)
    [result] = turn.results
    if result.outcome is Outcome.OK:
        assert name == "get_orders"
    else:
        assert reply["content"].startswith(model_sentence(result.outcome))
    assert SECRET not in reply["content"]


# -- the Responses API ---------------------------------------------------------------


def test_responses_function_calls_become_function_call_outputs() -> None:
    from guardrails.integrations.openai import function_call_outputs, offer_response_tools

    turn = Guardrails([get_orders, explode]).turn(values={"account_id": "acc-7"})
    [flat] = offer_response_tools(turn, "show my orders", names=["get_orders"])
    assert flat["type"] == "function" and flat["name"] == "get_orders"
    assert "account_id" not in flat["parameters"]["properties"]
    response = {
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "fc_1", "name": "get_orders", "arguments": "{}"},
            {"type": "function_call", "call_id": "fc_2", "name": "explode", "arguments": "{}"},
        ]
    }
    assert function_call_outputs(turn, response) == [
        {"type": "function_call_output", "call_id": "fc_1", "output": '["acc-7:open:1"]'},
        {
            "type": "function_call_output",
            "call_id": "fc_2",
            "output": model_sentence(Outcome.UNAVAILABLE),
        },
    ]


async def test_responses_sdk_items_are_read_and_async_matches_sync() -> None:
    pytest.importorskip("openai")
    from openai.types.responses import ResponseFunctionToolCall

    from guardrails.integrations.openai import afunction_call_outputs, function_call_outputs

    items = [
        ResponseFunctionToolCall(
            type="function_call", call_id="fc_9", name="explode", arguments="{}"
        )
    ]
    engine = Guardrails([explode])
    sync = function_call_outputs(engine.turn(), items)
    asynchronous = await afunction_call_outputs(engine.turn(), items)
    assert (
        sync
        == asynchronous
        == [
            {
                "type": "function_call_output",
                "call_id": "fc_9",
                "output": model_sentence(Outcome.ERROR),
            }
        ]
    )


@pytest.mark.parametrize("odd", [5, "text", None, {"k": 1}, b"bytes"])
def test_a_message_whose_lists_are_not_lists_has_no_tool_calls(odd: object) -> None:
    from guardrails.integrations.anthropic import tool_results
    from guardrails.integrations.openai import function_call_outputs

    turn = Guardrails([explode]).turn()
    assert tool_messages(turn, {"tool_calls": odd}) == []
    assert tool_results(turn, {"content": odd}) == []
    assert function_call_outputs(turn, {"output": odd}) == []
    assert turn.results == []


# -- results made of the Responses API's own output items ----------------------------

IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,iVBO"}


@pytest.mark.parametrize(
    "value, native",
    [
        (IMAGE, True),
        ([{"type": "input_text", "text": "a chart"}, IMAGE], True),
        ({"type": "input_file", "file_id": "file-1"}, True),
        ([IMAGE, {"type": "image", "source": {}}], False),  # an Anthropic block is not an item
        ({"type": "output_image"}, False),  # near miss of an item type
        ([], False),
        ("an image", False),
    ],
)
def test_a_result_of_output_items_reaches_the_responses_api_as_items(
    value: Any, native: bool
) -> None:
    @tool
    def chart() -> Any:
        """A chart."""
        return value

    turn = Guardrails([chart]).turn()
    items = [{"type": "function_call", "call_id": "fc_1", "name": "chart", "arguments": "{}"}]
    [output] = function_call_outputs(turn, items)
    [message] = tool_messages(turn, {"tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "chart", "arguments": "{}"}}
    ]})  # fmt: skip
    [first, second] = turn.results
    if native:
        assert output["output"] == ([value] if isinstance(value, dict) else value)
    else:
        assert output["output"] == first.content
    assert message["content"] == second.content  # a tool message carries text only


def test_items_past_the_size_cap_reach_the_responses_api_as_the_capped_text() -> None:
    big = {"type": "input_image", "image_url": "data:image/png;base64," + "A" * 200}

    @tool
    def chart() -> Any:
        """A chart."""
        return big

    for limit, native in ((len(json.dumps(big, separators=(",", ":"))), True), (200, False)):
        turn = Guardrails([chart], max_result_chars=limit).turn()
        items = [{"type": "function_call", "call_id": "f", "name": "chart", "arguments": "{}"}]
        [output] = function_call_outputs(turn, items)
        assert (output["output"] == [big]) is native


def test_items_whose_text_a_hook_rewrote_reach_the_responses_api_as_that_text() -> None:
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
    items = [{"type": "function_call", "call_id": "f", "name": "chart", "arguments": "{}"}]
    [output] = function_call_outputs(turn, items)
    assert output["output"].endswith("Next: call confirm_plan.")
