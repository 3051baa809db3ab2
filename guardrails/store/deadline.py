"""A deadline on every store call: a store that answers too late counts as unavailable.

``WithDeadline(store, seconds)`` runs each call of the wrapped store on a small
pool of threads and waits at most ``seconds`` for it. A late call raises
``StoreUnavailable``, so the hooks treat it like a store that is down: an
effectful tool does not run (``unavailable``, reason ``audit_unavailable`` or
``store_unavailable``), a read-only tool runs and its result carries a
counted ``audit_unavailable`` escape.

A call that had not started when its deadline passed never runs. One that was
already running cannot be stopped: it finishes in the background, so a late
audit row may still appear (a ``call_started`` row with no ``tool_call``
row, for a tool that did not run), and a late leased reservation is given back
when its lease expires. Waiting costs a thread hand-off on every call (see
``benchmarks/HISTORY.md``); use it where a hung store is likelier than a slow one
is costly, or rely on the backends' own bounds (SQLite ``busy_timeout``,
PostgreSQL ``timeout`` and ``connect_timeout``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from ..errors import ConfigurationError
from ._base import AuditRow, Claim, Snapshot, Store, StoreUnavailable

__all__ = ["WithDeadline"]

T = TypeVar("T")


class WithDeadline:
    """``store`` with a deadline of ``seconds`` on each call; a late call is ``StoreUnavailable``."""

    def __init__(self, store: Store, seconds: float, *, threads: int = 4) -> None:
        if not seconds > 0 or threads < 1:
            raise ConfigurationError(
                f"WithDeadline: seconds must be positive and threads at least 1, "
                f"not {seconds!r} and {threads!r}"
            )
        self.store = store
        self.seconds = seconds
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        pool = self._pool
        if pool is not None and self._pid == os.getpid():
            return pool
        with self._lock:
            if self._pool is None or self._pid != os.getpid():  # after a fork: a new pool
                self._pool = ThreadPoolExecutor(self.threads, "guardrails-store")
                self._pid = os.getpid()
            return self._pool

    def _call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        future: Future[T] = self._executor().submit(method, *args, **kwargs)
        try:
            return future.result(timeout=self.seconds)
        except FutureTimeout:
            future.cancel()  # not started yet: it never runs
            raise StoreUnavailable(
                f"store call {method.__name__} exceeded its deadline of {self.seconds} s"
            ) from None

    # -- the Store protocol, each method through the deadline --------------------

    def append(self, row: AuditRow, /) -> int:
        return self._call(self.store.append, row)

    def append_many(self, rows: list[AuditRow], /) -> None:
        self._call(self.store.append_many, rows)

    def audit_rows(self, *, after_id: int = 0, limit: int = 1000, **filters: str) -> list[AuditRow]:
        return self._call(self.store.audit_rows, after_id=after_id, limit=limit, **filters)

    def audit_chain(
        self, *, after_id: int = 0, limit: int = 1000
    ) -> list[tuple[AuditRow, str | None]]:
        return self._call(self.store.audit_chain, after_id=after_id, limit=limit)

    def incr(self, key: str, by: int = 1, /) -> int:
        return self._call(self.store.incr, key, by)

    def reserve(self, key: str, amount: int, cap: int, /) -> bool:
        return self._call(self.store.reserve, key, amount, cap)

    def settle(self, key: str, reserved: int, actual: int, /) -> int:
        return self._call(self.store.settle, key, reserved, actual)

    def budget(self, key: str, /) -> tuple[int, int]:
        return self._call(self.store.budget, key)

    def reserve_leased(
        self, key: str, holder: str, amount: int, cap: int, now: float, until: float, /
    ) -> bool:
        return self._call(self.store.reserve_leased, key, holder, amount, cap, now, until)

    def renew_leases(self, holder: str, until: float, /) -> int:
        return self._call(self.store.renew_leases, holder, until)

    def settle_leased(self, key: str, holder: str, actual: int, /) -> int:
        return self._call(self.store.settle_leased, key, holder, actual)

    def renew_leases_of(self, holders: Sequence[str], until: float, /) -> int:
        """The wrapped store's ``renew_leases_of`` when it has one, else its
        ``renew_leases`` for each holder: one deadline for them all."""
        many = getattr(self.store, "renew_leases_of", None)
        if many is not None:
            return int(self._call(many, holders, until))
        return self._call(_renew_each, self.store, holders, until)

    def get(self, key: str, /) -> str | None:
        return self._call(self.store.get, key)

    def compare_and_set(self, key: str, expected: str | None, new: str, /) -> bool:
        return self._call(self.store.compare_and_set, key, expected, new)

    def claim(self, key: str, owner: str, now: float, lease_until: float, /) -> Claim:
        return self._call(self.store.claim, key, owner, now, lease_until)

    def complete(self, key: str, owner: str, result: str, expires_at: float, /) -> bool:
        return self._call(self.store.complete, key, owner, result, expires_at)

    def release(self, key: str, owner: str, /) -> None:
        self._call(self.store.release, key, owner)

    def put_snapshot(self, key: str, data: bytes, at: float, /) -> int:
        return self._call(self.store.put_snapshot, key, data, at)

    def snapshot(self, key: str, version: int | None = None, /) -> Snapshot | None:
        return self._call(self.store.snapshot, key, version)

    # -- approval requests: passed through when the wrapped store keeps them --

    def approval_admit(self, request: Any, now: float, /) -> Any:
        return self._call(self.store.approval_admit, request, now)  # type: ignore[attr-defined]

    def approval_decide(
        self, request_id: str, status: str, by: str, reason: str | None, now: float, /
    ) -> Any:
        method = self.store.approval_decide  # type: ignore[attr-defined]
        return self._call(method, request_id, status, by, reason, now)

    def approval(self, request_id: str, /) -> Any:
        return self._call(self.store.approval, request_id)  # type: ignore[attr-defined]

    def approvals(
        self, status: str | None, now: float, limit: int, tenant: str | None = None, /
    ) -> Any:
        method = self.store.approvals  # type: ignore[attr-defined]
        return self._call(method, status, now, limit, tenant)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def __enter__(self) -> WithDeadline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _renew_each(store: Store, holders: Sequence[str], until: float) -> int:
    return sum(store.renew_leases(holder, until) for holder in holders)
