"""Store work written once as a generator: the sync and the async driver give the same answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from guardrails.store import AuditRow, PostgresStore, Store
from guardrails.store.steps import Steps, aperform, arun, call, perform


def _work(key: str) -> Steps[tuple[Any, ...]]:
    first = yield call("incr", key)
    second = yield call("incr", key)
    try:
        yield call("no_such_method")
    except AttributeError:  # a failed call is raised at its yield
        missing = "raised"
    granted = yield call("reserve_leased", key, "h", 5, 8, 1.0, 9.0)
    refused = yield call("reserve_leased", key, "g", 5, 8, 1.0, 9.0)
    yield call("append", AuditRow("tool_call", 1.0, call_id=key))
    return first, second, missing, granted, refused


@pytest.fixture(params=["default", pytest.param("async pool", marks=pytest.mark.postgres)])
def any_store(request: pytest.FixtureRequest, store: Store) -> Iterator[Store]:
    if request.param == "default":
        yield store
        return
    if not isinstance(store, PostgresStore):
        pytest.skip("the async pool is PostgreSQL's")
    with PostgresStore(store.dsn, async_pool=True) as opened:
        yield opened


async def test_the_sync_and_the_async_driver_give_the_same_answers(any_store: Store) -> None:
    assert perform(any_store, _work("s")) == (1, 2, "raised", True, False)
    assert await aperform(any_store, _work("a")) == (1, 2, "raised", True, False)
    assert await arun(any_store, "incr", "a", 1) == 3
    assert {r.call_id for r in any_store.audit_rows()} == {"s", "a"}
    if isinstance(any_store, PostgresStore):
        await any_store.aclose()
