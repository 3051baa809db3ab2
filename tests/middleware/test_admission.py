"""Admission: one canonical JSON value, strict JSON text, undeclared parameters, call ids.

Each promise of docs/tool_call.md "Admission" is attacked here; the mixed
hostile suite is tests/reliability/test_boundary_fuzz.py.
"""

from __future__ import annotations

import copy
import json
import math
import operator
from collections import OrderedDict
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.server import MCPServer

from guardrails import Guardrails, Invocation, Outcome, Reason, Tool, Verdict, guard, tool
from guardrails.errors import ConfigurationError
from guardrails.integrations.mcp import tools_from_server
from guardrails.integrations.openai import load_tools
from guardrails.middleware.admission import MAX_CALL_ID, canonical, entry_call_id
from guardrails.verdicts import model_sentence

OPEN = {"type": "object", "properties": {"q": {"type": "string"}, "data": {}}}
UNDECLARED = "The arguments were not accepted. Send only the parameters that the tool declares."


class Runs:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> str:
        self.received.append(copy.deepcopy(kwargs))
        return "ran"


def open_tool(runs: Runs, **options: Any) -> Tool:
    return Tool("t", runs, OPEN, **options)


# -- the canonical value ------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=15,
)


@pytest.mark.slow
@given(st.dictionaries(st.text(max_size=5), json_values))
def test_a_json_value_is_admitted_unchanged_and_copied(value: dict[str, Any]) -> None:
    admitted = canonical(value, 1_000_000)
    assert isinstance(admitted, tuple)
    args, view = admitted
    assert args == value and json.dumps(args) == json.dumps(value)
    # A flat value has no separate view (a proxy of the value is read-only at every depth).
    assert view is None if all(type(v) not in (dict, list) for v in value.values()) else True
    assert dict(view if view is not None else args) == value
    for key, item in value.items():
        if isinstance(item, dict | list):
            assert args[key] is not item  # the tool's copy shares nothing with the caller


@pytest.mark.slow
@given(st.dictionaries(st.text(max_size=5), json_values).map(json.dumps))
def test_json_text_gives_the_same_value_as_json_loads(text: str) -> None:
    admitted = canonical(text, 1_000_000)
    assert isinstance(admitted, tuple) and admitted[0] == json.loads(text)


class Text(str):
    pass


class Number(int):
    pass


NOT_JSON: dict[str, Any] = {
    "object": object(),
    "set": {1, 2},
    "frozenset": frozenset(),
    "bytes": b"x",
    "tuple": (1, 2),
    "decimal": Decimal("1.5"),
    "generator": (i for i in range(2)),
    "nan": math.nan,
    "infinity": math.inf,
    "minus_infinity": -math.inf,
    "str_subclass": Text("x"),
    "int_subclass": Number(1),
    "complex": 1j,
    "lone_surrogate": "\ud800",
    "nested_nan": {"a": [1, math.nan]},
    "nested_object": [[object()]],
    "function": len,
}


@pytest.mark.parametrize("kind", sorted(NOT_JSON))
@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_a_value_outside_json_is_not_json_and_the_tool_does_not_run(
    kind: str, driver: str
) -> None:
    runs = Runs()
    rails = Guardrails([open_tool(runs)])
    arguments = {"q": "x", "data": NOT_JSON[kind]}
    result = rails.call("t", arguments) if driver == "sync" else await rails.acall("t", arguments)
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.NOT_JSON)
    assert result.content == model_sentence(Outcome.INVALID_ARGS)
    assert runs.received == []


@pytest.mark.parametrize(
    "text",
    [
        '{"q": "x", "data": NaN}',
        '{"q": "x", "data": Infinity}',
        '{"q": "x", "data": [-Infinity]}',
        '{"q": "x", "q": "y"}',
        '{"q": "x", "data": {"a": 1, "a": 1}}',
        '{"q": "\\ud800"}',
        '{"q": "x", "data": {"\\udfff": 1}}',
        b'{"q": "x", "data": NaN}',
    ],
)
def test_json_text_outside_i_json_is_not_json(text: str | bytes) -> None:
    runs = Runs()
    result = Guardrails([open_tool(runs)]).call("t", text)
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.NOT_JSON)
    assert runs.received == []


def test_a_surrogate_pair_written_as_escapes_is_one_character_and_admitted() -> None:
    runs = Runs()
    result = Guardrails([open_tool(runs)]).call("t", '{"q": "\\ud83d\\ude00"}')
    assert result.outcome is Outcome.OK and runs.received == [{"q": "\U0001f600"}]


def test_dict_and_list_subclasses_are_read_without_their_methods() -> None:
    class Loud(dict):  # type: ignore[type-arg]
        def items(self) -> Any:
            raise RuntimeError("items")

        def __iter__(self) -> Any:
            raise RuntimeError("iter")

    class LoudList(list):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            raise RuntimeError("iter")

    runs = Runs()
    rails = Guardrails([open_tool(runs)])
    result = rails.call("t", Loud(q="x", data=LoudList([1, OrderedDict(a=2)])))
    assert result.outcome is Outcome.OK
    assert runs.received == [{"q": "x", "data": [1, {"a": 2}]}]
    assert [type(v) for v in runs.received[0].values()] == [str, list]


class Hostile(str):
    """Text whose every method that the pipeline must not call raises."""

    armed = False

    def _boom(self, *args: Any) -> Any:
        if Hostile.armed:
            raise RuntimeError("sk-live-hostile")
        return getattr(str, self._name)(self, *args)  # pragma: no cover

    def __len__(self) -> int:
        if Hostile.armed:
            raise RuntimeError("sk-live-hostile")
        return str.__len__(self)

    def __hash__(self) -> int:
        if Hostile.armed:
            raise RuntimeError("sk-live-hostile")
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        if Hostile.armed:
            raise RuntimeError("sk-live-hostile")
        return str.__eq__(self, other)

    def __str__(self) -> str:
        raise RuntimeError("sk-live-hostile")

    def __iter__(self) -> Any:
        raise RuntimeError("sk-live-hostile")


@pytest.fixture
def hostile() -> Any:
    Hostile.armed = False
    yield Hostile
    Hostile.armed = False


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_hostile_text_as_key_value_json_name_or_call_id_gives_a_closed_outcome(
    hostile: Any, driver: str
) -> None:
    runs = Runs()
    rails = Guardrails([open_tool(runs)])
    cases = [
        ({hostile("q"): "x"}, "t", None, Reason.NOT_JSON),
        ({"q": hostile("x")}, "t", None, Reason.NOT_JSON),
        ({"q": "x", "data": [hostile("x")]}, "t", None, Reason.NOT_JSON),
        (hostile('{"q": "x"}'), "t", None, Reason.NOT_AN_OBJECT),
        ({"q": "x"}, hostile("t"), None, Reason.UNKNOWN_TOOL),
        ({"q": "x"}, "t", hostile("id-1"), None),
    ]
    hostile.armed = True
    for arguments, name, call_id, reason in cases:
        if driver == "sync":
            result = rails.call(name, arguments, call_id=call_id)
        else:
            result = await rails.acall(name, arguments, call_id=call_id)
        assert result.reason == reason
        assert "sk-live" not in result.content and type(result.call_id) is str
    assert len(runs.received) == 1  # only the call whose arguments were plain


# -- guards read, the tool receives what was validated ---------------------------------


def test_guards_see_the_arguments_read_only_at_every_depth_and_the_tool_gets_the_original() -> None:
    attempts: list[str] = []

    def mutate(call: Invocation) -> Verdict:
        args: Any = call.arguments
        for name, attempt in {
            "top": lambda: operator.setitem(args, "q", "y"),
            "list": lambda: args["data"]["items"].append("x"),
            "list_item": lambda: args["data"]["items"].__setitem__(0, "z"),
            "dict": lambda: args["data"].__setitem__("new", 1),
            "nested_dict": lambda: args["data"]["items"][1].update(k="changed"),
            "pop": lambda: args["data"].pop("items"),
            "extend": lambda: args["data"]["items"].__iadd__(["x"]),
        }.items():
            try:
                attempt()
            except TypeError:
                attempts.append(name)
        return Verdict.PASS

    runs = Runs()
    rails = Guardrails([open_tool(runs)], [mutate])
    data = {"items": ["a", {"k": "v"}]}
    result = rails.call("t", {"q": "x", "data": data})
    assert result.outcome is Outcome.OK
    assert sorted(attempts) == sorted(
        ["top", "list", "list_item", "dict", "nested_dict", "pop", "extend"]
    )
    assert runs.received == [{"q": "x", "data": {"items": ["a", {"k": "v"}]}}]


def test_a_guard_that_mutates_through_a_back_door_changes_only_its_own_view() -> None:
    def sneak(call: Invocation) -> Verdict:
        list.append(call.arguments["data"], "x")  # bypasses the read-only methods
        dict.__setitem__(call.arguments["data"][0], "k", "changed")
        return Verdict.PASS

    runs = Runs()
    result = Guardrails([open_tool(runs)], [sneak]).call("t", {"q": "x", "data": [{"k": "v"}]})
    assert result.outcome is Outcome.OK
    assert runs.received == [{"q": "x", "data": [{"k": "v"}]}]


def test_a_guard_that_fails_while_mutating_is_an_escape_and_fail_closed_stops() -> None:
    @guard(fail_closed=True)
    def mutate(call: Invocation) -> Verdict:
        call.arguments["data"].append(1)
        return Verdict.PASS  # pragma: no cover

    runs = Runs()
    result = Guardrails([open_tool(runs)], [mutate]).call("t", {"q": "x", "data": []})
    assert result.outcome is Outcome.UNAVAILABLE
    assert [(e.guard, e.reason) for e in result.escapes] == [("mutate", "raised")]
    assert runs.received == []


def test_the_view_copies_to_plain_containers_and_serialises_as_json() -> None:
    seen: list[Any] = []

    def look(call: Invocation) -> Verdict:
        data = call.arguments["data"]
        seen.append((json.dumps(data), copy.deepcopy(data), isinstance(data, dict)))
        return Verdict.PASS

    Guardrails([open_tool(Runs())], [look]).call("t", {"q": "x", "data": {"a": [1, {"b": 2}]}})
    text, copied, is_dict = seen[0]
    assert json.loads(text) == {"a": [1, {"b": 2}]} and is_dict
    copied["a"].append(3)  # a copy is an ordinary container
    assert type(copied) is dict and type(copied["a"]) is list


# -- undeclared parameters ------------------------------------------------------------


def read_file(file_path: str) -> str:
    return f"read {file_path}"


DEFINITION = {
    "name": "read_file",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}


@pytest.mark.parametrize(
    "make",
    [
        lambda **o: Tool.from_definition(DEFINITION, read_file, **o),
        lambda **o: load_tools(
            [{"type": "function", "function": {**DEFINITION, "parameters": OPEN_FILE}}],
            {"read_file": read_file},
            **o,
        )[0],
        lambda **o: tool(**o)(read_file),
    ],
    ids=["from_definition", "load_tools", "tool"],
)
def test_undeclared_arguments_are_refused_by_default_with_the_fixed_sentence(make: Any) -> None:
    rails = Guardrails([make()])
    result = rails.call("read_file", {"file_path": "a", "zz": 1})
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.UNDECLARED_PARAMETER)
    assert result.content == UNDECLARED
    assert "zz" not in result.content
    dropped = Guardrails([make(extra="drop")]).call("read_file", {"file_path": "a", "zz": 1})
    assert (dropped.outcome, dropped.content) == (Outcome.OK, "read a")


OPEN_FILE = DEFINITION["input_schema"]


def test_undeclared_and_invalid_arguments_name_the_declared_one_and_keep_the_sentence() -> None:
    rails = Guardrails([Tool.from_definition(DEFINITION, read_file)])
    result = rails.call("read_file", {"file_path": 3, "zz": 1})
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.SCHEMA)
    assert result.content == model_sentence(Outcome.INVALID_ARGS, ["file_path"], undeclared=True)


def test_an_implementation_that_takes_kwargs_allows_undeclared_arguments_by_default() -> None:
    runs = Runs()
    assert open_tool(runs).extra == "allow"
    result = Guardrails([open_tool(runs)]).call("t", {"q": "x", "zz": 1})
    assert result.outcome is Outcome.OK and runs.received == [{"q": "x", "zz": 1}]
    refused = Guardrails([open_tool(runs, extra="reject")]).call("t", {"q": "x", "zz": 1})
    assert refused.reason == Reason.UNDECLARED_PARAMETER


def test_extra_allow_passes_undeclared_arguments_to_the_implementation() -> None:
    def f(file_path: str, **rest: Any) -> str:
        return ",".join(sorted(rest))

    definition = {**DEFINITION, "name": "f"}
    assert (
        Guardrails([Tool.from_definition(definition, f)])
        .call("f", {"file_path": "a", "zz": 1})
        .content
        == "zz"
    )
    result = Guardrails([Tool.from_definition(DEFINITION, read_file, extra="allow")]).call(
        "read_file", {"file_path": "a", "zz": 1}
    )
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.RAISED)


def test_an_unknown_extra_mode_is_a_configuration_error_naming_the_tool() -> None:
    with pytest.raises(ConfigurationError, match="read_file"):
        Tool.from_definition(DEFINITION, read_file, extra="ignore")


async def test_mcp_server_tools_refuse_undeclared_arguments() -> None:
    app = MCPServer("files")

    @app.tool()
    def read(file_path: str) -> str:
        return f"read {file_path}"

    tools = await tools_from_server(app)
    rails = Guardrails(tools)
    result = await rails.acall("read", {"file_path": "a", "zz": 1})
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.UNDECLARED_PARAMETER)
    assert (await rails.acall("read", {"file_path": "a"})).outcome is Outcome.OK
    allowing = await tools_from_server(app, {"read": {"extra": "drop"}})
    dropped = await Guardrails(allowing).acall("read", {"file_path": "a", "zz": 1})
    assert dropped.outcome is Outcome.OK


# -- call ids ----------------------------------------------------------------------------


def test_call_ids_are_bounded_escaped_and_empty_counts_as_none() -> None:
    rails = Guardrails([open_tool(Runs())])
    assert rails.call("t", {"q": "x"}, call_id="toolu_01").call_id == "toolu_01"
    for missing in ("", None, 7, b"id"):
        generated = rails.call("t", {"q": "x"}, call_id=missing).call_id  # type: ignore[arg-type]
        assert generated.startswith("gr_")
    long = rails.call("t", {"q": "x"}, call_id="x" * 10_000).call_id
    assert long == "x" * MAX_CALL_ID
    odd = rails.call("t", {"q": "x"}, call_id="a\ud800b\x00c").call_id
    assert odd == "a\\ud800b\\x00c" and odd.encode("utf-8")


@given(st.text(max_size=300))
def test_every_call_id_is_printable_bounded_and_deterministic(call_id: str) -> None:
    bounded = entry_call_id(call_id, lambda: "generated")
    assert 0 < len(bounded) <= MAX_CALL_ID and bounded.isprintable()
    assert bounded == entry_call_id(call_id, lambda: "generated")
    if call_id and len(call_id) <= MAX_CALL_ID and call_id.isprintable():
        assert bounded == call_id


def test_the_public_strings_of_admission_are_the_ones_in_the_docs() -> None:
    from pathlib import Path

    from guardrails.middleware.tool_call import FLAG_LATE_RESULT

    page = Path(__file__).resolve().parents[2] / "docs" / "tool_call.md"
    text = " ".join(page.read_text().split())
    for reason in (
        Reason.NOT_JSON,
        Reason.NOT_AN_OBJECT,
        Reason.UNDECLARED_PARAMETER,
        Reason.INTERRUPTED,
        Reason.BINDING_UNRESOLVED,
    ):
        assert f"`{reason.value}`" in text
    assert f'sentence "{UNDECLARED}"' in text
    assert model_sentence(Outcome.INVALID_ARGS, undeclared=True) == UNDECLARED
    assert f"`{FLAG_LATE_RESULT}`" in text and FLAG_LATE_RESULT == "late_result"
    assert f"1 to {MAX_CALL_ID} characters" in text
