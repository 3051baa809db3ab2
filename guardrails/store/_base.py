"""The store protocol and the values that cross it.

Everything that must be shared between processes or survive one goes through
``Store``: the audit log, spend counters, idempotency keys, workflow phases,
call counters and snapshots. Methods are synchronous and each one is atomic on
its own; implementations turn every backend failure into ``StoreUnavailable``.
Money is counted in integer micro-units so that caps compare exactly.
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple, Protocol, cast, runtime_checkable

from ..errors import GuardrailsError, StopRun

__all__ = [
    "AUDIT_COLUMNS",
    "AuditRow",
    "Claim",
    "Snapshot",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "from_micros",
    "to_micros",
]


class StoreError(GuardrailsError):
    """A store was used wrongly (for example an unknown audit filter)."""


class StoreUnavailable(StoreError, StopRun):
    """The backend could not be reached or refused a write. The action must not go on."""


class AuditRow(NamedTuple):
    """One append-only audit row: a tool call, a paid call or a choke-point decision (a value).

    JSON columns (``verdicts``, ``escapes``, ``detail``) hold text. ``at`` is
    Unix time in seconds; ``id`` is given by the store. Argument values are
    never recorded, and exception text (``error``) only when the user opts in.
    ``altered`` is set by the store when a column had to be made storable
    (JSON: column -> ``escaped``/``truncated``/``not_text``/...).
    """

    kind: str
    at: float = 0.0
    call_id: str | None = None
    tenant: str | None = None
    session: str | None = None
    agent: str | None = None
    workflow: str | None = None
    tool: str | None = None
    outcome: str | None = None
    verdict: str | None = None
    reason: str | None = None
    verdicts: str | None = None
    escapes: str | None = None
    duration_us: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    exception: str | None = None
    error: str | None = None
    detail: str | None = None
    altered: str | None = None
    id: int | None = None

    def values(self) -> tuple[Any, ...]:
        """The column values in ``AUDIT_COLUMNS`` order (without ``id``)."""
        return self[:-1]


AUDIT_COLUMNS: tuple[str, ...] = AuditRow._fields[:-1]
AUDIT_FILTERS = frozenset(
    {"kind", "call_id", "tenant", "session", "agent", "workflow", "tool", "outcome", "reason"}
)


class Claim(NamedTuple):
    """What ``Store.claim`` found for an idempotency key.

    ``new``: the caller owns the key and must run the effect; ``done``: the
    first execution's ``result`` (JSON text); ``pending``: another owner is
    running it now.
    """

    state: Literal["new", "done", "pending"]
    result: str | None = None


class Snapshot(NamedTuple):
    key: str
    version: int
    at: float
    data: bytes


@runtime_checkable
class Store(Protocol):
    """Durable shared state. Every method is atomic; none updates or deletes audit rows."""

    # -- audit log (append-only) --
    def append(self, row: AuditRow, /) -> int: ...
    def append_many(self, rows: list[AuditRow], /) -> None: ...
    def audit_rows(
        self, *, after_id: int = 0, limit: int = 1000, **filters: str
    ) -> list[AuditRow]: ...
    def audit_chain(
        self, *, after_id: int = 0, limit: int = 1000
    ) -> list[tuple[AuditRow, str | None]]: ...

    # -- counters (session-wide ceilings) --
    def incr(self, key: str, by: int = 1, /) -> int: ...

    # -- budgets, in micro-units: reserve before, settle after --
    def reserve(self, key: str, amount: int, cap: int, /) -> bool: ...
    def settle(self, key: str, reserved: int, actual: int, /) -> int: ...
    def budget(self, key: str, /) -> tuple[int, int]: ...
    # a reservation held under a lease: released if not renewed before ``until``
    def reserve_leased(
        self, key: str, holder: str, amount: int, cap: int, now: float, until: float, /
    ) -> bool: ...
    def renew_leases(self, holder: str, until: float, /) -> int: ...
    def settle_leased(self, key: str, holder: str, actual: int, /) -> int: ...

    # -- small values with compare-and-set (workflow phases) --
    def get(self, key: str, /) -> str | None: ...
    def compare_and_set(self, key: str, expected: str | None, new: str, /) -> bool: ...

    # -- idempotency keys --
    def claim(self, key: str, owner: str, now: float, lease_until: float, /) -> Claim: ...
    def complete(self, key: str, owner: str, result: str, expires_at: float, /) -> bool: ...
    def release(self, key: str, owner: str, /) -> None: ...

    # -- versioned snapshots --
    def put_snapshot(self, key: str, data: bytes, at: float, /) -> int: ...
    def snapshot(self, key: str, version: int | None = None, /) -> Snapshot | None: ...

    def close(self) -> None: ...


def to_micros(amount: float) -> int:
    """Money to integer micro-units (1e-6 of the currency unit), rounded."""
    return round(amount * 1_000_000)


def from_micros(micros: int) -> float:
    return micros / 1_000_000


def check_times(*times: object) -> None:
    """Refuse a time that is not a number of seconds, or is NaN (``StoreError``).

    The backends disagree on NaN: SQLite stores it as NULL, PostgreSQL sorts it
    after every number (a claim or lease compared with it would look expired),
    Python compares it with nothing. Infinity is a time like any other (a lease
    that never expires). Only the value is read: nothing of a subclass runs.
    """
    for value in times:
        kind = type(value)  # not isinstance: it may read a hostile __class__
        if issubclass(kind, float):
            if math.isnan(cast(float, value)):  # the value itself: no __float__ runs
                raise StoreError("a time given to the store is NaN: check the clock that made it")
        elif not issubclass(kind, int) or kind is bool:
            raise StoreError(
                f"a time given to the store must be seconds as an int or a float, "
                f"not {kind.__name__}"
            )


def check_filters(filters: dict[str, Any]) -> None:
    unknown = set(filters) - AUDIT_FILTERS
    if unknown:
        raise StoreError(
            f"unknown audit filter {sorted(unknown)[0]!r}; use {sorted(AUDIT_FILTERS)}"
        )


def row_from(values: tuple[Any, ...]) -> AuditRow:
    """An AuditRow from ``(id, *AUDIT_COLUMNS)`` as selected."""
    return AuditRow._make((*values[1 : len(AUDIT_COLUMNS) + 1], values[0]))
