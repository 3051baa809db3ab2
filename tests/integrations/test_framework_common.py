"""The helpers the framework adapters share (``integrations._common``)."""

from __future__ import annotations

import functools
import gc
import threading
from typing import Any

import pytest

from guardrails import (
    ConfigurationError,
    DuplicateNameError,
    Guardrails,
    Outcome,
    Tool,
    TurnContext,
    UsageError,
    tool,
)
from guardrails.integrations._common import Runs, context_of
from guardrails.integrations._framework_tools import (
    FRAMEWORK_CHECK,
    SOURCE,
    Clash,
    acall_native,
    arefused,
    call_native,
    extra_of,
    native_tool,
    refused,
    register,
    relax_required,
    watch,
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


def adopt(
    rails: Guardrails,
    name: str,
    schema: dict[str, Any],
    run: Any,
    *,
    source: Any,
    is_async: bool,
    direct: Any = None,
    options: dict[str, Any] | None = None,
) -> Tool:
    """A framework tool run by ``run``, registered as the framework adapters do."""
    build = functools.partial(native_tool, name, schema, run, is_async=is_async, direct=direct)
    return register(rails, name, build, options, source=source, clash=Clash.REFUSE)


def test_refuse_registers_once_per_source_and_refuses_another_of_the_same_name() -> None:
    rails = Guardrails()
    source = object()
    made = adopt(rails, "t", SCHEMA, _run, source=source, is_async=False)
    assert adopt(rails, "t", SCHEMA, _run, source=source, is_async=False) is made
    assert rails.tools["t"] is made and made.options[SOURCE] is source
    with pytest.raises(DuplicateNameError, match="'t'"):
        adopt(rails, "t", SCHEMA, _run, source=object(), is_async=False)


def test_refuse_refuses_the_applications_own_tool_of_the_same_name() -> None:
    @tool
    def t(a: str) -> str:
        return a

    rails = Guardrails([t])
    with pytest.raises(DuplicateNameError, match="'t'"):
        adopt(rails, "t", ONE, _run, source=object(), is_async=False)
    assert rails.tools["t"] is t


def _built(calls: list[dict[str, Any]]) -> Any:
    def build(**options: Any) -> Tool:
        calls.append(options)
        return Tool("t", lambda a: a, ONE, **options)

    return build


def test_application_wins_keeps_the_engines_tool_and_builds_nothing() -> None:
    @tool
    def t(a: str) -> str:
        return a

    rails = Guardrails([t])
    calls: list[dict[str, Any]] = []
    kept = register(rails, "t", _built(calls), None, source=object(), clash=Clash.APPLICATION_WINS)
    assert kept is t and calls == []


def test_application_wins_refuses_options_for_a_tool_made_elsewhere() -> None:
    rails = Guardrails()
    source = object()
    register(rails, "t", _built([]), {}, source=source, clash=Clash.APPLICATION_WINS)
    for options in ({}, {"timeout": 5}):
        with pytest.raises(ConfigurationError, match="'t' is already registered"):
            register(rails, "t", _built([]), options, source=source, clash=Clash.APPLICATION_WINS)


def test_the_options_reach_build_with_the_source_added_to_the_tools_own() -> None:
    rails = Guardrails()
    calls: list[dict[str, Any]] = []
    source = object()
    given = {"timeout": 5, "options": {"snapshot": False}}
    made = register(rails, "t", _built(calls), given, source=source, clash=Clash.REFUSE)
    assert calls == [{"timeout": 5, "options": {"snapshot": False, SOURCE: source}}]
    assert made.timeout == 5 and dict(made.options) == {"snapshot": False, SOURCE: source}
    assert given == {"timeout": 5, "options": {"snapshot": False}}  # the caller's, unchanged


@pytest.mark.parametrize("clash", list(Clash))
def test_threads_registering_one_framework_tool_at_once_get_the_same_tool(clash: Clash) -> None:
    rails = Guardrails()
    source = object()
    calls: list[dict[str, Any]] = []
    start = threading.Barrier(8)
    got: list[Tool] = []

    def one() -> None:
        start.wait()
        got.append(register(rails, "t", _built(calls), None, source=source, clash=clash))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and all(g is rails.tools["t"] for g in got)
    assert len(calls) == 1


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


@pytest.mark.parametrize(
    ("opened", "extra"),
    [
        (None, "reject"),
        (False, "reject"),
        (True, "allow"),
        ({}, "allow"),
        ({"type": "string"}, "allow"),
    ],
)
def test_a_framework_tool_refuses_undeclared_arguments_unless_its_schema_opens_them(
    opened: Any, extra: str
) -> None:
    schema = dict(ONE) if opened is None else {**ONE, "additionalProperties": opened}
    ran: list[dict[str, Any]] = []

    def run(native: Any, arguments: dict[str, Any]) -> Any:
        ran.append(arguments)
        return "ran"

    assert extra_of(schema) == extra
    rails = Guardrails()
    made = adopt(rails, "t", schema, run, source=1, is_async=False)
    assert made.extra == extra
    result = call_native(rails.turn(), "n", "t", {"a": "x", "from_account": "acc-666"}, None)
    if extra == "reject":
        assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, "undeclared_parameter")
        assert "from_account" not in result.content and ran == []
    else:
        assert result.outcome is Outcome.OK and ran == [{"a": "x", "from_account": "acc-666"}]


def test_an_extra_mode_given_for_a_framework_tool_is_kept() -> None:
    rails = Guardrails()
    made = adopt(rails, "t", ONE, _run, source=1, is_async=False, options={"extra": "drop"})
    assert made.extra == "drop"
    assert call_native(rails.turn(), "n", "t", {"a": "x", "z": 1}, None).content == "n:x"


@pytest.mark.parametrize("schema", [None, [], "open", {"additionalProperties": "yes"}])
def test_extra_of_a_schema_that_is_not_an_object_schema(schema: Any) -> None:
    # Not a mapping: nothing is opened. A non-boolean, non-schema value is not ``false``:
    # the schema's own compilation judges it.
    assert extra_of(schema) == ("allow" if isinstance(schema, dict) else "reject")


def test_the_undeclared_sentence_the_framework_tests_expect_is_the_documented_one() -> None:
    from pathlib import Path

    from tests.integrations._frameworks import UNDECLARED_SENTENCE

    page = (Path(__file__).resolve().parents[2] / "docs/tool_call.md").read_text()
    assert f'the fixed sentence "{UNDECLARED_SENTENCE}"' in page


async def test_a_call_the_frameworks_own_check_refused_is_audited_and_never_runs() -> None:
    ran: list[dict[str, Any]] = []

    @tool
    def t(a: str) -> str:
        ran.append({"a": a})
        return a

    rails = Guardrails([t])
    watch(rails)
    watch(rails)  # once
    assert list(rails.guards) == [FRAMEWORK_CHECK]
    turn = rails.turn()
    for result in (
        refused(turn, "t", {"a": "x"}, "r1"),
        await arefused(turn, "t", {"a": "y"}, "r2"),
    ):
        assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "guard")
        assert [(v.guard, v.verdict) for v in result.verdicts] == [(FRAMEWORK_CHECK, "reject")]
    # Earlier steps still decide first; an ordinary call passes the check.
    assert refused(turn, "nope", {}, "r3").reason == "unknown_tool"
    assert refused(turn, "t", {}, "r4").outcome is Outcome.INVALID_ARGS
    assert ran == [] and turn.call("t", {"a": "z"}).outcome is Outcome.OK


def test_a_guard_of_the_applications_named_framework_check_is_refused() -> None:
    from guardrails import Verdict, guard

    @guard(name=FRAMEWORK_CHECK)
    def mine(invocation: Any) -> Verdict:
        return Verdict.PASS

    with pytest.raises(DuplicateNameError, match=FRAMEWORK_CHECK):
        watch(Guardrails(guards=[mine]))


def test_framework_check_covers_only_the_tools_adapters_registered_or_refused() -> None:
    @tool
    def direct(a: str) -> str:
        return a

    rails = Guardrails([direct])
    adopt(rails, "early", ONE, _run, source=1, is_async=False)
    watch(rails)
    adopt(rails, "late", ONE, _run, source=2, is_async=False)  # after watch: covered too
    assert rails.guards[FRAMEWORK_CHECK].tools == frozenset({"early", "late"})
    # A direct call of the application's own tool does not evaluate it ...
    turn = rails.turn()
    assert turn.call("direct", {"a": "x"}).verdicts == ()
    # ... until a framework's check refuses a call of it.
    assert refused(turn, "direct", {"a": "x"}, None).reason == "guard"
    assert rails.guards[FRAMEWORK_CHECK].tools == frozenset({"early", "late", "direct"})


def test_threads_registering_framework_tools_at_once_are_all_covered() -> None:
    rails = Guardrails()
    watch(rails)
    start = threading.Barrier(8)

    def one(i: int) -> None:
        start.wait()
        adopt(rails, f"t{i}", ONE, _run, source=i, is_async=False)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert rails.guards[FRAMEWORK_CHECK].tools == frozenset(f"t{i}" for i in range(8))
    turn = rails.turn()
    assert all(refused(turn, f"t{i}", {"a": "x"}, None).reason == "guard" for i in range(8))
