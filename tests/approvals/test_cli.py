"""``guardrails approvals``: list, show, approve and deny against a store URL, from another process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate
from guardrails.cli import main
from guardrails.store import SQLiteStore
from guardrails.verdicts import Outcome


def _engine(path: str, ran: list[str]) -> Guardrails:
    @tool(approval="always", effect=True)
    def wipe(disk: str) -> str:
        ran.append(disk)
        return "wiped"

    return Guardrails([wipe], hooks=[ApprovalGate(SQLiteStore(path))])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from guardrails.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "approvals", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_a_call_approved_from_another_process_runs_once(tmp_path: Path) -> None:
    path, ran = str(tmp_path / "g.db"), []
    engine = _engine(path, ran)
    assert engine.turn(session="s").call("wipe", {"disk": "sda"}).reason == "approval_pending"
    listed = _cli("list", "--json", "--store", path)
    assert listed.returncode == 0, listed.stderr
    [request] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (request["status"], request["arguments"]) == ("pending", '{"disk":"sda"}')
    done = _cli("approve", request["id"], "--by", "alice", "--reason", "ok", "--store", path)
    assert (done.returncode, done.stdout.strip()) == (0, f"{request['id']} approved by alice")
    assert engine.turn(session="s").call("wipe", {"disk": "sda"}).outcome is Outcome.OK
    assert ran == ["sda"]
    shown = json.loads(_cli("show", request["id"], "--store", path).stdout)
    assert (shown["status"], shown["decided_by"], shown["reason"]) == ("used", "alice", "ok")


def test_deciding_twice_or_an_unknown_id_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "g.db")
    _engine(path, []).turn(session="s").call("wipe", {"disk": "sda"})
    [request] = SQLiteStore(path).approvals("pending", 0.0, 10)
    assert main(["approvals", "deny", request.id, "--by", "bob", "--store", path]) == 0
    assert main(["approvals", "approve", request.id, "--by", "eve", "--store", path]) == 1
    assert "is denied, not pending" in capsys.readouterr().err
    assert main(["approvals", "approve", "f" * 32, "--by", "eve", "--store", path]) == 1
    assert main(["approvals", "list", "--status", "denied", "--store", path]) == 0
    assert request.id in capsys.readouterr().out


def test_a_store_that_cannot_be_opened_or_a_missing_approver_exits_2(tmp_path: Path) -> None:
    assert main(["approvals", "list", "--store", str(tmp_path / "no" / "such" / "g.db")]) == 2
    with pytest.raises(SystemExit) as exited:
        main(["approvals", "approve", "x", "--store", str(tmp_path / "g.db")])
    assert exited.value.code == 2
    assert main(["approvals", "approve", "x", "--by", " ", "--store", str(tmp_path / "g.db")]) == 2


def test_a_store_path_that_names_no_file_exits_2_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for url in (str(tmp_path / "typo.db"), f"sqlite://{tmp_path}/typo.db", "memory:"):
        assert main(["approvals", "list", "--store", url]) == 2
    assert not (tmp_path / "typo.db").exists()
    assert "typo.db: no such store file" in capsys.readouterr().err
