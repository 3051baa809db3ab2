"""What a PostgreSQL failure stands for, for the sync and the async path alike."""

from __future__ import annotations

from ._base import StoreUnavailable

__all__ = ["collided", "refused"]


def refused(exc: BaseException) -> StoreUnavailable:
    """The ``StoreUnavailable`` that stands for the backend failure ``exc`` (its type only)."""
    return StoreUnavailable(f"PostgreSQL store: {type(exc).__name__}")


def collided(exc: BaseException) -> bool:
    """Whether ``exc`` stands for an audit row whose id was taken by a row written around the store."""
    return type(exc.__cause__).__name__ == "UniqueViolation"
