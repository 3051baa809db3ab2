"""``--tools SOURCE``: a JSON tools list in any provider's shape, a module, or an MCP server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from guardrails.cli import main
from guardrails.cli._tool_sources import definition_shape, load_tools, tools_from_json
from guardrails.errors import ConfigurationError
from tests._examples import examples

ROOT = Path(__file__).resolve().parents[2]
MAIL = ROOT / "docs" / "policy" / "mail_payments.toml"
SERVER = Path(__file__).resolve().parent / "data" / "mcp_tools_server.py"
SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


@pytest.fixture(autouse=True)
def _examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


def _mail_tools() -> list[Any]:
    from policy_mail_payments import TOOLS

    return list(TOOLS)


def _write(tmp_path: Path, data: Any, name: str = "tools.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("export", ["to_anthropic", "to_openai", "to_mcp", "responses", "listed"])
def test_check_and_explain_read_a_json_export_like_the_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], export: str
) -> None:
    tools = _mail_tools()
    if export == "responses":
        data: Any = [{"type": "function", **t.to_openai()["function"]} for t in tools]
    elif export == "listed":
        data = {"tools": [t.to_mcp() for t in tools], "nextCursor": None}
    else:
        data = [getattr(t, export)() for t in tools]
    path = _write(tmp_path, data)
    assert main(["policy", "check", str(MAIL), "--tools", path]) == 0
    assert "ok (5 parameter rules, 7 tools)" in capsys.readouterr().out
    assert main(["policy", "explain", str(MAIL), "--tools", path]) == 0
    from_json = capsys.readouterr().out
    assert main(["policy", "explain", str(MAIL), "--tools", "policy_mail_payments:TOOLS"]) == 0
    assert from_json == capsys.readouterr().out


def test_each_entry_is_read_in_its_own_shape(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            {"name": "a", "description": "A.", "input_schema": SCHEMA},
            {"type": "function", "function": {"name": "b", "parameters": SCHEMA}},
            {"type": "function", "name": "c", "parameters": SCHEMA},
            {"name": "d", "inputSchema": SCHEMA},
            {"name": "e", "parameters": SCHEMA},
        ],
    )
    tools = load_tools(path)
    assert sorted(tools) == ["a", "b", "c", "d", "e"]
    assert tools["a"].description == "A."
    assert all(set(tool.compiled.properties) == {"to"} for tool in tools.values())


def test_a_tool_read_from_a_definition_never_runs(tmp_path: Path) -> None:
    tool = load_tools(_write(tmp_path, [{"name": "pay", "input_schema": SCHEMA}]))["pay"]
    with pytest.raises(ConfigurationError, match="has no implementation"):
        tool.fn(to="x")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "a"}, "expected a list of tool definitions or an object with a 'tools' list"),
        ([["a"]], "tool [0]: not an object but list"),
        ([{"name": "a", "schema": {}}], "tool [0]: not a tool definition: expected 'name' with"),
        ([{"name": 5, "input_schema": {}}], "tool [0]: not a tool definition"),
        ([{"name": "a", "input_schema": {}, "inputSchema": {}}], "tool [0]: not a tool"),
        ([{"type": "function", "function": {"name": "a", "input_schema": {}}}], "tool [0]: not"),
        ([{"type": "tool", "name": "a"}], "tool [0]: not a tool definition"),
        ([{"name": "a", "input_schema": 3}], "tool [0]: tool 'a': the input schema must be"),
        ([{"name": "a b", "input_schema": {}}], "tool [0]: tool name 'a b': use 1-128"),
        (
            [{"name": "a", "input_schema": {}}, {"name": "a", "inputSchema": {}}],
            "tool [1]: a second tool named 'a'",
        ),
    ],
)
def test_a_mistake_in_a_tools_file_is_one_line_naming_the_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: Any, message: str
) -> None:
    path = _write(tmp_path, data)
    assert main(["policy", "check", str(MAIL), "--tools", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"guardrails policy check: {path}")
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "text", ["{", "[" * 100_000 + "]" * 100_000, '[{"name": "a", "input_schema": NaN'], ids=str
)
def test_a_file_that_is_not_json_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = tmp_path / "tools.json"
    path.write_text(text)
    assert main(["policy", "explain", str(MAIL), "--tools", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"guardrails policy explain: {path}: not JSON (") and err.count("\n") == 1


def test_a_python_file_path_is_refused_naming_the_module_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = str(ROOT / "examples" / "policy_mail_payments.py")
    assert main(["policy", "check", str(MAIL), "--tools", source]) == 2
    assert "name a Python module as MODULE[:NAME] (importable)" in capsys.readouterr().err


def test_a_missing_json_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "absent.json"
    assert main(["policy", "check", str(MAIL), "--tools", str(path)]) == 2
    assert f"{path}: cannot read it (" in capsys.readouterr().err


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_KEYS = st.sampled_from(
    ["name", "type", "function", "input_schema", "inputSchema", "parameters", "description"]
)
_VALUES = _JSON | st.just("function") | st.just("ok_name") | st.just(SCHEMA)


_VALID = [
    {"name": "ok_name", "input_schema": SCHEMA},
    {"name": "ok_name", "inputSchema": SCHEMA},
    {"name": "ok_name", "parameters": SCHEMA},
    {"type": "function", "name": "ok_name", "parameters": SCHEMA},
    {"type": "function", "function": {"name": "ok_name", "parameters": SCHEMA}},
]


@st.composite
def _near_valid(draw: st.DrawFn) -> dict[str, Any]:
    entry = dict(draw(st.sampled_from(_VALID)))
    for key in draw(st.lists(_KEYS, max_size=2)):
        if draw(st.booleans()):
            entry.pop(key, None)
        else:
            entry[key] = draw(_VALUES)
    return entry


@settings(max_examples=examples(300), deadline=None)
@given(
    st.dictionaries(_KEYS, _VALUES | st.dictionaries(_KEYS, _VALUES, max_size=4), max_size=5)
    | _near_valid()
)
def test_any_json_entry_is_a_tool_or_a_configuration_error(entry: dict[str, Any]) -> None:
    """About one generated entry in six is a tool (``event`` counts them)."""
    try:
        definition_shape(entry)
        tools = tools_from_json_entries([entry])
    except ConfigurationError as exc:
        assert "\n" not in str(exc)
        event("refused")
        return
    event("accepted")
    (tool,) = tools.values()
    inner = entry.get("function")
    wrapped = entry.get("type") == "function" and isinstance(inner, dict)
    assert tool.name == (inner if wrapped else entry)["name"]


def tools_from_json_entries(entries: list[Any]) -> dict[str, Any]:
    from guardrails.cli._tool_sources import _build

    return _build("<test>", entries)


def test_a_module_source_still_works_and_names_what_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["policy", "check", str(MAIL), "--tools", "policy_mail_payments:TOOLS"]) == 0
    assert main(["policy", "check", str(MAIL), "--tools", "no_such_module_here"]) == 2
    assert "cannot import 'no_such_module_here'" in capsys.readouterr().err


@pytest.mark.slow
def test_an_mcp_server_is_started_listed_and_stopped() -> None:
    tools = load_tools(f"mcp:{sys.executable} {SERVER}", timeout=60)
    assert sorted(tools) == ["list_contacts", "send_mail"]
    assert set(tools["send_mail"].compiled.properties) == {"body", "subject", "to"}
    assert tools["send_mail"].description == "Send an email."
    assert tools["send_mail"].effect and not tools["list_contacts"].effect  # readOnlyHint


@pytest.mark.slow
def test_check_reads_an_mcp_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('[tools.send_mail.params.to]\nkind = "email"\ngrounded_in = ["user"]\n')
    source = f"mcp:{sys.executable} {SERVER}"
    assert main(["policy", "check", str(policy), "--tools", source, "--tools-timeout", "60"]) == 0
    assert "ok (1 parameter rules, 2 tools)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (f"mcp:{sys.executable} {SERVER} --hang", "did not list its tools within 1 seconds"),
        ("mcp:no-such-command-here", "failed: FileNotFoundError"),
        (f"mcp:{sys.executable} -c pass", "failed: MCPError: Connection closed"),
        ("mcp:", "no command given"),
        ("mcp:'unclosed", "cannot split the command"),
    ],
)
def test_an_mcp_server_that_fails_is_one_line(
    capsys: pytest.CaptureFixture[str], source: str, message: str
) -> None:
    args = ["policy", "explain", str(MAIL), "--tools", source, "--tools-timeout", "1"]
    if "no-such" in source or "-c pass" in source:
        args[-1] = "60"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("value", ["0", "-1", "3600.5", "soon"])
def test_the_timeout_is_positive_and_bounded(value: str) -> None:
    with pytest.raises(SystemExit) as done:
        main(["policy", "check", str(MAIL), "--tools", "x.json", "--tools-timeout", value])
    assert done.value.code == 2


def test_the_timeout_bound_itself_is_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path, [{"name": "a", "input_schema": {}}])
    policy = tmp_path / "p.toml"
    policy.write_text("[tools.a]\nmax_per_turn = 1\n")
    assert main(["policy", "explain", str(policy), "--tools", path, "--tools-timeout", "3600"]) == 0
    assert tools_from_json(path)["a"].name == "a"


@pytest.mark.parametrize(
    ("annotations", "effect"),
    [
        (None, True),
        ({}, True),
        ({"readOnlyHint": False}, True),
        ({"readOnlyHint": "true"}, True),
        ({"readOnlyHint": 1}, True),
        ({"readOnlyHint": True, "destructiveHint": False}, False),
        ({"readOnlyHint": True}, False),
    ],
)
def test_a_definition_has_an_effect_unless_its_annotations_say_read_only(
    annotations: Any, effect: bool
) -> None:
    entry: dict[str, Any] = {"name": "t", "inputSchema": SCHEMA}
    if annotations is not None:
        entry["annotations"] = annotations
    assert tools_from_json_entries([entry])["t"].effect is effect
