"""Failure behaviour: a database that goes away, a read-only file, a writer killed mid-append.

Whatever happens to the store, an effectful tool does not run without its
audit row (``unavailable``), a read-only tool runs with an ``audit_unavailable``
escape, and every call that returned has its row.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import multiprocessing
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

import psycopg_pool
import pytest

from guardrails import EscapeReason, Guardrails, Outcome, tool
from guardrails.audit import AuditLog
from guardrails.effects import PaidCall, Usage
from guardrails.store import PostgresStore, SQLiteStore, Store, StoreUnavailable
from guardrails.store.steps import arun
from guardrails.store.testing import postgres_required

_ctx = multiprocessing.get_context("fork")
EFFECTS: list[str] = []


@tool(effect=True)
def send_invoice(invoice_id: str) -> str:
    EFFECTS.append(invoice_id)
    return "sent"


@tool
def read_invoice(invoice_id: str) -> str:
    return f"invoice {invoice_id}"


def _rails(store: Store) -> tuple[Guardrails, AuditLog]:
    audit = AuditLog(store)
    return Guardrails([send_invoice, read_invoice], hooks=[audit], recorder=[audit]), audit


def _assert_closed_for_effects(rails: Guardrails) -> None:
    EFFECTS.clear()
    effect = rails.call("send_invoice", {"invoice_id": "i-down"})
    assert (effect.outcome, effect.reason) == (Outcome.UNAVAILABLE, "audit_unavailable")
    assert EFFECTS == []
    read = rails.call("read_invoice", {"invoice_id": "i-down"})
    assert read.outcome is Outcome.OK
    assert [e.reason for e in read.escapes] == [EscapeReason.AUDIT_UNAVAILABLE]


# -- SIGKILL while appending ---------------------------------------------------------


def _append_until_killed(url: str, report: int) -> None:
    store: Store = SQLiteStore(url) if url.endswith(".db") else PostgresStore(url, max_size=1)
    rails, _ = _rails(store)
    n = 0
    while True:
        n += 1
        name = "send_invoice" if n % 2 else "read_invoice"
        result = rails.call(name, {"invoice_id": f"i-{n}"}, call_id=f"call-{n}")
        os.write(report, f"{result.call_id}\n".encode())


def test_a_writer_killed_mid_append_leaves_every_returned_calls_row(shared_url: str) -> None:
    read_end, write_end = os.pipe()
    child = _ctx.Process(target=_append_until_killed, args=(shared_url, write_end))
    child.start()
    os.close(write_end)
    returned: list[str] = []
    buffer = b""
    with os.fdopen(read_end, "rb", buffering=0) as reader:
        while len(returned) < 300:
            chunk = reader.read(4096)
            assert chunk, "the writer stopped before it was killed"
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            returned.extend(line.decode() for line in lines)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
        buffer += reader.read()
    returned.extend(line.decode() for line in buffer.split(b"\n")[:-1])
    assert child.exitcode == -signal.SIGKILL
    if shared_url.endswith(".db"):
        conn = sqlite3.connect(shared_url)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    store: Store = (
        SQLiteStore(shared_url) if shared_url.endswith(".db") else PostgresStore(shared_url)
    )
    written = {r.call_id for r in _all_rows(store) if r.kind == "tool_call"}
    assert set(returned) <= written
    store.append(_rows_after_restart_marker())
    store.close()


def _all_rows(store: Store) -> list[Any]:
    return list(AuditLog(store).rows())


def _rows_after_restart_marker() -> Any:
    from guardrails.store import AuditRow

    return AuditRow("post_run", 1.0)


# -- a read-only SQLite file ---------------------------------------------------------------


def _read_only_scenario(path: str, queue: Any) -> None:
    if os.geteuid() == 0:
        # root ignores file modes: drop to an unprivileged user, as a service would run.
        os.setgid(65534)
        os.setuid(65534)
    try:
        rails, _ = _rails(SQLiteStore(path))
        _assert_closed_for_effects(rails)
    except BaseException as exc:  # report to the parent, which asserts
        queue.put(repr(exc))
        raise
    queue.put("ok")


@pytest.fixture
def read_only_db() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="guardrails-ro-")
    path = os.path.join(folder, "audit.db")
    with SQLiteStore(path) as store:
        rails, _ = _rails(store)
        rails.call("send_invoice", {"invoice_id": "i-1"})
    os.chmod(path, 0o444)
    os.chmod(folder, 0o555)
    yield path
    os.chmod(folder, 0o755)
    shutil.rmtree(folder)


def test_a_read_only_sqlite_file_closes_effects_and_keeps_its_rows(read_only_db: str) -> None:
    queue = _ctx.Queue()
    child = _ctx.Process(target=_read_only_scenario, args=(read_only_db, queue))
    child.start()
    child.join(timeout=60)
    assert queue.get(timeout=5) == "ok"
    assert child.exitcode == 0
    conn = sqlite3.connect(f"file:{read_only_db}?mode=ro", uri=True)
    rows = conn.execute("SELECT kind, tool, outcome FROM guardrails_audit ORDER BY id").fetchall()
    conn.close()
    assert rows == [("call_started", "send_invoice", None), ("tool_call", "send_invoice", "ok")]


# -- a PostgreSQL server stopped and restarted during a run ---------------------------------


class Cluster:
    """A throwaway PostgreSQL cluster of this test's own, so stopping it disturbs nobody."""

    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        self.data = tempfile.mkdtemp(prefix="guardrails-pgfail-")
        self.port = _free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres", "postgres")
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres")

    def _run(self, program: str, *args: str) -> None:
        command = [os.path.join(self.bindir, program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} -c fsync=off"
        self._run("pg_ctl", "-D", self.data, "-w", "-l", f"{self.data}/log", "-o", options, "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", self.data, "-w", "-m", "fast", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "stop")
        shutil.rmtree(self.data, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    bindir = os.environ.get("GUARDRAILS_PG_BIN") or next(
        iter(sorted(glob.glob("/usr/lib/postgresql/*/bin"))), None
    )
    if bindir is None or not os.path.exists(os.path.join(bindir, "initdb")):
        if postgres_required():
            pytest.fail("GUARDRAILS_REQUIRE_POSTGRES=1 but no PostgreSQL binaries were found")
        pytest.skip("no PostgreSQL binaries: set GUARDRAILS_PG_BIN")
    made = Cluster(bindir)
    made.start()
    yield made
    made.remove()


@pytest.mark.postgres
def test_a_postgres_server_stopped_and_restarted_during_a_run(cluster: Cluster) -> None:
    store = PostgresStore(cluster.dsn, timeout=1.0, connect_timeout=1)
    rails, audit = _rails(store)
    paid = PaidCall(store, usage=lambda _: Usage(cost=0.1), daily_cap=10.0)
    EFFECTS.clear()
    assert rails.call("send_invoice", {"invoice_id": "i-before"}).outcome is Outcome.OK

    cluster.stop()
    _assert_closed_for_effects(rails)
    with pytest.raises(StoreUnavailable):
        paid(EFFECTS.append, "paid-while-down")
    assert EFFECTS == []

    cluster.start()
    after = rails.call("send_invoice", {"invoice_id": "i-after"})
    assert after.outcome is Outcome.OK and after.escapes == ()
    paid(lambda: None)
    tools = [(r.kind, r.tool, r.outcome) for r in audit.rows()]
    assert tools.count(("tool_call", "send_invoice", "ok")) == 2
    assert ("paid_call", "paid_call", "ok") in tools
    store.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_a_pool_that_cannot_reach_the_server_is_not_kept(cluster: Cluster) -> None:
    # Kept, a pool retries ever further apart (1 s, 2 s, 4 s...): after an outage
    # of a few seconds, calls failed with PoolTimeout for seconds after the server
    # was back (the test above, on a loaded machine).
    store = PostgresStore(cluster.dsn, timeout=0.2, connect_timeout=1)
    assert store.incr("k") == 1
    cluster.stop()
    with pytest.raises(StoreUnavailable):
        store.incr("k")  # the idle connection is lost: the pool is reset
    with pytest.raises(StoreUnavailable) as timed_out:
        store.incr("k")  # a fresh pool that cannot connect in time
    assert isinstance(timed_out.value.__cause__, psycopg_pool.PoolTimeout)
    assert store._pool is None  # reset too: the next call's pool connects at once
    cluster.start()
    assert store.incr("k") == 2
    store.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_the_async_pool_path_works_again_as_soon_as_the_server_is_back(cluster: Cluster) -> None:
    # The lost connection discards the loop's pool; each later call opens a new
    # one, so no pool backing off between reconnection attempts is kept.
    store = PostgresStore(cluster.dsn, timeout=0.2, connect_timeout=1, async_pool=True)

    async def outage() -> None:
        assert await arun(store, "incr", "k") == 1
        cluster.stop()
        for _ in range(3):
            with pytest.raises(StoreUnavailable):
                await arun(store, "incr", "k")
        cluster.start()
        assert await arun(store, "incr", "k") == 2
        await store.aclose()

    asyncio.run(outage())
    store.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_a_connection_dropped_mid_call_leaves_the_started_row_and_an_escape(
    cluster: Cluster,
) -> None:
    store = PostgresStore(cluster.dsn, timeout=1.0, connect_timeout=1)
    audit = AuditLog(store)

    @tool(effect=True)
    def migrate_schema() -> str:
        cluster.stop()  # the database goes away while the effect runs
        return "migrated"

    rails = Guardrails([migrate_schema], hooks=[audit], recorder=[audit])
    result = rails.call("migrate_schema", {})
    assert result.outcome is Outcome.OK
    assert [e.reason for e in result.escapes] == [EscapeReason.AUDIT_UNAVAILABLE]
    cluster.start()
    kinds = [(r.kind, r.call_id) for r in audit.rows()]
    assert kinds == [("call_started", result.call_id)]
    store.close()
