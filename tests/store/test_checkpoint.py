"""Checkpoints anchor the audit chain: a rewritten history, a deleted tail and a
signature that does not match are found against one, on SQLite and PostgreSQL;
a chain head table someone overwrote on PostgreSQL never makes an honest row
verify as tampered, and verify names the overwritten head.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from guardrails.cli import main
from guardrails.store import AuditRow, PostgresStore, SQLiteStore, Store
from guardrails.store._chain import content, link
from guardrails.store.checkpoint import FORMAT, CheckpointError, export, read, read_key
from guardrails.store.testing import postgres_dsn
from guardrails.store.verify import verify
from tests.store._pg_schema import grant

KEY = b"0123456789abcdef0123456789abcdef"


def _row(n: int) -> AuditRow:
    return AuditRow("tool_call", 1000.0 + n, f"c{n}", "acme", tool="t", outcome="ok")


class Place:
    """A store location the CLI opens, and the SQL its attacker runs around the store."""

    def __init__(self, url: str, pg: str | None = None) -> None:
        self.url, self.pg = url, pg

    def open(self) -> Store:
        return PostgresStore(self.pg) if self.pg else SQLiteStore(self.url)

    def by_hand(self, *statements: str) -> None:
        """Statements run around the store, its defences off (a file writer, a superuser)."""
        if self.pg:
            import psycopg

            with psycopg.connect(self.pg, autocommit=True) as conn:
                conn.execute("ALTER TABLE guardrails_audit DISABLE TRIGGER USER")
                for statement in statements:
                    conn.execute(statement)
                conn.execute("ALTER TABLE guardrails_audit ENABLE TRIGGER USER")
            return
        conn = sqlite3.connect(self.url, isolation_level=None)
        for name in ("no_update", "no_delete", "no_replace"):
            conn.execute(f"DROP TRIGGER IF EXISTS guardrails_audit_{name}")
        for statement in statements:
            conn.execute(statement)
        conn.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    if request.param == "sqlite":
        found = Place(str(tmp_path / "audit.db"))
    else:
        pg = str(request.getfixturevalue("pg_dsn"))
        dsn, schema = postgres_dsn() or "", pg.split("search_path=")[1].rstrip("'")
        url = dsn + ("&" if "?" in dsn else "?") + "options=" + quote(f"-c search_path={schema}")
        found = Place(url, pg)
    store = found.open()
    store.append_many([_row(n) for n in range(1, 6)])
    store.close()
    yield found


@pytest.fixture
def key_file(tmp_path: Path) -> str:
    path = tmp_path / "checkpoint.key"
    path.write_bytes(KEY + b"\n")
    path.chmod(0o600)
    return str(path)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _checkpoint(place: Place, tmp_path: Path, capsys: Any, *key: str) -> str:
    path = str(tmp_path / "head.json")
    code, _, err = _cli(capsys, "audit", "checkpoint", place.url, *key, "-o", path)
    assert code == 0, err
    return path


def _rewrite_from(place: Place, first: int) -> None:
    """Change row ``first`` and recompute every hash from it on: a consistent rewrite."""
    with place.open() as store:
        chain = store.audit_chain()
    previous = chain[first - 2][1] if first > 1 else ""
    updates = []
    for row, _ in chain[first - 1 :]:
        changed = row._replace(outcome="error") if row.id == first else row
        previous = link(previous or "", row.id or 0, content(changed))
        updates.append(
            f"UPDATE guardrails_audit SET outcome = '{changed.outcome}', hash = '{previous}' "
            f"WHERE id = {row.id}"
        )
    if place.pg:  # the head table follows, or verify would name it
        updates.append(f"UPDATE guardrails_audit_head SET hash = '{previous}'")
    place.by_hand(*updates)


# -- what a checkpoint holds -----------------------------------------------------------------


def test_a_checkpoint_holds_the_rows_the_head_and_the_time(place: Place) -> None:
    with place.open() as store:
        text = export(store)
        head = verify(store).head
    body = json.loads(text)
    assert body["format"] == FORMAT == "guardrails-audit-checkpoint/1"
    assert (body["rows"], body["last_id"], body["head"]) == (5, 5, head)
    assert body["at"].endswith("Z") and "signature" not in body
    assert read(text) == (5, 5, head, body["at"], False)


def test_verify_against_a_checkpoint_of_the_same_chain_passes_and_says_so(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _checkpoint(place, tmp_path, capsys)
    with place.open() as store:
        store.append(_row(6))  # rows after the checkpoint are fine
    code, out, _ = _cli(capsys, "audit", "verify", place.url, "--against", path)
    assert code == 0 and out.startswith("ok: 6 rows, chain head ")
    assert out.rstrip().endswith("(row 5)") and "holds the checkpoint of" in out


# -- what only a checkpoint shows ---------------------------------------------------------------


@pytest.mark.parametrize("first", [1, 3, 5])
def test_a_consistent_rewrite_passes_plain_verify_and_is_found_against_a_checkpoint(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str], first: int
) -> None:
    path = _checkpoint(place, tmp_path, capsys)
    _rewrite_from(place, first)
    assert _cli(capsys, "audit", "verify", place.url)[0] == 0  # the chain alone holds
    code, out, _ = _cli(capsys, "audit", "verify", place.url, "--against", path)
    assert code == 1
    assert out == (
        "tampered: row 5 differs from the checkpoint: the chain was rewritten up to it "
        "(every hash recomputed)\n"
    )


@pytest.mark.parametrize("removed", [1, 2, 5])
def test_a_deleted_tail_passes_plain_verify_and_is_found_against_a_checkpoint(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str], removed: int
) -> None:
    path = _checkpoint(place, tmp_path, capsys)
    keep = 5 - removed
    statements = [f"DELETE FROM guardrails_audit WHERE id > {keep}"]
    if place.pg:
        with place.open() as store:
            kept = store.audit_chain()[keep - 1][1] if keep else ""
        statements.append(f"UPDATE guardrails_audit_head SET id = {keep}, hash = '{kept}'")
    place.by_hand(*statements)
    assert _cli(capsys, "audit", "verify", place.url)[0] == 0
    code, out, _ = _cli(capsys, "audit", "verify", place.url, "--against", path)
    gone = "row 5" if removed == 1 else f"rows {keep + 1} to 5"
    assert (code, out) == (
        1,
        f"tampered: row {keep + 1} was removed: the checkpoint holds 5 rows, the store {keep} "
        f"({gone} deleted from the end)\n",
    )


def test_a_deleted_tail_written_again_is_found_as_a_rewrite(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _checkpoint(place, tmp_path, capsys)
    statements = ["DELETE FROM guardrails_audit WHERE id > 3"]
    if place.pg:
        with place.open() as store:
            kept = store.audit_chain()[2][1]
        statements.append(f"UPDATE guardrails_audit_head SET id = 3, hash = '{kept}'")
    place.by_hand(*statements)
    with place.open() as store:
        store.append_many([_row(40), _row(50), _row(60)])  # honest rows, another history
    code, out, _ = _cli(capsys, "audit", "verify", place.url, "--against", path)
    assert code == 1 and out.startswith("tampered: row 5 differs from the checkpoint")


# -- signatures -------------------------------------------------------------------------------------


def test_a_signed_checkpoint_verifies_with_its_key(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str], key_file: str
) -> None:
    path = _checkpoint(place, tmp_path, capsys, "--key", key_file)
    assert json.loads(Path(path).read_text())["signature"]["algorithm"] == "hmac-sha256"
    code, out, _ = _cli(capsys, "audit", "verify", place.url, "--against", path, "--key", key_file)
    assert code == 0 and "holds the signed checkpoint of" in out


def _edited(path: str, change: Any) -> str:
    body = json.loads(Path(path).read_text())
    change(body)
    Path(path).write_text(json.dumps(body))
    return path


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.update(head="0" * 64),
        lambda b: b.update(rows=3, last_id=3),
        lambda b: b.update(at="2020-01-01T00:00:00Z"),
        lambda b: b.pop("signature"),
        lambda b: b["signature"].update(value="0" * 64),
    ],
    ids=["head", "rows", "time", "signature_removed", "signature_forged"],
)
def test_an_edited_checkpoint_is_refused_as_tampered(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str], key_file: str, change: Any
) -> None:
    path = _edited(_checkpoint(place, tmp_path, capsys, "--key", key_file), change)
    code, out, _ = _cli(capsys, "audit", "verify", place.url, "--against", path, "--key", key_file)
    assert code == 1 and out.startswith("tampered: the checkpoint")


def test_another_key_does_not_match(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str], key_file: str
) -> None:
    path = _checkpoint(place, tmp_path, capsys, "--key", key_file)
    other = tmp_path / "other.key"
    other.write_bytes(b"another key of enough bytes!")
    other.chmod(0o600)
    code, out, _ = _cli(
        capsys, "audit", "verify", place.url, "--against", path, "--key", str(other)
    )
    assert (code, out) == (
        1,
        "tampered: the checkpoint's signature does not match: it was changed, or signed "
        "with another key\n",
    )


def test_keys_and_checkpoints_that_cannot_be_used_exit_2(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str], key_file: str
) -> None:
    signed = _checkpoint(place, tmp_path, capsys, "--key", key_file)
    code, _, err = _cli(capsys, "audit", "verify", place.url, "--against", signed)
    assert code == 2 and "signed: give the key" in err
    os.chmod(key_file, 0o640)
    code, _, err = _cli(capsys, "audit", "checkpoint", place.url, "--key", key_file)
    assert code == 2 and "may be read by others" in err
    short = tmp_path / "short.key"
    short.write_bytes(b"short")
    short.chmod(0o600)
    with pytest.raises(CheckpointError, match="fewer than 16 bytes"):
        read_key(short)
    (tmp_path / "junk.json").write_text('{"format": "something else"}')
    code, _, err = _cli(
        capsys, "audit", "verify", place.url, "--against", str(tmp_path / "junk.json")
    )
    assert code == 2 and "not a checkpoint" in err
    code, _, err = _cli(capsys, "audit", "verify", place.url, "--against", str(tmp_path / "none"))
    assert code == 2 and "cannot read the checkpoint" in err


def test_no_checkpoint_of_a_chain_that_does_not_verify(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    place.by_hand("UPDATE guardrails_audit SET outcome = 'error' WHERE id = 2")
    code, out, err = _cli(capsys, "audit", "checkpoint", place.url)
    assert code == 1 and out == "" and "does not verify" in err


# -- PostgreSQL: the chain head table -----------------------------------------------------------------


def _app_store(two_roles: tuple[str, str]) -> tuple[str, str]:
    owner, app = two_roles
    PostgresStore(owner).migrate()
    grant(owner, app)
    return owner, app


@pytest.mark.postgres
@pytest.mark.parametrize(
    "poison",
    [
        "UPDATE guardrails_audit_head SET hash = 'garbage'",
        "UPDATE guardrails_audit_head SET id = id + 7, hash = 'garbage'",
        "UPDATE guardrails_audit_head SET id = 0, hash = ''",
        "UPDATE guardrails_audit_head SET id = 2, hash = (SELECT hash FROM guardrails_audit WHERE id = 2)",
    ],
    ids=["hash", "ahead", "reset", "older_row"],
)
@pytest.mark.parametrize("how", ["append", "append_many", "new_store"])
def test_a_head_the_application_role_overwrote_does_not_make_honest_rows_tampered(
    two_roles: tuple[str, str], poison: str, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    _, app = _app_store(two_roles)
    with PostgresStore(app) as store:
        for n in range(1, 4):
            store.append(_row(n))
        with psycopg.connect(app, autocommit=True) as conn:
            conn.execute(poison)  # the application role may UPDATE the head
        if how == "append":
            store.append(_row(4))
            store.append(_row(5))
        elif how == "append_many":
            store.append_many([_row(4), _row(5)])
    if how == "new_store":
        with PostgresStore(app) as store:
            store.append(_row(4))
            store.append_many([_row(5)])
    with PostgresStore(app) as store:
        found = verify(store)
        assert found.ok and found.rows == 5, found.line()
        assert store.audit_head() == (5, found.head)  # put back where the rows say


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("poison", "line"),
    [
        (
            "UPDATE guardrails_audit_head SET hash = 'garbage'",
            "tampered: the chain head table holds row 3 with a hash that row does not have: "
            "it was overwritten (the rows themselves verify)\n",
        ),
        (
            "UPDATE guardrails_audit_head SET id = 9",
            "tampered: the chain head table holds row 9 with a hash that row does not have: "
            "it was overwritten (the rows themselves verify)\n",
        ),
        (
            "UPDATE guardrails_audit_head SET id = 2, "
            "hash = (SELECT hash FROM guardrails_audit WHERE id = 2)",
            "tampered: row 3 was written around the store: the chain head table still names "
            "row 2\n",
        ),
    ],
    ids=["hash", "ahead", "behind"],
)
def test_verify_names_an_overwritten_head(
    pg_dsn: str, capsys: pytest.CaptureFixture[str], poison: str, line: str
) -> None:
    import psycopg

    with PostgresStore(pg_dsn) as store:
        store.append_many([_row(n) for n in range(1, 4)])
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(poison)
    with PostgresStore(pg_dsn) as store:
        found = verify(store)
    assert not found.ok and found.line() + "\n" == line


def test_the_lines_in_the_docs_are_the_lines_verify_prints() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "store.md").read_text()
    for line in (
        "tampered: row 5 differs from the checkpoint: the chain was rewritten up to it "
        "(every hash recomputed)",
        "tampered: row 4 was removed: the checkpoint holds 5 rows, the store 3 "
        "(rows 4 to 5 deleted from the end)",
        "tampered: the checkpoint's signature does not match: it was changed, or signed "
        "with another key",
        "tampered: the chain head table holds row 3 with a hash that row does not have: "
        "it was overwritten (the rows themselves verify)",
    ):
        assert f"\n{line}\n" in page, line
