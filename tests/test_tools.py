from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from guardrails import ConfigurationError, Guardrails, Outcome, SchemaError, Secret, Tool, tool

SCHEMA = {
    "type": "object",
    "properties": {
        "account_id": {"type": "string"},
        "amount": {"type": "number", "minimum": 1},
        "currency": {"enum": ["USD", "EUR"]},
    },
    "required": ["account_id", "amount", "currency"],
    "additionalProperties": False,
}


def test_decorator_derives_schema_from_signature() -> None:
    @tool
    def refund(
        order_id: Annotated[str, Field(description="The order")],
        reason: Literal["damaged", "late"],
        note: str = "",
    ) -> str:
        """Refund an order.

        Only for orders under 30 days.
        """
        return "ok"

    schema = refund.schema
    assert refund.name == "refund"
    assert refund.description.startswith("Refund an order.")
    assert schema["required"] == ["order_id", "reason"]
    assert schema["properties"]["order_id"]["description"] == "The order"
    assert schema["properties"]["reason"]["enum"] == ["damaged", "late"]
    assert "title" not in schema and "title" not in schema["properties"]["note"]
    assert refund("o1", "late") == "ok"  # still directly callable


def test_decorator_with_options_and_bound_parameter_hidden() -> None:
    @tool(name="pay", bind={"account_id": "account_id"})
    def transfer(account_id: str, amount: float) -> str:
        return account_id

    assert transfer.name == "pay"
    for exported in (
        transfer.to_anthropic()["input_schema"],
        transfer.to_openai()["function"]["parameters"],
        transfer.to_mcp()["inputSchema"],
    ):
        assert "account_id" not in exported["properties"]
        assert exported["required"] == ["amount"]


@pytest.mark.parametrize(
    "definition",
    [
        {"name": "transfer", "description": "d", "input_schema": SCHEMA},
        {"name": "transfer", "description": "d", "parameters": SCHEMA},
        {
            "type": "function",
            "function": {"name": "transfer", "description": "d", "parameters": SCHEMA},
        },
        {"name": "transfer", "description": "d", "inputSchema": SCHEMA},
    ],
    ids=["anthropic", "openai", "openai-wrapped", "mcp"],
)
def test_loaders_read_every_format_and_export_without_bound(definition: dict[str, Any]) -> None:
    t = Tool.from_definition(definition, lambda **kw: kw, bind={"account_id": "account_id"})
    assert t.name == "transfer" and t.description == "d"
    assert t.compiled.required == ("amount", "currency")
    assert "account_id" not in t.to_openai()["function"]["parameters"]["properties"]
    assert t.source_schema["properties"]["account_id"] == {"type": "string"}


def _fresh_schema_tool(body: list[str]) -> Tool:
    def record(**kwargs: Any) -> str:
        body.append("ran")
        return "done"

    return Tool.from_definition({"name": "t", "input_schema": SCHEMA}, record)


def test_missing_required_is_invalid_args_for_each_way_of_defining_a_tool() -> None:
    ran: list[str] = []

    @tool
    def decorated(account_id: str, amount: float, currency: Literal["USD", "EUR"]) -> str:
        ran.append("decorated")
        return "done"

    def impl(**kwargs: Any) -> str:
        ran.append("loaded")
        return "done"

    tools = [
        decorated,
        Tool.from_definition({"name": "anthropic", "input_schema": SCHEMA}, impl),
        Tool.from_definition(
            {"type": "function", "function": {"name": "openai", "parameters": SCHEMA}}, impl
        ),
        Tool.from_definition({"name": "mcp", "inputSchema": SCHEMA}, impl),
    ]
    rails = Guardrails(tools)
    for t in tools:
        result = rails.call(t.name, {"amount": 5, "currency": "USD"})
        assert result.outcome is Outcome.INVALID_ARGS
        assert "account_id" in result.content
    assert ran == []


def test_invalid_schema_is_an_error_at_registration_naming_the_tool() -> None:
    with pytest.raises(SchemaError, match="'broken'"):
        Tool.from_definition(
            {
                "name": "broken",
                "input_schema": {"type": "object", "properties": {"a": {"type": "nope"}}},
            },
            lambda: None,
        )
    with pytest.raises(SchemaError, match="'arr'"):
        Tool.from_definition({"name": "arr", "input_schema": {"type": "array"}}, lambda: None)


def test_bound_parameter_must_exist() -> None:
    with pytest.raises(ConfigurationError, match="'ghost'"):
        Tool.from_definition(
            {"name": "t", "input_schema": SCHEMA}, lambda **k: k, bind={"ghost": "g"}
        )
    with pytest.raises(ConfigurationError, match="'ghost'"):

        @tool(bind={"ghost": "g"})
        def f(a: int) -> int:
            return a


def test_secret_only_into_actions() -> None:
    with pytest.raises(ConfigurationError, match="action"):
        Tool.from_definition(
            {"name": "t", "input_schema": SCHEMA}, lambda **k: k, bind={"account_id": Secret("KEY")}
        )


def test_var_kwargs_and_bad_names_rejected() -> None:
    with pytest.raises(SchemaError):

        @tool
        def f(**kwargs: Any) -> None:
            return None

    with pytest.raises(ConfigurationError):
        Tool("has space", lambda: None, {"type": "object"})


class Address(BaseModel):
    city: str
    zip: str


def test_pydantic_model_parameters_are_parsed_before_the_call() -> None:
    seen: list[Any] = []

    @tool
    def ship(to: Address, express: bool = False) -> str:
        seen.append(to)
        return to.city

    result = Guardrails([ship]).call("ship", {"to": {"city": "Lisbon", "zip": "1000"}})
    assert result.outcome is Outcome.OK and result.content == "Lisbon"
    assert isinstance(seen[0], Address)
