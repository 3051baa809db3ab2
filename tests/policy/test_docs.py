"""docs/policy.md says what the code does: its tables and examples are checked here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from guardrails import tool
from guardrails.policy import Check, PolicyError, loads
from guardrails.policy.loader import _PARAM_KEYS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "policy.md").read_text()


def test_every_reason_is_in_the_reasons_table() -> None:
    table = set(re.findall(r"^\| `([a-z_]+)` \| the|^\| `([a-z_]+)` \|", DOC, re.M))
    listed = {a or b for a, b in table}
    assert {c.value for c in Check} <= listed
    for extra in ("intent_not_mentioned", "no_user_input", "ceiling_reached"):
        assert f"`{extra}`" in DOC


def test_every_parameter_key_is_documented() -> None:
    rows = re.findall(r"^\| `([a-z_]+)`(?:, `([a-z_]+)`)? \| ", DOC, re.M)
    documented = {name for row in rows for name in row if name}
    assert set(_PARAM_KEYS) <= documented


def test_the_worked_example_in_the_docs_is_the_file() -> None:
    blocks = re.findall(r"```toml\n(.*?)```", DOC, re.S)
    path = ROOT / "docs" / "policy" / "mail_payments.toml"
    body = "".join(path.read_text().splitlines(keepends=True)[1:])  # without its title comment
    assert body in blocks
    assert f"is {len(path.read_text().splitlines())} lines" in DOC


@tool
def pay(iban: str, amount: float) -> str:
    """Pay."""
    return "paid"


@pytest.mark.parametrize(
    "text",
    [
        "[tools.pay.params.iban]\ngrounded_in = ['user', 'payees']\n",
        "[tools.pay.params.amount]\nkind = 'email'\n",
        "[tools.pya.params.iban]\nkind = 'iban'\n",
        "[tools.pay.params.ibn]\nkind = 'iban'\n",
    ],
)
def test_the_error_messages_shown_are_the_real_ones(text: str) -> None:
    with pytest.raises(PolicyError) as info:
        loads(text, origin="policy.toml").check({"pay": pay})
    assert str(info.value) in DOC


def test_the_guard_names_shown_are_the_real_ones() -> None:
    for name in (
        "`policy:TOOL.PATH`",
        "`policy:TOOL.intent`",
        "`policy:TOOL.defaults`",
        "`policy:TOOL.ceiling`",
        "`policy:intent`",
    ):
        assert name in DOC


@tool(effect=True)
def send_mail(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return "sent"


@tool
def search_web(query: str) -> str:
    """Search the web."""
    return "results"


@pytest.mark.parametrize(
    "text",
    [
        "[defaults]\ngrounded_in = []\n",
        "[tools.send_mail.params.body]\nfree = true\n",
        "[defaults]\ngrounded_in = ['user']\n[tools.search_web.params.query]\nfree = true\n",
        "[defaults]\ngrounded_in = ['user']\n[tools.send_mail.params.body]\nfree = true\n"
        "pattern = 'x'\n",
    ],
)
def test_the_safe_default_errors_shown_are_the_real_ones(text: str) -> None:
    with pytest.raises(PolicyError) as info:
        loads(text, origin="policy.toml").check({"send_mail": send_mail, "search_web": search_web})
    assert f"\n{info.value}\n" in DOC


@pytest.mark.parametrize(
    ("text", "tools"),
    [
        ("[tools.send_mail.params.body]\nembedded = ['url']\nkind = 'email'\n", {}),
        ("[tools.send_mail.params.body]\nembedded = ['link']\n", {}),
        ("[tools.pay.params.amount]\nembedded = ['url']\n", {"pay": pay}),
    ],
)
def test_the_embedded_errors_shown_are_the_real_ones(text: str, tools: dict[str, Any]) -> None:
    with pytest.raises(PolicyError) as info:
        loads(text, origin="policy.toml").check(tools)
    assert f"\n{info.value}\n" in DOC
