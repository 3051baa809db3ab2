"""Check the audit log's hash chain: the first row changed, removed or inserted out of order.

``verify(store)`` reads every row in id order and recomputes each hash from the
previous one (``_chain``). Ids are consecutive from 1, so a removed row leaves a
gap; a changed row, or one inserted by anything but the store, no longer
matches its hash. Rows written before the chain existed (no hash) are counted
and skipped, but only before the first hashed row. Removing the newest rows
leaves a shorter valid chain: compare ``head`` with a copy kept elsewhere to
catch that.
"""

from __future__ import annotations

from typing import NamedTuple

from ._base import AuditRow, Store
from ._chain import GENESIS, content, link

__all__ = ["Verified", "verify"]


class Verified(NamedTuple):
    """What ``verify`` found: ``bad`` is the id of the first row that breaks the chain."""

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
        return f"tampered: row {self.bad} {self.problem}"


def verify(store: Store, *, page: int = 1000) -> Verified:
    """Walk the chain of ``store`` from its first row to its last."""
    walk = _Walk()
    after = 0
    while True:
        rows = store.audit_chain(after_id=after, limit=page)
        for row, stored in rows:
            found = walk.step(row, stored)
            if found is not None:
                return found
        if len(rows) < page:
            return Verified(True, walk.rows, walk.unhashed, walk.previous)
        after = rows[-1][0].id or 0


class _Walk:
    __slots__ = ("expected", "previous", "rows", "unhashed")

    def __init__(self) -> None:
        self.expected = 1
        self.previous = GENESIS
        self.rows = 0
        self.unhashed = 0

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
        self.previous = stored
        self.rows += 1
        return None

    def _bad(self, row_id: int, problem: str) -> Verified:
        return Verified(False, self.rows, self.unhashed, self.previous, row_id, problem)
