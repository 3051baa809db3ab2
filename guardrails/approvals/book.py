"""Where approval requests live: any store with the four approval methods (all three built-in ones).

The methods stay out of the ``Store`` protocol, so that a user's own store
keeps conforming; a store without them is refused when an ``ApprovalGate`` or
``Approvals`` is built on it, never when a call arrives.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import ConfigurationError
from ..store._approval_rows import Admission, ApprovalRecord

__all__ = ["ApprovalBook", "book_of"]

_METHODS = ("approval_admit", "approval_decide", "approval", "approvals")


class ApprovalBook(Protocol):
    """The store methods approvals need; each one is atomic."""

    def approval_admit(self, request: ApprovalRecord, now: float, /) -> Admission: ...

    def approval_decide(
        self, request_id: str, status: str, by: str, reason: str | None, now: float, /
    ) -> ApprovalRecord | None: ...

    def approval(self, request_id: str, /) -> ApprovalRecord | None: ...

    def approvals(
        self, status: str | None, now: float, limit: int, tenant: str | None = None, /
    ) -> list[ApprovalRecord]: ...

    def append(self, row: Any, /) -> int: ...


def book_of(store: Any, owner: str) -> ApprovalBook:
    """``store`` when it keeps approval requests; ``ConfigurationError`` naming ``owner`` if not."""
    inner = getattr(store, "store", None)  # a wrapper (``WithDeadline``) passes them through
    for method in _METHODS:
        if not callable(getattr(store, method, None)) or (
            inner is not None and not callable(getattr(inner, method, None))
        ):
            raise ConfigurationError(
                f"{owner}: the store {type(store).__name__} keeps no approval requests "
                f"(it has no {method}); use MemoryStore, SQLiteStore or PostgresStore"
            )
    book: ApprovalBook = store
    return book
