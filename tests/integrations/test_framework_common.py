"""The helpers the framework adapters share (``integrations._common``)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from guardrails import DuplicateNameError, Guardrails, Outcome, TurnContext, UsageError
from guardrails.integrations._common import (
    Runs,
    acall_native,
    adopt,
    call_native,
    context_of,
    relax_required,
)

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "integer", "default": 1}},
    "required": ["a", "b"],
}
ONE = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def test_relax_required_keeps_what_the_function_requires_and_copies() -> None:
    relaxed = relax_required(SCHEMA, ["b"])
    assert relaxed["required"] == ["a"]
    assert SCHEMA["required"] == ["a", "b"]


def test_context_of_reads_fields_and_values_and_fills_defaults() -> None:
    ctx = context_of({"tenant": "acme", "plan": "gold", "session": 3}, session="th-1")
    assert (ctx.tenant, ctx.session, ctx.get("plan")) == ("acme", "th-1", "gold")
    given = TurnContext(tenant="t")
    assert context_of(given) is given
    assert context_of(Guardrails().turn(context=given)) is given

    class Deps:
        tenant = "obj"
        secret = "not a value"

    from_object = context_of(Deps())
    assert from_object.tenant == "obj" and from_object.get("secret") is None
    assert context_of(None) == TurnContext()


def test_runs_are_per_object_held_weakly_and_never_inherited() -> None:
    class Owner:
        pass

    runs = Runs()
    first = Owner()
    made = runs.get(first, lambda: "run-1")
    assert runs.get(first, lambda: "other") == made == "run-1"
    assert runs.peek(Owner()) is None
    del first
    gc.collect()
    assert runs._runs == {}
    second = Owner()
    assert runs.get(second, lambda: "run-2") == "run-2"
    assert runs.pop(second) == "run-2" and runs.pop(second) is None


def _run(native: Any, arguments: dict[str, Any]) -> Any:
    return f"{native}:{arguments['a']}"


def test_adopt_registers_once_per_source_and_refuses_another_of_the_same_name() -> None:
    rails = Guardrails()
    source = object()
    tool = adopt(rails, "t", SCHEMA, _run, source=source, is_async=False)
    assert adopt(rails, "t", SCHEMA, _run, source=source, is_async=False) is tool
    assert rails.tools["t"] is tool
    with pytest.raises(DuplicateNameError, match="'t'"):
        adopt(rails, "t", SCHEMA, _run, source=object(), is_async=False)


def test_a_call_gets_its_own_per_call_object_and_a_nested_call_does_not_borrow_it() -> None:
    rails = Guardrails()
    turn = rails.turn()

    def outer(native: Any, arguments: dict[str, Any]) -> Any:
        # The outer tool calls another adopted tool, outside a framework call of its own.
        inner = turn.call("inner", {"a": "x"})
        return f"{native}/{inner.outcome}"

    adopt(rails, "outer", ONE, outer, source=1, is_async=False)
    adopt(rails, "inner", ONE, _run, source=2, is_async=False, direct=lambda a: "direct")
    result = call_native(turn, "ctx-1", "outer", {"a": "y"}, "c1")
    assert result.content == "ctx-1/ok"
    assert [r.content for r in turn.results] == ["direct", "ctx-1/ok"]


async def test_async_adopted_tools_await_the_framework_and_a_missing_runner_is_misuse() -> None:
    rails = Guardrails()

    async def run(native: Any, arguments: dict[str, Any]) -> Any:
        return f"{native}:{arguments['a']}"

    adopt(rails, "t", ONE, run, source=1, is_async=True)
    turn = rails.turn()
    assert (await acall_native(turn, "n", "t", {"a": "z"}, None)).content == "n:z"
    with pytest.raises(UsageError, match="'t'"):
        await turn.acall("t", {"a": "z"})
    assert turn.results[0].outcome is Outcome.OK


def test_an_async_adopted_tool_serves_the_sync_path_too() -> None:
    rails = Guardrails()

    async def run(native: Any, arguments: dict[str, Any]) -> Any:
        return f"{native}:{arguments['a']}"

    adopt(rails, "t", ONE, run, source=1, is_async=True)
    assert call_native(rails.turn(), "n", "t", {"a": "s"}, None).content == "n:s"


async def test_a_tool_with_a_timeout_runs_on_a_thread_that_sees_the_per_call_object() -> None:
    rails = Guardrails()
    adopt(rails, "t", ONE, _run, source=1, is_async=False, options={"timeout": 30})
    result = await acall_native(rails.turn(), "ctx-a", "t", {"a": "q"}, None)
    assert result.content == "ctx-a:q"


def test_a_sync_tool_with_a_timeout_sees_the_per_call_object_on_the_sync_path() -> None:
    rails = Guardrails()
    adopt(rails, "t", ONE, _run, source=1, is_async=False, options={"timeout": 30})
    assert call_native(rails.turn(), "ctx-s", "t", {"a": "q"}, None).content == "ctx-s:q"
