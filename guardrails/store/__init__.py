"""Durable shared state behind one protocol: in memory, SQLite (default) or PostgreSQL.

``open_store(url)`` picks the implementation from a URL: ``memory:``, a file
path or ``sqlite:///path``, or ``postgresql://...``; ``deadline=`` wraps it in
``WithDeadline``. ``PostgresStore`` is
imported lazily because psycopg is an optional dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import (
    AUDIT_COLUMNS,
    AuditRow,
    Claim,
    Snapshot,
    Store,
    StoreError,
    StoreUnavailable,
    from_micros,
    to_micros,
)
from .deadline import WithDeadline
from .memory import MemoryStore
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "AUDIT_COLUMNS",
    "AuditRow",
    "Claim",
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "Snapshot",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "WithDeadline",
    "from_micros",
    "open_store",
    "to_micros",
]


def open_store(url: str, *, deadline: float | None = None, **options: Any) -> Store:
    """A store from a URL: ``memory:``, ``sqlite:///path`` (or a bare path), ``postgresql://``.

    With ``deadline`` (seconds), a store call that takes longer is ``StoreUnavailable``.
    """
    store = _open(url, **options)
    return store if deadline is None else WithDeadline(store, deadline)


def _open(url: str, **options: Any) -> Store:
    if url == "memory:":
        return MemoryStore()
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(url, **options)
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///") :]
    elif "://" in url:
        raise StoreError(f"unknown store URL scheme in {url.split('://', 1)[0]!r}")
    return SQLiteStore(url, **options)


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
