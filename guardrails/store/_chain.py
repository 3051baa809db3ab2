"""The audit log's hash chain: each row's hash covers the previous row's hash and its own content.

``hash(n) = sha256(hash(n-1) | n | content(row n))`` in hex, with ``""`` before
the first row. ``content`` is a canonical text of the storable row: each
column in ``AUDIT_COLUMNS`` order, tagged with its type and, for text, its
length, so no two different rows share a content. The stores compute the hash
inside the transaction that writes the row, after reading the previous one, so
concurrent writers extend one chain. ``verify`` recomputes it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ._base import AuditRow

__all__ = ["GENESIS", "content", "link", "link_rows"]

GENESIS = ""
"""The hash before the first row."""


def content(row: AuditRow) -> str:
    """The canonical text of a storable row's columns (not its id)."""
    return "|".join([_encode(value) for value in row.values()])


def _encode(value: Any) -> str:
    kind = type(value)
    if value is None:
        return "~"
    if kind is str:
        return f"s{len(value)}:{value}"
    if kind is int:
        return f"i{value}"
    if kind is float:
        return f"f{value.hex()}"
    raise TypeError(f"not a storable column value: {kind.__name__}")


def link(previous: str, row_id: int, text: str) -> str:
    """The hash of row ``row_id`` whose content is ``text``, after a row hashed ``previous``."""
    return hashlib.sha256(f"{previous}|{row_id}|{text}".encode()).hexdigest()


def link_rows(previous: str, first_id: int, rows: list[AuditRow]) -> list[tuple[int, str]]:
    """Ids and hashes for ``rows`` appended after the row ``first_id - 1`` hashed ``previous``."""
    out = []
    for offset, row in enumerate(rows):
        previous = link(previous, first_id + offset, content(row))
        out.append((first_id + offset, previous))
    return out
