"""Versioned schema migrations, shipped as ``migrations/<dialect>/NNNN_name.sql``."""

from __future__ import annotations

import sqlite3
from importlib import resources

__all__ = ["migrations", "split_statements"]


def migrations(dialect: str) -> list[tuple[int, str]]:
    """``(version, sql)`` pairs for a dialect, in version order."""
    folder = resources.files(__package__).joinpath("migrations", dialect)
    found = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql"):
            found.append((int(name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(found)


def split_statements(sql: str) -> list[str]:
    """Split a SQLite script into statements (trigger bodies stay whole)."""
    statements: list[str] = []
    buffer = ""
    for line in sql.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
