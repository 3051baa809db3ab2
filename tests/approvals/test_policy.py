"""``approval`` in the policy file: parsed at load, checked against the tool, never an implicit approve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate, Approvals
from guardrails.policy import Policy, PolicyError
from guardrails.store import MemoryStore
from guardrails.verdicts import Outcome


def _engine(tmp_path: Path, text: str, *, gate: bool = True, own: str | None = None) -> Any:
    @tool(effect=True, approval=own)
    def transfer(amount: int, to: str) -> str:
        return "sent"

    path = tmp_path / "policy.toml"
    path.write_text(text)
    store = MemoryStore()
    hooks = [ApprovalGate(store)] if gate else []
    return Guardrails([transfer], hooks=hooks, policy=str(path)), store


def test_a_condition_in_the_policy_file_holds_the_call(tmp_path: Path) -> None:
    engine, store = _engine(tmp_path, '[tools.transfer]\napproval = "amount > 500"\n')
    turn = engine.turn(session="s")
    assert turn.call("transfer", {"amount": 500, "to": "b"}).outcome is Outcome.OK
    held = turn.call("transfer", {"amount": 501, "to": "b"})
    assert (held.outcome, held.reason) == (Outcome.UNAVAILABLE, "approval_pending")
    people = Approvals(store)
    people.approve(people.list()[0].id, by="alice")
    assert turn.call("transfer", {"amount": 501, "to": "b"}).outcome is Outcome.OK


def test_the_tool_and_the_policy_file_both_count(tmp_path: Path) -> None:
    # "never" in the file does not lift the tool's own rule: either one asks
    engine, _ = _engine(tmp_path, '[tools.transfer]\napproval = "never"\n', own="to == 'eve'")
    assert engine.turn(session="s").call("transfer", {"amount": 1, "to": "eve"}).reason == (
        "approval_pending"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('approval = "alwyas"', "approval 'alwyas' is not 'always', 'never' or a condition"),
        ('approval = "amout > 500"', "reads 'amout', which is not a parameter"),
        ('approval = "amount >"', "it ends too early"),
        ("approval = true", "must be a string"),
        ('approvals = "always"', "unknown key"),
    ],
)
def test_a_misspelled_setting_is_a_policy_error_naming_file_table_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(PolicyError, match=message) as raised:
        _engine(tmp_path, f"[tools.transfer]\n{text}\n")
    assert "[tools.transfer]" in str(raised.value) and "policy.toml" in str(raised.value)


def test_an_approval_for_an_unknown_tool_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="unknown tool 'trasnfer'"):
        _engine(tmp_path, '[tools.trasnfer]\napproval = "always"\n')


def test_a_policy_asking_for_approval_without_a_gate_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no hook grants approvals"):
        _engine(tmp_path, '[tools.transfer]\napproval = "always"\n', gate=False)
    _engine(tmp_path, '[tools.transfer]\napproval = "never"\n', gate=False)


def test_two_files_merge_their_rules_for_one_tool(tmp_path: Path) -> None:
    first = tmp_path / "a.toml"
    first.write_text('[tools.transfer]\napproval = "amount > 500"\n')
    second = tmp_path / "b.toml"
    second.write_text("[tools.transfer]\napproval = \"to == 'eve'\"\n")
    merged = Policy.from_toml(first) | Policy.from_toml(second)
    assert [r.source for r in merged.approvals["transfer"]] == ["amount > 500", "to == 'eve'"]
