"""Lease renewal: a reservation stays held while its call runs, and only then.

``PaidCall`` reserves under a lease (``Store.reserve_leased``) that expires
``lease`` seconds later unless renewed. One daemon thread per process renews
the leases of the calls running in it every ``lease / 3`` seconds, those of one
store together (``renew_leases_of``, where the store has it). When the
process dies, renewal stops, and once the lease expired the first reservation
on the same key that needs the room gives the amount back (one the cap refuses
as things stand gives back the key's expired leases and asks again): a dead
holder's reservation is released at most ``lease`` seconds after its last
renewal.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import NamedTuple

from ..store import Store

__all__ = ["Held", "Renewer", "renewer"]

log = logging.getLogger("guardrails")


class Held(NamedTuple):
    store: Store
    lease: float
    clock: Callable[[], float]


class Renewer:
    """Renews the leases of the calls running in this process."""

    def __init__(self) -> None:
        self._held: dict[str, Held] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def hold(self, holder: str, held: Held) -> None:
        """Renew ``holder``'s leases until ``drop``."""
        with self._lock:
            if self._pid != os.getpid():  # a forked child: no thread, no parent's calls
                self._held, self._thread, self._pid = {}, None, os.getpid()
                self._wake = threading.Event()
            self._held[holder] = held
            # (``_loop`` clears ``_thread`` under this lock however it ends.)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="guardrails-lease-renewer", daemon=True
                )
                self._thread.start()

    def drop(self, holder: str) -> None:
        with self._lock:
            self._held.pop(holder, None)

    def tick(self) -> int:
        """Renew every held lease once; the number of holders renewed.

        The holders of one store, lease and clock are renewed together: in one
        call of the store's ``renew_leases_of`` when it has one (one transaction
        or statement, not one per call in flight), else one by one.
        """
        with self._lock:
            held = list(self._held.items())
        groups: dict[tuple[int, float, int], tuple[Held, list[str]]] = {}
        for holder, found in held:
            ident = (id(found.store), found.lease, id(found.clock))
            groups.setdefault(ident, (found, []))[1].append(holder)
        renewed = 0
        for (store, lease, clock), holders in groups.values():
            many = getattr(store, "renew_leases_of", None)
            if many is not None:
                try:
                    many(holders, clock() + lease)
                    renewed += len(holders)
                except Exception:  # the store is away: the leases may lapse (documented)
                    log.warning("leases of %d holders not renewed", len(holders))
                continue
            for holder in holders:
                try:
                    store.renew_leases(holder, clock() + lease)
                    renewed += 1
                except Exception:
                    log.warning("lease of %s not renewed", holder)
        return renewed

    def _interval(self) -> float | None:
        with self._lock:
            if not self._held:
                return None
            return min(h.lease for h in self._held.values()) / 3

    def _loop(self) -> None:
        try:
            self._renew()
        finally:  # ended by a failure (a stop): the next ``hold`` starts another
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None

    def _renew(self) -> None:
        while True:
            interval = self._interval()
            if interval is None:
                with self._lock:
                    if not self._held:
                        self._thread = None
                        return
                continue
            self._wake.wait(interval)
            self.tick()


renewer = Renewer()
"""The process's renewer."""
