"""A hostile model at the tool_call choke-point.

Arguments that are not objects, 10 MB and 100 MB arguments, deep nesting, lone
surrogates, closure-bound identifiers of another tenant, thousands of invented
tool names, and names with path separators, control characters or 10 KB of
text. Each is refused with a closed outcome, recorded, never raised to the
caller, and the model is shown only a fixed sentence.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from guardrails import Guardrails, Outcome, Reason, Tool, ToolResult, TurnContext
from guardrails.testing import MemoryRecorder

SECRET_MARK = "sk-live-7f3a9c"
SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "data": {}},
    "required": ["q"],
    "additionalProperties": False,
}
DECLARED = ("data", "q")
MB = 1_000_000


class Counting:
    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, q: str, data: Any = None) -> str:
        self.runs += 1
        return "done"


class SchemaSpy:
    """Stands in front of a tool's compiled schema and counts what reaches it."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        self.calls += 1
        return getattr(self.compiled, name)


@pytest.fixture
def impl() -> Counting:
    return Counting()


@pytest.fixture
def spy_rails(impl: Counting) -> tuple[Guardrails, SchemaSpy, MemoryRecorder]:
    lookup = Tool("lookup", impl, SCHEMA)
    spy = SchemaSpy(lookup.compiled)
    lookup.compiled = spy  # type: ignore[assignment]
    recorder = MemoryRecorder()
    return Guardrails([lookup], recorder=recorder), spy, recorder


def call(rails: Guardrails, driver: str, args: Any, name: Any = "lookup") -> ToolResult:
    if driver == "sync":
        return rails.call(name, args)
    return asyncio.run(rails.acall(name, args))


# -- arguments that are not an object ----------------------------------------


class ExplodingMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError(SECRET_MARK)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError(SECRET_MARK)

    def __len__(self) -> int:
        return 1


NOT_OBJECTS: dict[str, Any] = {
    "none": None,
    "list": ["q", SECRET_MARK],
    "int": 42,
    "float_nan": float("nan"),
    "bool": True,
    "object": object(),
    "json_list": json.dumps(["q", SECRET_MARK]),
    "json_string": json.dumps(SECRET_MARK),
    "json_null": "null",
    "json_truncated": '{"q": "' + SECRET_MARK,
    "json_nul_byte": "\x00",
    "json_bytes_list": b"[1, 2]",
    "json_invalid_utf8": b'{"q": "\xff\xfe"}',
    "json_bom": "\ufeff{}",
    "exploding_mapping": ExplodingMapping(),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("kind", sorted(NOT_OBJECTS))
def test_arguments_that_are_not_an_object_are_refused_before_schema_work(
    kind: str, driver: str, spy_rails: Any, impl: Counting, ledger: Any
) -> None:
    rails, spy, recorder = spy_rails

    result = call(rails, driver, NOT_OBJECTS[kind])

    assert ledger.check("not_an_object", result, DECLARED) == []
    assert result.outcome is Outcome.INVALID_ARGS
    assert result.reason == Reason.NOT_AN_OBJECT
    assert impl.runs == 0 and spy.calls == 0
    assert recorder.results == [result]


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("digits", [309, 5_000])
def test_an_integer_beyond_a_doubles_range_is_not_json_and_never_runs(
    digits: int, driver: str, spy_rails: Any, impl: Counting
) -> None:
    # docs/tool_call.md: an integer that rounds to infinity as a double is not
    # a finite number: `not_json` on both paths, whatever the schema.
    rails, spy, _ = spy_rails
    result = call(rails, driver, '{"q": ' + "9" * digits + "}")
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.NOT_JSON)
    assert impl.runs == 0 and spy.calls == 0


# -- size ------------------------------------------------------------------------


def oversized(kind: str, size: int) -> Any:
    text = "a" * size
    if kind == "value":
        return {"q": text}
    if kind == "key":
        return {text: 1}
    if kind == "many_keys":
        return {f"{i:08d}{text[:992]}": "v" for i in range(size // 1_000)}
    if kind == "nested_list":
        return {"q": "x", "data": [[text[: size // 8]] * 4] * 2}
    if kind == "json_text":
        return json.dumps({"q": text})
    if kind == "json_bytes":
        return json.dumps({"q": text}).encode()
    raise AssertionError(kind)


SIZE_KINDS = ("value", "key", "many_keys", "nested_list", "json_text", "json_bytes")


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("size", [10 * MB, 100 * MB], ids=["10MB", "100MB"])
@pytest.mark.parametrize("kind", SIZE_KINDS)
def test_oversized_arguments_are_refused_before_schema_work_without_copying_them(
    kind: str, size: int, driver: str, spy_rails: Any, impl: Counting, ledger: Any
) -> None:
    rails, spy, recorder = spy_rails
    args = oversized(kind, size)

    tracemalloc.start()
    try:
        result = call(rails, driver, args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    start = time.perf_counter()
    call(rails, "sync", args)  # timed again without tracemalloc, which slows every allocation
    elapsed = time.perf_counter() - start

    assert ledger.check("oversized", result, DECLARED) == []
    assert result.outcome is Outcome.INVALID_ARGS
    assert result.reason == Reason.TOO_LARGE
    assert impl.runs == 0 and spy.calls == 0
    assert recorder.results[0] == result
    # Nothing the size of the argument was allocated while refusing it.
    assert peak < MB, f"{peak} bytes allocated while refusing {size} bytes"
    ledger.note("oversized", f"refusal_seconds_{kind}", elapsed)
    ledger.note("oversized", "max_peak_bytes", peak)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_argument_just_under_the_limit_still_reaches_the_tool(
    driver: str, impl: Counting, ledger: Any
) -> None:
    rails = Guardrails([Tool("lookup", impl, SCHEMA)], max_argument_chars=MB)

    result = call(rails, driver, {"q": "a" * (MB - 100)})

    assert ledger.check("oversized", result, DECLARED) == []
    assert result.outcome is Outcome.OK and impl.runs == 1


# -- nesting ---------------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("depth", [1_000, 10_000, 100_000])
@pytest.mark.parametrize("form", ["object", "json_text"])
def test_deep_nesting_is_refused_without_recursion(
    form: str, depth: int, driver: str, spy_rails: Any, impl: Counting, ledger: Any
) -> None:
    rails, spy, _ = spy_rails
    args: Any = {"q": "x", "data": nested(depth)}
    if form == "json_text":
        args = '{"q": "x", "data": ' + "[" * depth + "]" * depth + "}"

    result = call(rails, driver, args)

    assert ledger.check("deep_nesting", result, DECLARED) == []
    assert result.outcome is Outcome.INVALID_ARGS
    assert result.reason in {Reason.TOO_LARGE, Reason.NOT_AN_OBJECT}
    assert impl.runs == 0 and spy.calls == 0


def test_deep_nesting_against_a_recursive_schema_does_not_crash_the_process() -> None:
    # The validator is native code: were the nesting to reach it, the process
    # would die with a stack overflow, so this runs in a child process.
    script = textwrap.dedent(
        """
        from guardrails import Guardrails, Tool
        node = {"type": ["object", "array", "string"],
                "additionalProperties": {"$ref": "#/$defs/n"}, "items": {"$ref": "#/$defs/n"}}
        schema = {"type": "object", "properties": {"q": {"$ref": "#/$defs/n"}},
                  "$defs": {"n": node}}
        rails = Guardrails([Tool("t", lambda **kw: "ran", schema)])
        value = "leaf"
        for i in range(200_000):
            value = [value] if i % 2 else {"k": value}
        print(rails.call("t", {"q": value}).outcome)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "invalid_args"


# -- lone surrogates and other odd text ---------------------------------------------

ODD_TEXT: dict[str, tuple[Any, set[Outcome]]] = {
    "surrogate_value": ({"q": "\ud800"}, {Outcome.INVALID_ARGS}),
    "surrogate_pair_halves": ({"q": "\udfff\ud800"}, {Outcome.INVALID_ARGS}),
    "surrogate_key": ({"\ud800": "x", "q": "x"}, {Outcome.INVALID_ARGS}),
    "surrogate_key_json": ('{"\\ud800": "x", "q": "x"}', {Outcome.INVALID_ARGS}),
    "surrogate_value_json": ('{"q": "\\udc00"}', {Outcome.INVALID_ARGS}),
    "surrogate_nested": ({"q": "x", "data": {"\udc80": ["\ud800"]}}, {Outcome.INVALID_ARGS}),
    "nul_in_value": ({"q": "a\x00b"}, {Outcome.OK}),
    "nul_in_key": ({"q\x00": "x"}, {Outcome.INVALID_ARGS}),
    "int_key": ({1: "x", "q": "x"}, {Outcome.INVALID_ARGS}),
    "none_key": ({None: "x", "q": "x"}, {Outcome.INVALID_ARGS}),
    "tuple_key": ({("q",): "x", "q": "x"}, {Outcome.INVALID_ARGS}),
    "bytes_value": ({"q": b"x"}, {Outcome.INVALID_ARGS}),
    "set_value": ({"q": "x", "data": {1, 2}}, {Outcome.INVALID_ARGS}),
    "object_value": ({"q": "x", "data": object()}, {Outcome.INVALID_ARGS}),
    "nan_value": ({"q": "x", "data": float("nan")}, {Outcome.INVALID_ARGS}),
    "huge_int_value": ({"q": "x", "data": 10**400}, {Outcome.OK, Outcome.INVALID_ARGS}),
    "json_nan": ('{"q": "x", "data": NaN}', {Outcome.INVALID_ARGS}),
    "json_duplicate_keys": ('{"q": 1, "q": "x"}', {Outcome.INVALID_ARGS}),
    "lookalike_key": ({"q": "x", "\u0261": 1}, {Outcome.INVALID_ARGS}),
    "zero_width_key": ({"q\u200b": "x"}, {Outcome.INVALID_ARGS}),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("kind", sorted(ODD_TEXT))
def test_odd_keys_and_values_get_a_closed_outcome_and_never_raise(
    kind: str, driver: str, impl: Counting, ledger: Any
) -> None:
    args, allowed = ODD_TEXT[kind]
    recorder = MemoryRecorder()
    rails = Guardrails([Tool("lookup", impl, SCHEMA)], recorder=recorder)

    result = call(rails, driver, args)

    assert ledger.check("odd_text", result, DECLARED) == []
    assert result.outcome in allowed
    assert impl.runs == (1 if result.outcome is Outcome.OK else 0)
    assert recorder.results == [result]


# -- closure-bound identifiers of another tenant ------------------------------------


def test_bound_identifiers_of_another_tenant_are_all_refused_and_recorded(
    ledger: Any,
) -> None:
    ran: list[tuple[str, str]] = []

    def transfer(account_id: str, tenant_id: str, amount: float) -> str:
        ran.append((account_id, tenant_id))
        return "sent"

    schema = {
        "type": "object",
        "properties": {
            "account_id": {"type": "string"},
            "tenant_id": {"type": "string"},
            "amount": {"type": "number"},
        },
        "required": ["account_id", "tenant_id", "amount"],
        "additionalProperties": False,
    }
    tool = Tool(
        "transfer",
        transfer,
        schema,
        bind={"account_id": "account_id", "tenant_id": "tenant"},
        effect=True,
    )
    recorder = MemoryRecorder()
    rails = Guardrails([tool], recorder=recorder)
    turn = rails.turn(TurnContext(tenant="acme", values={"account_id": "acme-001"}))

    attempts: list[Any] = []
    for i in range(500):
        other = f"globex-{i:04d}-{SECRET_MARK}"
        attempts += [
            {"account_id": other, "amount": 5},
            {"tenant_id": other, "amount": 5},
            {"account_id": other, "tenant_id": other, "amount": 5},
            json.dumps({"account_id": other, "amount": 5}),
        ]
    attempts += [{"account_id": None, "amount": 5}, {"tenant_id": "", "amount": 5}]
    results = [turn.call("transfer", a) for a in attempts]

    for result in results:
        assert ledger.check("bound_identifiers", result, ("amount",)) == []
        assert result.outcome is Outcome.INVALID_ARGS
        assert result.reason == Reason.BOUND_ARGUMENT_SUPPLIED
        assert "bound_argument_supplied" in result.flags
    assert ran == []
    assert len(recorder.results) == len(attempts)
    ledger.add("bound_identifiers", faults_injected=len(attempts), faults_counted=len(results))

    # The tool still runs with the turn's own identifiers.
    assert turn.call("transfer", {"amount": 5}).outcome is Outcome.OK
    assert ran == [("acme-001", "acme")]


# -- invented and hostile tool names ------------------------------------------------


def test_ten_thousand_invented_tool_names_are_unavailable_and_bounded(
    impl: Counting, ledger: Any
) -> None:
    recorder = MemoryRecorder()
    rails = Guardrails([Tool("lookup", impl, SCHEMA)], recorder=recorder)
    turn = rails.turn()

    results = [turn.call(f"invented_{i}_{'x' * (i % 300)}", {"q": "x"}) for i in range(10_000)]

    for result in results:
        assert ledger.check("invented_names", result, DECLARED) == []
        assert result.outcome is Outcome.UNAVAILABLE
        assert result.reason == Reason.UNKNOWN_TOOL
        assert result.known_tool is False
        assert len(result.tool) <= 200
    assert impl.runs == 0
    assert len(recorder.results) == 10_000


HOSTILE_NAMES: dict[str, Any] = {
    "path_traversal": "../../etc/passwd",
    "path_separator": "lookup/../lookup",
    "backslash": "..\\lookup",
    "absolute_path": "/lookup",
    "url": "file:///etc/shadow",
    "nul": "lookup\x00",
    "newline": "lookup\nlookup",
    "ansi_escape": "\x1b[31mlookup\x1b[0m",
    "zero_width": "look\u200bup",
    "lookalike": "l\u043eokup",
    "fullwidth": "\uff4cookup",
    "trailing_space": "lookup ",
    "upper_case": "LOOKUP",
    "lone_surrogate": "lookup\ud800",
    "ten_kb": "l" * 10_000,
    "ten_mb": "l" * (10 * MB),
    "empty": "",
    "none": None,
    "int": 7,
    "list": ["lookup"],
    "dict": {"name": "lookup"},
    "bytes": b"lookup",
    "str_subclass": type("Name", (str,), {})("lookup"),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("kind", sorted(HOSTILE_NAMES))
def test_hostile_tool_names_are_unavailable_and_never_run_a_tool(
    kind: str, driver: str, impl: Counting, ledger: Any
) -> None:
    recorder = MemoryRecorder()
    rails = Guardrails([Tool("lookup", impl, SCHEMA)], recorder=recorder)

    result = call(rails, driver, {"q": "x"}, name=HOSTILE_NAMES[kind])

    assert ledger.check("hostile_names", result, DECLARED) == []
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.reason == Reason.UNKNOWN_TOOL
    assert impl.runs == 0
    assert isinstance(result.tool, str) and len(result.tool) <= 200
    assert recorder.results == [result]


def test_tool_not_offered_in_the_turn_is_unavailable_whatever_the_arguments(
    impl: Counting, ledger: Any
) -> None:
    rails = Guardrails([Tool("lookup", impl, SCHEMA), Tool("other", impl, SCHEMA)])
    turn = rails.turn(offered=["other"])

    for args in ({"q": "x"}, {"q": "a" * (10 * MB)}, None, '{"q": 1}'):
        result = turn.call("lookup", args)
        assert ledger.check("hostile_names", result, DECLARED) == []
        assert result.outcome is Outcome.UNAVAILABLE and result.reason == Reason.NOT_OFFERED
    assert impl.runs == 0


@pytest.mark.parametrize("items", [10_000, 150_000])
def test_many_invalid_items_under_the_size_limit_name_the_parameter(
    items: int, ledger: Any
) -> None:
    # Every item is an error, and every error is collected: the cost of a
    # refusal grows with the number of errors a model can pack under the limit.
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
    }
    ran: list[Any] = []
    rails = Guardrails([Tool("tag", lambda tags: ran.append(tags), schema)])
    args = json.dumps({"tags": [0] * items})

    start = time.perf_counter()
    result = rails.call("tag", args)
    elapsed = time.perf_counter() - start

    ledger.note("oversized", f"refusal_seconds_{items}_invalid_items", elapsed)
    assert ledger.check("oversized", result, ("tags",)) == []
    assert result.outcome is Outcome.INVALID_ARGS and result.params == ("tags",)
    assert ran == []
