"""Effect control: the paid-call choke-point with caps, idempotency, snapshots.

Each piece is a ``CallHook`` (or, for ``PaidCall``, a wrapper) over one
``Store``. Put them in this order, after the audit log::

    hooks=[audit, Idempotency(store), Snapshots(store)]

so that a replay is answered before a snapshot is taken, and every call that
reached step 6 is audited last, with what the others learned.
"""

from __future__ import annotations

from .._call_state import CallState, current
from .idempotency import Idempotency, idempotency_key
from .paid import CapExceeded, PaidCall, TokenPrices, Usage
from .snapshot import Snapshots

__all__ = [
    "CallState",
    "CapExceeded",
    "Idempotency",
    "PaidCall",
    "Snapshots",
    "TokenPrices",
    "Usage",
    "current",
    "idempotency_key",
]
