"""``guardrails policy init``: a draft that loads and checks against its own tools."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from guardrails.cli import main
from guardrails.cli._tool_sources import _build, load_tools
from guardrails.policy import loads
from guardrails.policy.init import draft, guess_kind
from tests._examples import examples

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "policy.md").read_text()


def _tools(entries: list[Any]) -> dict[str, Any]:
    return _build("<test>", entries)


def _props(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def test_the_draft_in_the_docs_is_what_init_writes(tmp_path: Path) -> None:
    tools_json = re.search(r'TOOLS = """(.*?)"""', DOC, re.S)
    shown = re.search(r"```toml\n(# A draft policy for .*?)```", DOC, re.S)
    assert tools_json is not None and shown is not None
    path = tmp_path / "tools.json"
    path.write_text(tools_json.group(1))
    text = draft(load_tools(str(path)), "tools.json")
    assert text == shown.group(1)
    assert "policy.toml: a draft for 3 tools, 8 lines to review" in DOC
    assert text.count("# review:") == 8
    loads(text, origin="draft.toml").check(load_tools(str(path)))


@pytest.mark.parametrize(
    ("name", "node", "tool_words", "kind"),
    [
        ("contact", {"format": "email"}, set(), "email"),
        ("contact", {"format": "idn-email"}, set(), "email"),
        ("target", {"format": "uri"}, set(), "url"),
        ("server", {"format": "hostname"}, set(), "host"),
        ("target", {"format": "date-time"}, set(), None),
        ("account", {"pattern": "^[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}$"}, set(), "iban"),
        ("number", {"pattern": "^\\+[0-9]{6,15}$"}, set(), "phone"),
        ("who", {"pattern": "^[^@]+@[^@]+$"}, set(), "email"),
        ("where", {"pattern": "^https?://"}, set(), "url"),
        ("code", {"pattern": "^[A-Z]{3}$"}, set(), None),
        ("recipientEmail", {}, set(), "email"),
        ("callback_url", {}, set(), "url"),
        ("mobile", {}, set(), "phone"),
        ("iban", {}, set(), "iban"),
        ("to", {}, {"send", "mail"}, "email"),
        ("to", {}, {"send", "sms"}, None),
        ("tomorrow", {}, {"mail"}, None),
        ("email_subject", {}, set(), None),
        ("emails", {}, set(), None),
        ("subject", {"format": "email"}, set(), "email"),
    ],
)
def test_a_kind_is_guessed_from_format_pattern_or_name(
    name: str, node: dict[str, Any], tool_words: set[str], kind: str | None
) -> None:
    guess = guess_kind(name, node, tool_words)
    assert (guess[0] if guess else None) == kind


def test_free_text_and_amounts_are_guessed_only_on_tools_with_an_effect() -> None:
    schema = _props(body={"type": "string"}, amount={"type": "number"}, note={"type": "integer"})
    text = draft(
        _tools(
            [
                {"name": "send", "input_schema": schema},
                {"name": "read", "input_schema": schema, "annotations": {"readOnlyHint": True}},
            ]
        ),
        "x",
    )
    assert "[tools.send.params.body]\nfree = true  # review:" in text
    assert '[tools.send.params.amount]\ngrounded_in = ["user", "context"]  # review:' in text
    assert "send.params.note" not in text and "tools.read.params" not in text
    assert '# "read" reads only: the default does not apply' in text


_NAMES = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12) | st.sampled_from(
    ["to", "email", "url", "body", "a.b", "*", "x\x7fy", 'q"', "amount", "iban", "phone"]
)
_FORMATS = st.sampled_from(["email", "uri", "hostname", "date", "ipv4", None])
_PATTERNS = st.sampled_from(["^[A-Z]{2}[0-9]{2}.*$", "^\\+[0-9]+$", "@", "://", "a", None])
_NODE = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "number", "integer", "boolean", ["string", "null"]])},
    optional={"format": _FORMATS, "pattern": _PATTERNS},
).map(lambda d: {k: v for k, v in d.items() if v is not None})
_NODES = _NODE | st.builds(lambda items: {"type": "array", "items": items}, _NODE)
_ENTRY = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["send_mail", "pay", "list.contacts", "web-search", "tool"]),
        "input_schema": st.dictionaries(_NAMES, _NODES, max_size=6).map(
            lambda props: {"type": "object", "properties": props}
        ),
    },
    optional={"annotations": st.fixed_dictionaries({"readOnlyHint": st.booleans()})},
)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=4, unique_by=lambda e: e["name"]))
@example(  # a parameter called "defaults": its rule would be named as the safe default's guard
    [
        {
            "name": "send_mail",
            "input_schema": {
                "type": "object",
                "properties": {
                    "0": {"type": "string"},
                    "defaults": {"type": "string", "format": "email"},
                },
            },
        }
    ]
)
def test_every_draft_loads_and_checks_against_its_own_tools(entries: list[Any]) -> None:
    """About two drafts in three hold a parameter table (``event`` counts them)."""
    tools = _tools(entries)
    text = draft(tools, "tools.json")
    event("has a parameter table" if ".params." in text else "defaults only")
    policy = loads(text, origin="draft.toml")
    policy.check(tools)
    assert policy.default_grounded_in


def test_init_writes_a_new_file_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps([{"name": "send_mail", "input_schema": _props(to={"type": "string"})}])
    )
    out = tmp_path / "draft.toml"
    assert main(["policy", "init", "--tools", str(tools), "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"{out}: a draft for 1 tools, 3 lines to review\n"
    assert main(["policy", "check", str(out), "--tools", str(tools)]) == 0
    before = out.read_text()
    assert main(["policy", "init", "--tools", str(tools), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"guardrails policy init: {out}: cannot write it (it exists)\n"
    )
    assert out.read_text() == before
    missing = tmp_path / "no" / "draft.toml"
    assert main(["policy", "init", "--tools", str(tools), "-o", str(missing)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_init_prints_the_draft_without_output_and_refuses_bad_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "pay", "input_schema": _props(iban={"type": "string"})}]))
    assert main(["policy", "init", "--tools", str(tools)]) == 0
    assert '[tools.pay.params.iban]\nkind = "iban"' in capsys.readouterr().out
    tools.write_text("[{}]")
    assert main(["policy", "init", "--tools", str(tools)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"guardrails policy init: {tools}: tool [0]: not a tool definition")
    with pytest.raises(SystemExit):
        main(["policy", "init"])
