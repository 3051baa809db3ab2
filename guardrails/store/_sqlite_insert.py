"""The SQLite audit ``INSERT`` of one row, its NULL columns written in the statement.

Python's ``sqlite3`` module binds a ``None`` parameter through its adapter
lookup (it builds a key, misses, and raises and clears an ``AttributeError``
on the way), which costs about as much per column as binding the row's text;
a tool call's row has a dozen NULL columns. So the statement says ``NULL``
where the row has ``None``, one statement per set of NULL columns, and only
the other values are bound. The statements are built from the column names
and the NULL bits alone, never from a value, and kept in a bounded table (the
connection's statement cache keeps each prepared); past it, a row binds every
column in the one statement that names them all.

``params_py`` is the reference for the compiled core's ``sqlite_params``
(``_csrc/audit_row.c``), which ``tests/store/test_sqlite_insert.py`` compares.
"""

from __future__ import annotations

from typing import Any

from ..native._compiled import CORE
from ._base import AUDIT_COLUMNS, AuditRow

__all__ = ["INSERT", "insert", "params_py"]

_COLUMNS = ", ".join(AUDIT_COLUMNS)


def _text(nulls: int) -> str:
    """The INSERT of a row with its id and hash, ``NULL`` in each column of ``nulls``."""
    values = ", ".join("NULL" if nulls >> i & 1 else "?" for i in range(len(AUDIT_COLUMNS)))
    return f"INSERT INTO guardrails_audit (id, {_COLUMNS}, hash) VALUES (?, {values}, ?)"


INSERT = _text(0)
"""A row with its id and hash, every column bound. An id already taken fails (the
primary key and the ``no_replace`` trigger): how an append learns the head moved."""

_STATEMENTS_KEPT = 64  # sets of NULL columns with a statement of their own (cache: 128)
_statements: dict[int, str] = {0: INSERT}


def params_py(row: AuditRow, row_id: int, digest: str) -> tuple[int, tuple[Any, ...]]:
    """The NULL columns of ``row`` (not its id) as bits, and ``(row_id, the others, digest)``."""
    nulls = 0
    kept: list[Any] = [row_id]
    for index, value in enumerate(row[: len(AUDIT_COLUMNS)]):
        if value is None:
            nulls |= 1 << index
        else:
            kept.append(value)
    kept.append(digest)
    return nulls, tuple(kept)


def _statement(nulls: int) -> str | None:
    """The INSERT with ``NULL`` in each column of ``nulls``; None once the table is full."""
    if len(_statements) >= _STATEMENTS_KEPT or nulls >> len(AUDIT_COLUMNS):
        return None
    sql = _statements[nulls] = _text(nulls)
    return sql


def insert(row: AuditRow, row_id: int, digest: str) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters that write storable ``row`` as ``row_id`` hashed ``digest``."""
    split = _params(row, row_id, digest)
    if split is None:
        split = params_py(row, row_id, digest)
    nulls, params = split
    sql = _statements.get(nulls) or _statement(nulls)
    if sql is None:
        return INSERT, (row_id, *row[: len(AUDIT_COLUMNS)], digest)
    return sql, params


_params = (lambda row, row_id, digest: None) if CORE is None else CORE.sqlite_params
