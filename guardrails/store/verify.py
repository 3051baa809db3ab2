"""Check the audit log's hash chain: the first row changed, removed or inserted out of order.

``verify(store)`` reads every row in id order and recomputes each hash from the
previous one (``_chain``). Ids are consecutive from 1, so a removed row leaves a
gap; a changed row, or one inserted by anything but the store, no longer
matches its hash. Rows written before the chain existed (no hash) are counted
and skipped, but only before the first hashed row.

What a chain cannot show on its own: removing the newest rows leaves a
shorter valid chain, and whoever can write every row can recompute every
hash. ``verify(store, anchor=(id, hash))`` checks the chain against a head
kept elsewhere (a checkpoint, ``checkpoint.py``): the row ``id`` must still
be there with that hash. On PostgreSQL it also compares the chain head table
with the newest row: a head no row has was written around the store.
"""

from __future__ import annotations

from typing import NamedTuple

from ._base import AuditRow, Store
from ._chain import GENESIS, content, link

__all__ = ["Verified", "verify"]


class Verified(NamedTuple):
    """What ``verify`` found: ``bad`` is the id of the first row that breaks the chain
    (None when the rows hold and the chain head table does not)."""

    ok: bool
    rows: int
    unhashed: int
    head: str
    bad: int | None = None
    problem: str | None = None

    def line(self) -> str:
        """One line for a person: ``ok: ...`` or ``tampered: row N ...``."""
        if self.ok:
            older = f"; {self.unhashed} older rows have no hash" if self.unhashed else ""
            return f"ok: {self.rows} rows, chain head {self.head or '(empty)'}{older}"
        if self.bad is None:
            return f"tampered: {self.problem}"
        return f"tampered: row {self.bad} {self.problem}"


def verify(store: Store, *, page: int = 1000, anchor: tuple[int, str] | None = None) -> Verified:
    """Walk the chain of ``store`` from its first row to its last; with ``anchor``
    (a row id and the hash it had), that row must still hold that hash."""
    walk = _Walk(anchor)
    after = 0
    while True:
        rows = store.audit_chain(after_id=after, limit=page)
        for row, stored in rows:
            found = walk.step(row, stored)
            if found is not None:
                return found
        if len(rows) < page:
            return walk.end() or _head_table(store, walk) or walk.verified()
        after = rows[-1][0].id or 0


def _head_table(store: Store, walk: _Walk) -> Verified | None:
    """On a store with a chain head table (PostgreSQL), a head that no row has."""
    read = getattr(store, "audit_head", None)
    head = read() if callable(read) else None
    last = walk.expected - 1
    if head is None or head == (last, walk.previous) or (head[0] == 0 and not walk.rows):
        return None
    if head[0] > last:  # rows appended since the walk read its last page
        found = store.audit_chain(after_id=head[0] - 1, limit=1)
        if found and found[0][0].id == head[0] and found[0][1] == head[1]:
            return None
    elif head[0] < last:
        found = store.audit_chain(after_id=head[0] - 1, limit=1)
        if head[0] > 0 and found and found[0][1] == head[1]:
            return walk._bad(
                head[0] + 1,
                f"was written around the store: the chain head table still names row {head[0]}",
            )
    return walk._bad(
        None,
        f"the chain head table holds row {head[0]} with a hash that row does not have: "
        "it was overwritten (the rows themselves verify)",
    )


class _Walk:
    __slots__ = ("anchor", "expected", "previous", "rows", "unhashed")

    def __init__(self, anchor: tuple[int, str] | None = None) -> None:
        self.anchor = anchor
        self.expected = 1
        self.previous = GENESIS
        self.rows = 0
        self.unhashed = 0

    def end(self) -> Verified | None:
        """At the last row: a checkpoint past it means the newest rows were removed."""
        last = self.expected - 1
        if self.anchor is None or self.anchor[0] <= last:
            return None
        gone = self.expected if self.anchor[0] == self.expected else None
        removed = f"rows {self.expected} to {self.anchor[0]}" if gone is None else f"row {gone}"
        return self._bad(
            self.expected,
            f"was removed: the checkpoint holds {self.anchor[0]} rows, the store {last} "
            f"({removed} deleted from the end)",
        )

    def verified(self) -> Verified:
        return Verified(True, self.rows, self.unhashed, self.previous)

    def step(self, row: AuditRow, stored: str | None) -> Verified | None:
        row_id = row.id or 0
        if row_id != self.expected:
            if row_id < self.expected:
                return self._bad(row_id, "is out of order")
            gone = "" if row_id == self.expected + 1 else f" (rows {self.expected} to {row_id - 1})"
            return self._bad(self.expected, f"was removed{gone}")
        self.expected = row_id + 1
        if stored is None:
            if self.rows:
                return self._bad(row_id, "has no hash: it was written outside the store")
            self.unhashed += 1
            return None
        try:
            text = content(row)
        except TypeError:
            return self._bad(row_id, "was changed: it holds a value the store never writes")
        if link(self.previous, row_id, text) != stored:
            return self._bad(
                row_id, "was changed or inserted out of order: its hash does not match the chain"
            )
        if self.anchor is not None and self.anchor[0] == row_id and self.anchor[1] != stored:
            return self._bad(
                row_id,
                "differs from the checkpoint: the chain was rewritten up to it "
                "(every hash recomputed)",
            )
        self.previous = stored
        self.rows += 1
        return None

    def _bad(self, row_id: int | None, problem: str) -> Verified:
        return Verified(False, self.rows, self.unhashed, self.previous, row_id, problem)
