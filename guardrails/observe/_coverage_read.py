"""Reading coverage sources: a Prometheus exposition (file or loopback URL), or an audit store.

Every failure is a ``CoverageError`` with one short line: no exception text
from a parser or driver (it can quote kilobytes of the input), no traceback.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import UsageError
from ..verdicts import Reason
from ._audit_json import decode_escapes, decode_verdicts
from ._faults import DEPENDENCY_REASONS, STOPPED_BY_DEPENDENCY
from ._metric_names import (
    BACKSTOP_ACTIONS,
    CHOKE_POINT,
    ENFORCE,
    EXPORTED,
    FAIL_CLOSED_FAULTS,
    FAIL_OPEN_ESCAPES,
    FAULT_REASONS,
    GUARD,
    GUARD_EVALUATIONS,
    GUARD_REGISTERED,
    MODE,
    OUTCOME,
    REASON,
    RECORDER,
    RULE,
    TELEMETRY_FAILURES,
    TOOL,
    TOOL_OUTCOMES,
    UNKNOWN,
    UNKNOWN_TOOL,
    VERDICT,
)

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# A source is read as guardrails metrics when it has a series of a guard or a
# tool; the recorder's own failure counter alone does not count.
_OURS = frozenset(EXPORTED) - {TELEMETRY_FAILURES}
# Seconds to wait for a PostgreSQL server before saying it cannot be reached.
PG_CONNECT_TIMEOUT = 3


class CoverageError(UsageError):
    """The source could not be read, or holds no guardrails data."""


class Tally:
    """Counts gathered from one source, summed over every other label."""

    def __init__(self) -> None:
        self.verdicts: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        self.observed: dict[tuple[str, str], int] = defaultdict(int)
        self.escapes: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        self.faults: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        self.registered: set[tuple[str, str]] = set()
        self.tools: dict[str, dict[str, int]] = defaultdict(dict)
        self.backstop: dict[tuple[str, str], int] = defaultdict(int)
        self.failures: dict[str, int] = defaultdict(int)
        # Approvals by tool (audit log only): see APPROVAL_COUNTS.
        self.approvals: dict[str, dict[str, int]] = defaultdict(dict)
        self.seen = False  # any guardrails series at all


def add(counts: dict[str, int], key: str, value: float) -> None:
    counts[key] = counts.get(key, 0) + count(value)


def count(value: float) -> int:
    if not 0 <= value < 2**63:  # also NaN
        raise ValueError("a count must be a non-negative finite number")
    return round(value)


def read_source(source: str, *, timeout: float = 5.0) -> str:
    """The text of a file, or of an ``http://127.0.0.1...`` (loopback only) URL."""
    if source.startswith(("http://", "https://")):
        return _read_url(source, timeout)
    try:
        with open(source, "rb") as f:
            body = f.read()
    except OSError as exc:
        raise CoverageError(f"{source}: {exc.strerror or type(exc).__name__}") from None
    return _decode(source, body)


def _read_url(source: str, timeout: float) -> str:
    from urllib.error import HTTPError, URLError
    from urllib.parse import urlsplit
    from urllib.request import Request, urlopen

    try:
        host = urlsplit(source).hostname
    except ValueError:
        host = None
    if host not in _LOOPBACK:
        raise CoverageError(
            f"{source}: only a loopback address (127.0.0.1, localhost, ::1) is read; "
            "save a remote exposition to a file first"
        )
    request = Request(source, headers={"Accept": "text/plain; version=0.0.4"})
    try:
        with urlopen(request, timeout=timeout) as response:
            body: bytes = response.read()
    except HTTPError as exc:
        raise CoverageError(f"{source}: HTTP {exc.code}") from None
    except URLError as exc:
        reason = exc.reason
        text = reason.strerror if isinstance(reason, OSError) else None
        raise CoverageError(f"{source}: {text or type(reason).__name__}") from None
    except (OSError, ValueError) as exc:
        raise CoverageError(f"{source}: {type(exc).__name__}") from None
    return _decode(source, body)


def _decode(source: str, body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise CoverageError(
            f"{source}: not a Prometheus text exposition (not UTF-8 text)"
        ) from None


def tally_exposition(text: str, source: str = "source") -> Tally:
    """Sum the guardrails samples of a Prometheus text (or OpenMetrics) exposition."""
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as parse_openmetrics,
    )
    from prometheus_client.parser import text_string_to_metric_families as parse_text

    parse = parse_openmetrics if text.rstrip().endswith("# EOF") else parse_text
    t = Tally()
    try:
        for family in parse(text):
            for sample in family.samples:
                _sample(t, sample.name, sample.labels, sample.value)
    except (ValueError, KeyError, TypeError, IndexError):
        raise CoverageError(
            f"{source}: not a Prometheus exposition of guardrails metrics"
        ) from None
    if not t.seen:
        raise CoverageError(
            f"{source}: no guardrails metrics (no guard or tool series) in this exposition"
        )
    return t


def _sample(t: Tally, name: str, labels: dict[str, str], value: float) -> None:
    if name in _OURS:
        t.seen = True
    if name == GUARD_EVALUATIONS:
        key = (labels[GUARD], labels[CHOKE_POINT])
        add(t.verdicts[key], labels[VERDICT], value)
        if labels.get(MODE, ENFORCE) != ENFORCE:
            t.observed[key] += count(value)
    elif name == FAIL_OPEN_ESCAPES:
        add(t.escapes[(labels[GUARD], labels[CHOKE_POINT])], labels[REASON], value)
    elif name == FAIL_CLOSED_FAULTS:
        add(t.faults[(labels[GUARD], labels[CHOKE_POINT])], labels[REASON], value)
    elif name == GUARD_REGISTERED:
        if count(value) > 0:
            t.registered.add((labels[GUARD], labels[CHOKE_POINT]))
    elif name == TOOL_OUTCOMES:
        add(t.tools[labels[TOOL]], labels[OUTCOME], value)
    elif name == BACKSTOP_ACTIONS:
        t.backstop[(labels[RULE], labels[TOOL])] += count(value)
    elif name == TELEMETRY_FAILURES:
        t.failures[labels[RECORDER]] += count(value)


def tally_audit(rows: Iterable[Any]) -> Tally:
    """Sum the verdicts, escapes, faults, outcomes and backstop actions of audit rows."""
    t = Tally()
    try:
        for row in rows:
            t.seen = True
            verdicts = decode_verdicts(row)
            stopped = set()
            halted = getattr(row, "reason", None) in STOPPED_BY_DEPENDENCY
            for v in verdicts:
                key = (v["guard"], v["choke_point"])
                add(t.verdicts[key], v["verdict"], 1)
                enforced = v.get("enforced", True) is not False
                if not enforced:
                    t.observed[key] += 1
                elif v["verdict"] == "reject":
                    stopped.add(key)
            for e in decode_escapes(row):
                key = (e["guard"], e["choke_point"])
                fault = (e["reason"] in FAULT_REASONS and key in stopped) or (
                    halted and e["reason"] in DEPENDENCY_REASONS
                )
                add((t.faults if fault else t.escapes)[key], e["reason"], 1)
            _audit_action(t, row)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise CoverageError("the audit log holds rows this version cannot read") from None
    return t


# What ``guardrails coverage --audit`` counts of approvals, per tool: the answers the
# model read while a call waited (its reasons), the people's decisions (audit rows
# of kind ``approval``), and the calls that ran on an approval.
APPROVAL_COUNTS = (
    "approval_pending",
    "approval_denied",
    "approval_expired",
    "approved",
    "denied",
    "ran_approved",
)


def _approval_call(t: Tally, row: Any, tool: str) -> None:
    if row.reason in APPROVAL_COUNTS[:3]:
        add(t.approvals[tool], row.reason, 1)
    elif (
        row.outcome == "ok"
        and row.detail
        and '"approval_request"' in row.detail
        and json.loads(row.detail).get("approval_request") is not None
    ):
        add(t.approvals[tool], "ran_approved", 1)


def _audit_action(t: Tally, row: Any) -> None:
    if row.kind == "tool_call" and row.outcome is not None:
        tool = UNKNOWN_TOOL if row.reason == Reason.UNKNOWN_TOOL else row.tool
        add(t.tools[tool or UNKNOWN_TOOL], row.outcome, 1)
        _approval_call(t, row, tool or UNKNOWN_TOOL)
    elif row.kind == "approval" and row.outcome in ("approved", "denied"):
        add(t.approvals[row.tool or UNKNOWN_TOOL], row.outcome, 1)
    elif row.kind == "backstop":
        detail = json.loads(row.detail) if row.detail else {}
        if detail.get("outcome") is not None:  # None: declined to call again
            rule = detail.get("rule") or detail.get("guard") or UNKNOWN
            t.backstop[(str(rule), str(detail.get("tool") or UNKNOWN_TOOL))] += 1


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:`` URL, after SQLAlchemy's convention; None for another scheme.

    ``sqlite:///audit.db`` is relative to the working directory,
    ``sqlite:////var/lib/agent/audit.db`` is absolute (four slashes).
    """
    if not url.startswith("sqlite:"):
        return None
    rest = url.removeprefix("sqlite:")
    if not rest.startswith("///") or len(rest) == 3:
        raise CoverageError(
            f"{url}: write sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    return rest[3:]


def audit_rows(url: str) -> list[Any]:
    """Every audit row of the store at ``url``: a ``sqlite:`` URL, a ``postgresql://`` DSN, a path.

    Read-only: the database is opened for reading (SQLite ``mode=ro``, a
    PostgreSQL session with ``default_transaction_read_only``), and a database
    without a guardrails audit log is an error, never given one.
    """
    path = sqlite_path(url)
    if path is None and url.startswith(("postgresql://", "postgres://")):
        shown = _redacted(url)
        read: Callable[[str, str], list[Any]] = _postgres_rows
    elif path is None and "://" in url:
        raise CoverageError(f"{url}: not a store URL (sqlite:///..., postgresql://...)")
    else:
        url = shown = path if path is not None else url
        if not os.path.isfile(url):
            raise CoverageError(f"{shown}: no such file")
        read = _sqlite_rows
    try:
        return read(url, shown)
    except CoverageError:
        raise
    except ImportError:
        raise CoverageError(
            f"{shown}: reading PostgreSQL needs psycopg: pip install 'guardrails-kit[postgres]'"
        ) from None
    except Exception as exc:  # a driver's own errors (psycopg, sqlite3), OSError
        raise CoverageError(f"{shown}: cannot read the audit log ({type(exc).__name__})") from None


_PAGE = 1000


def _sqlite_rows(path: str, shown: str) -> list[Any]:
    import sqlite3
    from pathlib import Path

    from ..store._base import row_from
    from ..store.sqlite import _SELECT

    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'guardrails_audit'"
        ).fetchone()
        if found is None:
            raise CoverageError(f"{shown}: no guardrails audit log in this database")
        rows, after = [], 0
        while True:
            sql = f"{_SELECT} WHERE id > ? ORDER BY id LIMIT ?"
            page = [row_from(r) for r in conn.execute(sql, (after, _PAGE)).fetchall()]
            rows += page
            if len(page) < _PAGE:
                return rows
            after = page[-1].id or 0
    finally:
        conn.close()


def _postgres_rows(dsn: str, shown: str) -> list[Any]:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from ..store._base import row_from
    from ..store._pg_sql import SELECT

    # Added to the DSN's own options (a search_path, say), not in their place.
    given = str(conninfo_to_dict(dsn).get("options") or "")
    options = f"{given} -c default_transaction_read_only=on".strip()
    with psycopg.connect(dsn, connect_timeout=PG_CONNECT_TIMEOUT, options=options) as conn:
        found = conn.execute("SELECT to_regclass('guardrails_audit')").fetchone()
        if found is None or found[0] is None:
            raise CoverageError(f"{shown}: no guardrails audit log in this database")
        rows, after = [], 0
        while True:
            sql = f"{SELECT} WHERE id > %s ORDER BY id LIMIT %s"
            page = [row_from(tuple(r)) for r in conn.execute(sql, (after, _PAGE)).fetchall()]
            rows += page
            if len(page) < _PAGE:
                return rows
            after = page[-1].id or 0


def _redacted(dsn: str) -> str:
    """A DSN without its password."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(dsn)
        if parts.password is None:
            return dsn
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return parts._replace(netloc=netloc).geturl()
    except ValueError:
        return "postgresql://..."
