"""What a ``SQLiteStore`` connection may not do to the audit log, whatever SQL it is given.

SQLite has no roles, so the store's own connections carry an authorizer
(``sqlite3.Connection.set_authorizer``), installed after the migrations ran:
it refuses, at prepare time, every statement that would update, delete,
drop or alter ``guardrails_audit``, create or drop any trigger, and the
pragmas that would switch off the schema's defences. The triggers refuse the rest (``REPLACE``
and upserts on an existing id). Another program opening the file is not
bound by this: the hash chain makes its edits visible (``guardrails audit verify``),
and the store puts back the triggers it dropped or changed the next time it
opens a connection (``_sqlite_triggers``).
"""

from __future__ import annotations

import sqlite3

__all__ = ["AUDIT_TABLE", "refuse_audit_changes"]

AUDIT_TABLE = "guardrails_audit"

_ON_TABLE = {  # action -> position of the table name among the callback's arguments
    sqlite3.SQLITE_DELETE: 0,
    sqlite3.SQLITE_UPDATE: 0,
    sqlite3.SQLITE_DROP_TABLE: 0,
    sqlite3.SQLITE_DROP_TEMP_TABLE: 0,
    sqlite3.SQLITE_ALTER_TABLE: 1,
}
# No trigger may be created or dropped on any table: a trigger elsewhere could
# write to the audit log, and the audit log's own triggers are its defence.
_TRIGGERS = frozenset(
    {
        sqlite3.SQLITE_CREATE_TRIGGER,
        sqlite3.SQLITE_CREATE_TEMP_TRIGGER,
        sqlite3.SQLITE_DROP_TRIGGER,
        sqlite3.SQLITE_DROP_TEMP_TRIGGER,
    }
)
_PRAGMAS = frozenset({"writable_schema", "recursive_triggers", "trusted_schema"})


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: str | None) -> int:
    if action in _TRIGGERS:
        return sqlite3.SQLITE_DENY
    where = _ON_TABLE.get(action)
    if where is not None:
        table = arg1 if where == 0 else arg2
        if table is not None and table.lower() == AUDIT_TABLE:
            return sqlite3.SQLITE_DENY
    elif action == sqlite3.SQLITE_PRAGMA and arg1 is not None and arg1.lower() in _PRAGMAS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def refuse_audit_changes(conn: sqlite3.Connection) -> None:
    """Make ``conn`` unable to rewrite or remove audit rows (and its triggers)."""
    conn.execute("PRAGMA recursive_triggers = ON")  # REPLACE's delete fires the delete trigger
    conn.set_authorizer(_authorize)
