"""Differential property: any sequence of operations gives the same answers on every store."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guardrails.store import MemoryStore, PostgresStore, SQLiteStore, Store
from guardrails.store.testing import postgres_dsn, temporary_schema
from tests._examples import examples

KEYS = st.sampled_from(["a", "b"])
OWNERS = st.sampled_from(["o1", "o2"])
TIMES = st.integers(0, 20).map(float)
AMOUNTS = st.integers(0, 40)

OPERATIONS = st.one_of(
    st.tuples(st.just("incr"), KEYS, st.integers(-3, 3)),
    st.tuples(st.just("reserve"), KEYS, AMOUNTS, st.integers(1, 60)),
    st.tuples(st.just("settle"), KEYS, AMOUNTS, AMOUNTS),
    st.tuples(st.just("budget"), KEYS),
    st.tuples(st.just("get"), KEYS),
    st.tuples(
        st.just("compare_and_set"),
        KEYS,
        st.one_of(st.none(), st.sampled_from("xy")),
        st.sampled_from("xy"),
    ),
    st.tuples(st.just("claim"), KEYS, OWNERS, TIMES, TIMES),
    st.tuples(st.just("complete"), KEYS, OWNERS, st.sampled_from(["1", "2"]), TIMES),
    st.tuples(st.just("release"), KEYS, OWNERS),
    st.tuples(st.just("put_snapshot"), KEYS, st.binary(max_size=4)),
    st.tuples(st.just("snapshot"), KEYS, st.one_of(st.none(), st.integers(1, 3))),
    st.tuples(st.just("reserve_leased"), KEYS, OWNERS, AMOUNTS, st.integers(1, 60), TIMES, TIMES),
    st.tuples(st.just("renew_leases"), OWNERS, TIMES),
    st.tuples(st.just("settle_leased"), KEYS, OWNERS, AMOUNTS),
)

# Found by this test on PostgreSQL (its new-row check refused the upsert when
# ``reserved`` was negative): run on every store, every time.
NEGATIVE_RESERVED = [("settle", "a", 1, 0), ("reserve", "a", 2, 1), ("budget", "a")]


def _apply(store: Store, operations: list[tuple[Any, ...]]) -> list[Any]:
    answers = []
    for name, *args in operations:
        if name == "claim":
            key, owner, now, lease = args
            args = [key, owner, now, now + lease]
        if name == "reserve_leased":
            key, holder, amount, cap, now, lease = args
            args = [key, holder, amount, cap, now, now + lease]
        if name == "put_snapshot":
            args = [*args, 1.0]
        answer = getattr(store, name)(*args)
        answers.append(answer.data if name == "snapshot" and answer is not None else answer)
    return answers


def test_a_reservation_after_a_negative_reserved_balance_agrees_on_every_store(
    store: Store,
) -> None:
    assert _apply(store, NEGATIVE_RESERVED) == [0, True, (0, 1)]
    assert _apply(MemoryStore(), NEGATIVE_RESERVED) == [0, True, (0, 1)]


# derandomize, no example database: the same examples on every run, so CI
# cannot pass or fail by luck; the explicit test above holds the known case.
@settings(max_examples=examples(40), derandomize=True, database=None)
@given(st.lists(OPERATIONS, max_size=25))
@example(NEGATIVE_RESERVED)
def test_sqlite_answers_like_memory(operations: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder, SQLiteStore(Path(folder) / "s.db") as sqlite:
        assert _apply(sqlite, operations) == _apply(MemoryStore(), operations)


@pytest.mark.postgres
@settings(max_examples=examples(15), derandomize=True, database=None)
@given(st.lists(OPERATIONS, max_size=20))
@example(NEGATIVE_RESERVED)
def test_postgresql_answers_like_memory(operations: list[tuple[Any, ...]]) -> None:
    dsn = postgres_dsn()
    if dsn is None:
        pytest.skip("no PostgreSQL server: set GUARDRAILS_POSTGRES_DSN")
    with temporary_schema(dsn) as scoped, PostgresStore(scoped, max_size=1) as pg:
        assert _apply(pg, operations) == _apply(MemoryStore(), operations)
