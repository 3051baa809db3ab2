"""Durable shared state behind one protocol: in memory, SQLite (default) or PostgreSQL.

``open_store(url)`` picks the implementation from a URL: ``memory:``, a file
path or ``sqlite:///path``, or ``postgresql://...``. ``PostgresStore`` is
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
    "from_micros",
    "open_store",
    "to_micros",
]


def open_store(url: str, **options: Any) -> Store:
    """A store from a URL: ``memory:``, ``sqlite:///path`` (or a bare path), ``postgresql://``."""
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
