"""The SQLite schema's triggers, put back as the migrations wrote them whenever a connection opens.

The store's own connections cannot create or drop a trigger (``_append_only``),
but another program that opens the file can: drop the triggers that refuse
``UPDATE`` and ``DELETE`` of audit rows, or add one that swallows inserts
(``RAISE(IGNORE)``). Before its authorizer is installed, every new connection
of a ``SQLiteStore`` compares the triggers on the store's tables with the
statements of the migrations; a missing or changed one is created again and
one the migrations never made is dropped, in one write transaction, and the
repair is logged (what was done, never a row). What the other program did to
rows meanwhile is left for the hash chain to show (``guardrails audit
verify``).
"""

from __future__ import annotations

import logging
import re
import sqlite3
from functools import cache

from ._migrations import migrations, split_statements

__all__ = ["restore_triggers"]

log = logging.getLogger("guardrails")

_NAME = re.compile(r"CREATE\s+TRIGGER\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
# Triggers on the store's tables, and any elsewhere that names the audit log.
_FOUND = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND "
    "(tbl_name LIKE 'guardrails\\_%' ESCAPE '\\' OR sql LIKE '%guardrails\\_audit%' ESCAPE '\\')"
)


@cache
def expected() -> dict[str, str]:
    """Each trigger the migrations create, by name: its statement as SQLite keeps it."""
    found: dict[str, str] = {}
    for _, script in migrations("sqlite"):
        for statement in split_statements(script):
            named = _NAME.match(statement)
            if named is not None:
                found[named.group(1)] = statement.rstrip(";").strip()
    return found


def _differences(conn: sqlite3.Connection) -> tuple[list[str], list[str]]:
    """(names to create, names to drop) on ``conn``'s schema as it is now."""
    wanted = expected()
    present = dict(conn.execute(_FOUND).fetchall())
    drop = [name for name, sql in present.items() if wanted.get(name) != sql]
    create = [name for name, sql in wanted.items() if present.get(name) != sql]
    return create, drop


def restore_triggers(conn: sqlite3.Connection) -> tuple[str, ...]:
    """Put the migrations' triggers back on ``conn``'s file; the names repaired (usually none)."""
    create, drop = _differences(conn)
    if not create and not drop:
        return ()
    conn.execute("BEGIN IMMEDIATE")
    try:
        create, drop = _differences(conn)  # another connection may have repaired it meanwhile
        for name in drop:
            conn.execute('DROP TRIGGER "{}"'.format(name.replace('"', '""')))
        for name in create:
            conn.execute(expected()[name])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    repaired = tuple(sorted({*create, *drop}))
    if repaired:
        log.warning(
            "SQLite store: triggers %s were missing, changed or foreign; restored from the "
            "migrations (run `guardrails audit verify` to see what was done meanwhile)",
            ", ".join(repaired),
        )
    return repaired
