"""The bounded memory of provenance: one session's labels, and one tenant's sessions.

A ``Ledger`` keeps the labels of trusted sources and of untrusted ones in two
maps, each bounded on its own, so that untrusted text can never push a trusted
label out. When a map is full, a new key is dropped and the ledger says so:
``partial`` is the mask of the sources whose labels it may be missing, which
the rules read to decide conservatively (``checks.Compiled._provenance``).

A ``Tenant`` keeps its own sessions (least recently used first out), so one
tenant's sessions never push out another's. A session pushed out with no
store to read it back from is remembered in a bounded ``Forgotten``; once that
is full, every new session of the tenant is taken to be one that was pushed
out: its ledger starts partial.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

__all__ = ["Forgotten", "Ledger", "Tenant"]

# How many pushed-out keys a Forgotten holds, per key kept in memory.
FORGOTTEN_PER_KEPT = 10


class Ledger:
    """The labels of one session: key -> mask of the sources it was seen in."""

    __slots__ = (
        "contexts",
        "evicted",
        "limit",
        "lock",
        "partial",
        "pending",
        "stamp",
        "synced",
        "trusted",
        "trusted_mask",
        "untrusted",
        "untrusted_mask",
        "view",
    )

    def __init__(self, limit: int, trusted_mask: int, all_mask: int, *, partial: int = 0) -> None:
        self.stamp: Any = None  # the call whose check last read the store
        self.view: Any = None  # its SessionView, made once
        self.trusted: dict[Any, int] = {}
        self.untrusted: dict[Any, int] = {}
        self.limit = limit  # of each map
        self.trusted_mask = trusted_mask
        self.untrusted_mask = all_mask & ~trusted_mask
        self.partial = partial  # the sources whose labels may be missing here
        self.pending = 0  # the same, until a store chunk being written is read
        self.evicted = False  # pushed out of its tenant's memory
        self.synced = 0  # the last store chunk read
        self.contexts: list[Any] = []  # the context objects already labelled (a few)
        self.lock = threading.Lock()

    def add(self, keys: Iterable[Any], bit: int) -> None:
        """Label ``keys`` with one source's ``bit``; past the bound of its map, mark it partial."""
        trusted = bool(bit & self.trusted_mask)
        entries = self.trusted if trusted else self.untrusted
        get = entries.get
        with self.lock:
            room = self.limit - len(entries)
            for key in keys:
                old = get(key)
                if old is None:
                    if room <= 0:
                        self.partial |= self.trusted_mask if trusted else self.untrusted_mask
                        continue
                    room -= 1
                    entries[key] = bit
                elif not old & bit:
                    entries[key] = old | bit

    def find(self, key: Any) -> int:
        """The mask of the sources ``key`` was seen in (0: not seen, or dropped if partial)."""
        return self.trusted.get(key, 0) | self.untrusted.get(key, 0)

    @property
    def entries(self) -> dict[Any, int]:
        """Every label kept, trusted and untrusted together: key -> mask (a copy)."""
        with self.lock:
            merged = dict(self.untrusted)
            for key, bit in self.trusted.items():
                merged[key] = merged.get(key, 0) | bit
        return merged


class Forgotten:
    """Keys pushed out of memory for good, at most ``limit``; once more were, every key is."""

    __slots__ = ("full", "keys", "limit")

    def __init__(self, limit: int) -> None:
        self.keys: OrderedDict[Hashable, None] = OrderedDict()
        self.limit = limit
        self.full = False

    def add(self, key: Hashable) -> None:
        if self.full:
            return
        self.keys[key] = None
        if len(self.keys) > self.limit:
            # Dropping the oldest would make it look never seen: a clean record.
            self.full = True
            self.keys.clear()

    def __contains__(self, key: Hashable) -> bool:
        return self.full or key in self.keys


class Tenant:
    """One tenant's sessions in memory, least recently used first out."""

    __slots__ = ("forgotten", "sessions")

    def __init__(self, max_sessions: int, *, forgotten: bool = False) -> None:
        self.sessions: OrderedDict[str, Ledger] = OrderedDict()
        self.forgotten = Forgotten(FORGOTTEN_PER_KEPT * max_sessions)
        self.forgotten.full = forgotten  # a tenant itself pushed out: any session may have been

    def evict(self, max_sessions: int, remember: bool) -> None:
        """Push out the least recently used sessions past ``max_sessions``."""
        while len(self.sessions) > max_sessions:
            name, old = self.sessions.popitem(last=False)
            old.evicted = True
            if remember:
                self.forgotten.add(name)
