"""The policy file: every mistake is one error naming the file, the table and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guardrails import Guardrails, tool
from guardrails.policy import Param, Policy, PolicyError, load, loads


@tool
def pay(iban: str, amount: float, memo: str | None = None) -> str:
    """Pay."""
    return "paid"


@tool
def read_mail() -> str:
    """Mail."""
    return ""


TOOLS = {"pay": pay, "read_mail": read_mail}


def _error(tmp_path: Path, text: str) -> PolicyError:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(path, tools=TOOLS)
    error = info.value
    assert error.origin == str(path)
    assert str(error).startswith(f"{path}: [")
    return error


@pytest.mark.parametrize(
    ("text", "table", "key"),
    [
        ("[tools.pay.params.iban]\nkind = 'ibn'\n", "tools.pay.params.iban", "kind"),
        ("[tools.pay.params.iban]\npattern = '('\n", "tools.pay.params.iban", "pattern"),
        ("[tools.pay.params.iban]\nkidn = 'iban'\n", "tools.pay.params.iban", "kidn"),
        ("[tools.pay.params.iban]\nmin = 'low'\n", "tools.pay.params.iban", "min"),
        ("[tools.pay.params.iban]\nmin = 1\n", "tools.pay.params.iban", "min"),
        ("[tools.pay.params.amount]\nkind = 'email'\n", "tools.pay.params.amount", "kind"),
        ("[tools.pay.params.amount]\npattern = 'x'\n", "tools.pay.params.amount", "pattern"),
        (
            "[tools.pay.params.iban]\ngrounded_in = ['usr']\n",
            "tools.pay.params.iban",
            "grounded_in",
        ),
        ("[tools.pay.params.iban]\ngrounded_in = 'user'\n", "tools.pay.params.iban", "grounded_in"),
        ("[tools.pay.params.iban]\ndomains = ['x.com']\n", "tools.pay.params.iban", "domains"),
        ("[tools.pay.params.iban]\n", "tools.pay.params.iban", None),
        (
            "[tools.pay.params.iban]\nvalues = ['a']\noutcome = 'ok'\n",
            "tools.pay.params.iban",
            "outcome",
        ),
        ("[tools.pay]\nmax_per_turn = -1\n", "tools.pay", "max_per_turn"),
        ("[tools.pay]\nmax_per_turn = 1.5\n", "tools.pay", "max_per_turn"),
        ("[tools.pay]\nintent = []\n", "tools.pay", "intent"),
        ("[tools.pay]\nintent = 'pay'\n", "tools.pay", "intent"),
        ("[tools.pay]\nintent = ['!!!']\n", "tools.pay", "intent"),
        ("[tools.pay]\nlimit = 3\n", "tools.pay", "limit"),
        ("[sources]\ntrusted = ['contacts']\n", "sources", "trusted"),
        ("[sources]\ntrusted = ['pay']\nuntrusted = ['pay']\n", "sources", None),
        ("[policy]\nfail_closed = 'yes'\n", "policy", "fail_closed"),
        ("[rules]\n", "(top level)", "rules"),
        ("tools = 3\n", "tools", None),
    ],
)
def test_a_mistake_names_the_file_table_and_key(
    tmp_path: Path, text: str, table: str, key: str | None
) -> None:
    error = _error(tmp_path, text)
    assert (error.table, error.key) == (table, key)


@pytest.mark.parametrize(
    ("text", "table", "problem"),
    [
        ("[tools.pya.params.iban]\nkind = 'iban'\n", "tools.pya.params.iban", "unknown tool 'pya'"),
        ("[tools.pay.params.ibn]\nkind = 'iban'\n", "tools.pay.params.ibn", "no parameter 'ibn'"),
        ("[tools.pya]\nintent = ['pay']\n", "tools.pya", "unknown tool 'pya'"),
        ("[tools.pya]\nmax_per_turn = 1\n", "tools.pya", "unknown tool 'pya'"),
        (
            "[tools.pay.params.\"memo.x\"]\nkind = 'text'\n",
            'tools.pay.params."memo.x"',
            "no parameter 'x'",
        ),
    ],
)
def test_unknown_tools_and_parameters_are_named(
    tmp_path: Path, text: str, table: str, problem: str
) -> None:
    error = _error(tmp_path, text)
    assert error.table == table and problem in error.problem


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"\[file\]: cannot be read"):
        load(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[tools.pay\n")
    with pytest.raises(PolicyError, match=r"bad.toml: \[file\]: is not valid TOML"):
        load(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyError, match="not UTF-8"):
        load(bad)


def test_mistakes_are_caught_when_loaded_into_the_engine_never_at_a_call(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        "[tools.pay.params.iban]\nkind = 'iban'\n[tools.pay.params.recipient]\nkind = 'email'\n"
    )
    with pytest.raises(PolicyError, match=r"\[tools.pay.params.recipient\]"):
        Guardrails([pay, read_mail], policy=path)
    rails = Guardrails([pay, read_mail])
    with pytest.raises(PolicyError):
        rails.load_policy(path)
    assert not [g for g in rails.guards if g.startswith("policy:")]


def test_file_and_python_rules_merge_and_a_second_load_adds_to_the_first(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        "[sources]\ntrusted = ['read_mail']\n"
        "[tools.pay]\nmax_per_turn = 3\nintent = ['pay']\n"
        "[tools.pay.params.iban]\nkind = 'iban'\n"
    )
    rails = Guardrails([pay, read_mail], policy=Policy(params=(Param("pay", "amount", max=10),)))
    merged = rails.load_policy(path)
    assert {p.rule_name for p in merged.params} == {"policy:pay.amount", "policy:pay.iban"}
    again = rails.load_policy(Policy(intents={"pay": ["transfer"]}, ceilings={}))
    assert again.intents["pay"] == ("pay", "transfer")
    assert sorted(g for g in rails.guards if g.startswith("policy:")) == [
        "policy:intent",
        "policy:pay.amount",
        "policy:pay.ceiling",
        "policy:pay.iban",
        "policy:pay.intent",
    ]
    with pytest.raises(PolicyError, match="declared twice"):
        rails.load_policy(Policy(params=(Param("pay", "iban", kind="iban"),)))


def test_conflicting_trust_across_merged_policies_is_refused() -> None:
    with pytest.raises(PolicyError, match="both trusted and untrusted"):
        Policy(trusted=frozenset({"read_mail"})) | Policy(untrusted=frozenset({"read_mail"}))


def test_the_lower_of_two_ceilings_wins() -> None:
    from guardrails.policy import Ceiling

    merged = Policy(ceilings={"pay": Ceiling(per_turn=3)}) | Policy(
        ceilings={"pay": Ceiling(per_turn=5, per_session=7)}
    )
    assert merged.ceilings["pay"] == Ceiling(per_turn=3, per_session=7)


def test_the_worked_example_file_is_at_most_40_lines_and_loads() -> None:
    path = Path(__file__).resolve().parents[2] / "docs" / "policy" / "mail_payments.toml"
    assert len(path.read_text().splitlines()) <= 40
    policy = load(path)
    assert len(policy.params) == 5


def test_loads_names_its_origin() -> None:
    with pytest.raises(PolicyError, match=r"^inline: \[tools.pay\] limit"):
        loads("[tools.pay]\nlimit = 1\n", origin="inline")


def test_loading_more_rules_mid_session_keeps_labels_intents_and_counts() -> None:
    from guardrails import Outcome

    rails = Guardrails(
        [pay, read_mail],
        policy=Policy(
            params=(Param("pay", "iban", kind="iban", grounded_in=["user"]),),
            intents={"pay": ["pay"]},
        ),
    )
    turn = rails.turn(session="s")
    turn.pre_turn("pay 10 to DE89 3704 0044 0532 0130 00")
    args = {"iban": "DE89370400440532013000", "amount": 10}
    assert turn.call("pay", args).ok
    rails.load_policy(Policy(params=(Param("pay", "amount", max=100),)))
    assert turn.call("pay", args).ok  # the user's input and its labels were kept
    assert turn.call("pay", {**args, "amount": 500}).outcome is Outcome.INVALID_ARGS


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_values": 0}, "max_values must be a positive integer"),
        ({"max_sessions": True}, "max_sessions must be a positive integer"),
        ({"max_value": 10}, "unknown option 'max_value'"),
    ],
)
def test_bad_memory_limits_are_refused_at_load(options: dict[str, Any], message: str) -> None:
    from guardrails.errors import ConfigurationError

    rails = Guardrails([pay, read_mail])
    with pytest.raises(ConfigurationError, match=message):
        rails.load_policy(Policy(params=(Param("pay", "iban", kind="iban"),)), **options)


def test_a_tool_named_like_a_trusted_source_is_refused_when_provenance_is_used() -> None:
    @tool
    def user(q: str) -> str:
        """A tool unluckily named."""
        return q

    with pytest.raises(PolicyError, match="a tool is named 'user'"):
        Guardrails([pay, user], policy=Policy(params=(Param("pay", "iban", grounded_in=["user"]),)))
    Guardrails([pay, user], policy=Policy(params=(Param("pay", "iban", kind="iban"),)))


def test_a_single_string_for_a_list_of_tools_is_refused() -> None:
    with pytest.raises(PolicyError, match=r"\[sources\] trusted: must be a list of tool names"):
        Policy(trusted="read_mail")  # type: ignore[arg-type]
