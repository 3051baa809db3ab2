"""The approvers table: who may decide over HTTP, for which tenant; read again when it changes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from guardrails.errors import ConfigurationError
from guardrails.gateway.approvers import Approver, ApproverTable, load_approvers, parse_approvers
from guardrails.gateway.settings import ApprovalsConfig


def test_entries_map_a_token_to_its_tenant_and_approver() -> None:
    digest = hashlib.sha256(b"tok-b").hexdigest()
    text = f"# who decides\nacme alice tok-a\n\nglobex bob sha256:{digest}\n"
    table = ApproverTable(ApprovalsConfig(), parse_approvers(text, "approvers.txt"))
    assert table.approver("tok-a") == Approver("acme", "alice")
    assert table.approver("tok-b") == Approver("globex", "bob")
    assert table.approver("tok-c") is None
    assert table.approver("") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("acme tok-a\n", "line 1: expected '<tenant> <approver> <token>'"),
        ("acme alice tok-a extra\n", "line 1: expected"),
        ("acme alice sha256:zz\n", "line 1: a bad sha256: digest"),
        ("acme alice tok-a\nglobex bob tok-a\n", "line 2: this token is listed twice"),
    ],
)
def test_a_bad_line_is_named_without_its_token(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        parse_approvers(text, "approvers.txt")
    assert "tok-a" not in str(caught.value)


def test_the_file_is_read_again_when_it_changes_and_a_bad_one_keeps_the_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "approvers.txt"
    path.write_text("acme alice tok-a\n")
    monkeypatch.setenv("APPROVERS", "globex bob tok-b;globex carol tok-c")
    config = ApprovalsConfig(approvers_file=str(path), approvers_env="APPROVERS")
    table = ApproverTable(config, load_approvers(config))
    assert table.approver("tok-c") == Approver("globex", "carol")
    path.write_text("acme dave tok-d\n")
    os.utime(path, ns=(1, 1))  # a change the stamp sees even within one clock tick
    assert table.approver("tok-a") is None  # removed: decides no more
    assert table.approver("tok-d") == Approver("acme", "dave")
    path.write_text("acme broken\n")
    os.utime(path, ns=(2, 2))
    assert table.approver("tok-d") == Approver("acme", "dave")
