"""Who owns each published tool name, kept in the store (shared by every replica).

A name is claimed for the upstream that publishes it the first time a gateway
reads a listing that publishes it, with a compare-and-set: whichever replica
claims a name first decides its owner for every replica, and a gateway started
later (or again) keeps the names its store gave out. A name whose owner is no
longer an upstream of the configuration is free again.

Every function here is synchronous store work (callers on an event loop run it
through ``offloop``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Set

from ..store import Store, StoreUnavailable

__all__ = ["claim_names"]

_RETRIES = 64


def claim_names(store: Store, wanted: Mapping[str, str], configured: Set[str]) -> dict[str, str]:
    """The owner of each name of ``wanted`` (``name -> upstream``), claiming it for that
    upstream when the store holds no owner, or an owner not in ``configured``."""
    return {name: _claim(store, name, upstream, configured) for name, upstream in wanted.items()}


def _claim(store: Store, name: str, upstream: str, configured: Set[str]) -> str:
    key = "gateway.name:" + json.dumps(name, ensure_ascii=False)
    for _ in range(_RETRIES):
        current = store.get(key)
        if current is not None and current in configured:
            return current
        if store.compare_and_set(key, current, upstream):
            return upstream
    raise StoreUnavailable(f"the owner of the tool name {name!r}: the store kept changing")
