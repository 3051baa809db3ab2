"""An in-memory store for tests: the same behaviour as the durable ones, in one process."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..native._tuples import replaced
from ._approval_rows import (
    Admission,
    ApprovalRecord,
    admission,
    check_decision,
    check_listed,
    listed,
)
from ._base import AuditRow, Claim, Snapshot, check_filters, check_times
from ._chain import GENESIS, content, link
from ._storable import storable

_ID = AuditRow._fields.index("id")

__all__ = ["MemoryStore"]


class MemoryStore:
    """Every table is a dict behind one lock. Thread-safe; nothing survives the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._audit: list[AuditRow] = []
        self._hashes: list[str] = []
        # Leases by key, then holder ([amount, expires_at]); and each holder's keys, so that
        # a renewal or a refusal reads only its own leases, not every call's in flight.
        self._leases: dict[str, dict[str, list[float]]] = {}
        self._holders: dict[str, set[str]] = {}
        self._counters: dict[str, int] = {}
        self._budgets: dict[str, list[int]] = {}
        self._kv: dict[str, str] = {}
        self._idem: dict[str, tuple[str, str, str | None, float]] = {}
        self._snapshots: dict[str, list[Snapshot]] = {}
        self._approvals: dict[str, ApprovalRecord] = {}
        self._scopes: dict[str, list[str]] = {}  # scope -> request ids, oldest first
        self.closed = False

    def append(self, row: AuditRow, /) -> int:
        row = storable(row)
        text = content(row)
        with self._lock:
            row_id = len(self._audit) + 1
            previous = self._hashes[-1] if self._hashes else GENESIS
            self._audit.append(replaced(row, _ID, row_id))  # NamedTuple._replace: 1 µs more
            self._hashes.append(link(previous, row_id, text))
            return row_id

    def append_many(self, rows: list[AuditRow], /) -> None:
        for row in rows:
            self.append(row)

    def audit_rows(self, *, after_id: int = 0, limit: int = 1000, **filters: str) -> list[AuditRow]:
        check_filters(filters)
        with self._lock:
            rows = self._audit[after_id:]
        picked = [r for r in rows if all(getattr(r, k) == v for k, v in filters.items())]
        return picked[:limit]

    def audit_chain(
        self, *, after_id: int = 0, limit: int = 1000
    ) -> list[tuple[AuditRow, str | None]]:
        with self._lock:
            end = after_id + limit
            return list(zip(self._audit[after_id:end], self._hashes[after_id:end], strict=True))

    def incr(self, key: str, by: int = 1, /) -> int:
        with self._lock:
            value = self._counters.get(key, 0) + by
            self._counters[key] = value
            return value

    def reserve(self, key: str, amount: int, cap: int, /) -> bool:
        with self._lock:
            entry = self._budgets.setdefault(key, [0, 0])
            if not _admits(entry, amount, cap):
                return False
            entry[1] += amount
            return True

    def settle(self, key: str, reserved: int, actual: int, /) -> int:
        with self._lock:
            entry = self._budgets.setdefault(key, [0, 0])
            entry[1] -= reserved
            entry[0] += actual
            return entry[0]

    def budget(self, key: str, /) -> tuple[int, int]:
        with self._lock:
            spent, reserved = self._budgets.get(key, (0, 0))
            return spent, reserved

    def reserve_leased(
        self, key: str, holder: str, amount: int, cap: int, now: float, until: float, /
    ) -> bool:
        check_times(now, until)
        with self._lock:
            entry = self._budgets.setdefault(key, [0, 0])
            if not _admits(entry, amount, cap):
                # Refused as things stand: give back what the key's expired leases hold, then ask
                # again (an admitted reservation leaves them: it did not need their room).
                leases = self._leases.get(key, {})
                for expired, (held, _) in [(h, x) for h, x in leases.items() if x[1] <= now]:
                    self._drop_lease(key, expired)
                    entry[1] -= int(held)
                if not _admits(entry, amount, cap):
                    return False
            entry[1] += amount
            leases = self._leases.setdefault(key, {})
            before = leases.get(holder, [0.0, until])[0]
            leases[holder] = [before + amount, until]
            self._holders.setdefault(holder, set()).add(key)
            return True

    def renew_leases(self, holder: str, until: float, /) -> int:
        return self.renew_leases_of((holder,), until)

    def renew_leases_of(self, holders: Sequence[str], until: float, /) -> int:
        """``renew_leases`` of each of ``holders`` at once; the leases renewed."""
        check_times(until)
        with self._lock:
            renewed = 0
            for holder in holders:
                for key in self._holders.get(holder, ()):
                    self._leases[key][holder][1] = until
                    renewed += 1
            return renewed

    def settle_leased(self, key: str, holder: str, actual: int, /) -> int:
        with self._lock:
            entry = self._budgets.setdefault(key, [0, 0])
            held = self._drop_lease(key, holder)
            if held is not None:
                entry[1] -= int(held[0])
            entry[0] += actual
            return entry[0]

    def _drop_lease(self, key: str, holder: str) -> list[float] | None:
        """Take ``holder``'s lease on ``key`` out of both indexes (under the lock)."""
        leases = self._leases.get(key)
        held = None if leases is None else leases.pop(holder, None)
        if held is None:
            return None
        if not leases:
            del self._leases[key]
        keys = self._holders[holder]
        keys.discard(key)
        if not keys:
            del self._holders[holder]
        return held

    def get(self, key: str, /) -> str | None:
        return self._kv.get(key)

    def compare_and_set(self, key: str, expected: str | None, new: str, /) -> bool:
        with self._lock:
            if self._kv.get(key) != expected:
                return False
            self._kv[key] = new
            return True

    def claim(self, key: str, owner: str, now: float, lease_until: float, /) -> Claim:
        check_times(now, lease_until)
        with self._lock:
            found = self._idem.get(key)
            if found is None or found[3] <= now:
                self._idem[key] = (owner, "pending", None, lease_until)
                return Claim("new")
            _, state, result, _ = found
            return Claim("done", result) if state == "done" else Claim("pending")

    def complete(self, key: str, owner: str, result: str, expires_at: float, /) -> bool:
        check_times(expires_at)
        with self._lock:
            found = self._idem.get(key)
            if found is None or found[0] != owner:
                return False
            self._idem[key] = (owner, "done", result, expires_at)
            return True

    def release(self, key: str, owner: str, /) -> None:
        with self._lock:
            found = self._idem.get(key)
            if found is not None and found[0] == owner and found[1] == "pending":
                del self._idem[key]

    def put_snapshot(self, key: str, data: bytes, at: float, /) -> int:
        check_times(at)
        with self._lock:
            versions = self._snapshots.setdefault(key, [])
            version = len(versions) + 1
            versions.append(Snapshot(key, version, at, bytes(data)))
            return version

    def snapshot(self, key: str, version: int | None = None, /) -> Snapshot | None:
        with self._lock:
            versions = self._snapshots.get(key, [])
            if not versions:
                return None
            if version is None:
                return versions[-1]
            return versions[version - 1] if 0 < version <= len(versions) else None

    # -- approval requests (docs/approvals.md) --

    def approval_admit(self, request: ApprovalRecord, now: float, /) -> Admission:
        """Consume a live approval of ``request``'s scope, report a live request, or open it."""
        check_times(now, request.requested_at, request.expires_at)
        with self._lock:
            ids = self._scopes.setdefault(request.scope, [])
            state, found = admission((self._approvals[i] for i in ids), now)
            if found is None:
                self._approvals[request.id] = found = request
                ids.append(request.id)
            elif state == "run":
                self._approvals[found.id] = found
            return Admission(state, found)

    def approval_decide(
        self, request_id: str, status: str, by: str, reason: str | None, now: float, /
    ) -> ApprovalRecord | None:
        """Decide a live pending request; the request as it stands after (None: no such id)."""
        check_times(now)
        check_decision(status)
        with self._lock:
            found = self._approvals.get(request_id)
            if found is not None and found.status == "pending" and found.expires_at > now:
                found = found._replace(status=status, decided_by=by, decided_at=now, reason=reason)
                self._approvals[request_id] = found
            return found

    def approval(self, request_id: str, /) -> ApprovalRecord | None:
        with self._lock:
            return self._approvals.get(request_id)

    def approvals(
        self, status: str | None, now: float, limit: int, tenant: str | None = None, /
    ) -> list[ApprovalRecord]:
        """Requests under ``status`` (effective: ``expired`` included), of ``tenant`` only
        when given, newest first."""
        check_times(now)
        check_listed(status)
        with self._lock:
            rows = [r for r in self._approvals.values() if tenant is None or r.tenant == tenant]
        rows.sort(key=lambda r: (r.requested_at, r.id), reverse=True)
        return [r for r in rows if listed(r, status, now)][:limit]

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _admits(entry: list[int], amount: int, cap: int) -> bool:
    """Whether a budget ``[spent, reserved]`` admits ``amount`` more under ``cap``."""
    used = entry[0] + entry[1]
    return used < cap and used + amount <= cap
