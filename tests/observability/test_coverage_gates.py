"""``guardrails coverage``: readers never write, and the gates fail on escapes and faults.

Pointed at a database, the command reads it read-only: a foreign SQLite file
or PostgreSQL schema stays exactly as it was (no table, trigger or index is
made in it). ``--max-escapes`` and ``--max-faults`` fail the gate on the
signals that matter most, in total or per guard, at the limit and one past it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from guardrails.cli import main as cli
from guardrails.observe.coverage import CoverageError, from_audit, from_exposition
from guardrails.store import AuditRow
from guardrails.store.testing import postgres_dsn, postgres_required, temporary_schema


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_foreign_sqlite_file_is_read_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO orders (total) VALUES (9.5)")
    conn.close()
    before = digest(path)
    assert cli(["coverage", "--audit", f"sqlite:///{path}"]) == 2
    assert "no guardrails audit log in this database" in capsys.readouterr().err
    assert digest(path) == before
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert tables == {"orders"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.fixture
def foreign_schema() -> Iterator[str]:
    dsn = postgres_dsn()
    if dsn is None:
        if postgres_required():
            pytest.fail("GUARDRAILS_REQUIRE_POSTGRES=1 but GUARDRAILS_POSTGRES_DSN is not set")
        pytest.skip("no PostgreSQL server: set GUARDRAILS_POSTGRES_DSN")
    from psycopg.conninfo import conninfo_to_dict

    with temporary_schema(dsn) as scoped:
        options = conninfo_to_dict(scoped)["options"]
        yield f"{dsn}{'&' if '?' in dsn else '?'}options={quote(str(options))}"


@pytest.mark.postgres
def test_a_foreign_postgresql_schema_is_read_and_left_as_it_was(
    foreign_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    with psycopg.connect(foreign_schema, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id serial PRIMARY KEY)")
    assert cli(["coverage", "--audit", foreign_schema]) == 2
    assert "no guardrails audit log in this database" in capsys.readouterr().err
    with psycopg.connect(foreign_schema, autocommit=True) as conn:
        (schema,) = conn.execute("SELECT current_schema()").fetchone() or ("",)
        found = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
    assert [r[0] for r in found] == ["orders"]


EXPOSITION = """\
# TYPE guardrails_guard_evaluations_total counter
guardrails_guard_evaluations_total{guard="a",choke_point="tool_call",verdict="pass",mode="enforce"} 10
guardrails_guard_evaluations_total{guard="a",choke_point="tool_call",verdict="not_evaluated",mode="enforce"} 2
guardrails_guard_evaluations_total{guard="b",choke_point="tool_call",verdict="reject",mode="enforce"} 3
guardrails_guard_evaluations_total{guard="c",choke_point="tool_call",verdict="reject",mode="observe"} 9
# TYPE guardrails_fail_open_escapes_total counter
guardrails_fail_open_escapes_total{guard="a",choke_point="tool_call",reason="raised"} 2
guardrails_fail_open_escapes_total{guard="c",choke_point="tool_call",reason="observe_only"} 9
# TYPE guardrails_fail_closed_faults_total counter
guardrails_fail_closed_faults_total{guard="b",choke_point="tool_call",reason="timeout"} 3
"""


@pytest.mark.parametrize(
    ("options", "code"),
    [
        (["--max-escapes", "2"], 0),  # at the limit (observe_only aside)
        (["--max-escapes", "1"], 1),  # one past it
        (["--max-escapes", "a=2"], 0),
        (["--max-escapes", "a=1"], 1),
        (["--max-escapes", "c=0"], 0),  # observe_only escapes are deliberate
        (["--max-faults", "3"], 0),
        (["--max-faults", "2"], 1),
        (["--max-faults", "b=3", "--max-faults", "a=0"], 0),
        (["--max-faults", "b=2", "--max-faults", "a=0"], 1),
        (["--max-escapes", "0", "--max-faults", "0"], 1),
    ],
)
def test_the_escape_and_fault_gates_fail_one_past_their_limit(
    tmp_path: Path, options: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "metrics.txt"
    source.write_text(EXPOSITION)
    assert cli(["coverage", str(source), "--format", "json", *options]) == code
    violations = json.loads(capsys.readouterr().out)["violations"]
    assert bool(violations) == bool(code)


def test_the_gate_messages_name_what_was_over_and_by_how_much() -> None:
    report = from_exposition(EXPOSITION)
    assert report.violations(max_escapes={"": 1}, max_faults={"b": 2}) == [
        "fail-open escapes in total: 2 is above 1",
        "fail-closed faults guard 'b': 3 is above 2",
    ]


@pytest.mark.parametrize("value", ["-1", "x", "a=", "=3", "1.5", "a=b", "٣"])
def test_a_bad_limit_is_a_usage_error(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "metrics.txt"
    source.write_text(EXPOSITION)
    with pytest.raises(SystemExit) as stop:
        cli(["coverage", str(source), "--max-escapes", value])
    assert stop.value.code == 2
    assert "is not a limit" in capsys.readouterr().err


def row(verdicts: str) -> AuditRow:
    return AuditRow("tool_call", 1.0, "c1", tool="t", outcome="ok", verdicts=verdicts)


def test_an_unknown_verdict_value_in_the_audit_log_is_an_error_not_dropped() -> None:
    good = '[{"guard":"g","choke_point":"tool_call","verdict":"pass"}]'
    bad = '[{"guard":"g","choke_point":"tool_call","verdict":"passed"}]'
    assert from_audit([row(good)]).guards[0].passed == 1
    with pytest.raises(CoverageError, match="unknown verdict value 'passed'"):
        from_audit([row(good), row(bad)])


def test_an_unknown_verdict_value_in_an_exposition_is_an_error() -> None:
    text = EXPOSITION.replace('verdict="pass"', 'verdict="allow"')
    with pytest.raises(CoverageError, match="unknown verdict value 'allow'"):
        from_exposition(text)
