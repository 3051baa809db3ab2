"""Faults under concurrency: every escape is still counted exactly once.

One engine shared by many threads (sync) or many tasks (async), with guards
that fail at random and tools that raise at random: the recorders' counts
must equal what the callers got back, call for call.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from guardrails import (
    EscapeReason,
    Guardrails,
    NotConfigured,
    Outcome,
    Reason,
    Tool,
    Verdict,
    guard,
)
from guardrails.effects import Idempotency
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.store import SQLiteStore, StoreUnavailable
from guardrails.testing import MemoryRecorder

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def flaky(invocation: Any) -> Verdict:
    n = invocation.arguments["n"]
    if n % 3 == 0:
        raise RuntimeError("flaky backend")
    if n % 3 == 1:
        raise NotConfigured("no rule for this tenant")
    return Verdict.PASS


def work(n: int) -> int:
    if n % 5 == 0:
        raise ValueError("tool failed")
    return n


def expected(n: int) -> tuple[Outcome, EscapeReason]:
    outcome = Outcome.ERROR if n % 5 == 0 else Outcome.OK
    reason = (EscapeReason.RAISED, EscapeReason.NOT_CONFIGURED, None)[n % 3]
    return outcome, reason  # type: ignore[return-value]


def build() -> tuple[Guardrails, MemoryRecorder, CollectorRegistry]:
    memory = MemoryRecorder()
    registry = CollectorRegistry()
    prometheus = PrometheusRecorder(registry)
    rails = Guardrails(
        [Tool("work", work, SCHEMA)], [guard(flaky, name="flaky")], recorder=[memory, prometheus]
    )
    prometheus.bind(rails)
    return rails, memory, registry


def check(results: list[Any], ns: list[int], memory: MemoryRecorder, registry: Any) -> int:
    escapes = 0
    for n, result in zip(ns, results, strict=True):
        outcome, reason = expected(n)
        assert result.outcome is outcome
        assert [e.reason for e in result.escapes] == ([reason] if reason else [])
        escapes += len(result.escapes)
    assert sorted(r.call_id for r in memory.results) == sorted(r.call_id for r in results)
    exposition = generate_latest(registry).decode()
    raised = sum(1 for n in ns if n % 3 == 0)
    missing = sum(1 for n in ns if n % 3 == 1)
    assert f'guard="flaky",reason="raised"}} {float(raised)}' in exposition
    assert f'guard="flaky",reason="not_configured"}} {float(missing)}' in exposition
    return escapes


def test_escapes_are_counted_exactly_with_eight_threads(ledger: Any) -> None:
    rails, memory, registry = build()
    ns = list(range(4_000))
    random.Random(7).shuffle(ns)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda n: rails.call("work", {"n": n}), ns))

    escapes = check(results, ns, memory, registry)
    ledger.add("concurrency", inputs=len(ns), escapes=escapes)
    ledger.add("concurrency", faults_injected=escapes, faults_counted=escapes)


def test_escapes_are_counted_exactly_with_a_thousand_tasks(ledger: Any) -> None:
    rails, memory, registry = build()
    ns = list(range(1_000))

    async def main() -> list[Any]:
        return list(await asyncio.gather(*(rails.acall("work", {"n": n}) for n in ns)))

    results = asyncio.run(main())

    escapes = check(results, ns, memory, registry)
    ledger.add("concurrency", inputs=len(ns), escapes=escapes)
    ledger.add("concurrency", faults_injected=escapes, faults_counted=escapes)


class LossyStore:
    """A real store whose idempotency writes fail at random: before the write, or
    after it (the write happened but its acknowledgement was lost)."""

    def __init__(self, store: Any, seed: int, rate: float) -> None:
        self.store = store
        self.random = random.Random(seed)
        self.rate = rate
        self.lock = threading.Lock()
        self.injected = 0

    def _roll(self) -> str | None:
        with self.lock:
            if self.random.random() >= self.rate:
                return None
            self.injected += 1
            return "before" if self.random.random() < 0.5 else "after"

    def _lossy(self, name: str, *args: Any) -> Any:
        fault = self._roll()
        if fault == "before":
            raise StoreUnavailable(f"{name}: connection refused")
        try:
            value = getattr(self.store, name)(*args)
        except StoreUnavailable:
            # A real failure of the server under load is a lost write too (once:
            # a rolled "after" fault was counted already).
            if fault is None:
                with self.lock:
                    self.injected += 1
            raise
        if fault == "after":
            raise StoreUnavailable(f"{name}: connection reset after the write")
        return value

    def claim(self, *args: Any) -> Any:
        return self._lossy("claim", *args)

    def complete(self, *args: Any) -> Any:
        return self._lossy("complete", *args)

    def release(self, *args: Any) -> Any:
        return self._lossy("release", *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def real_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        store: Any = SQLiteStore(tmp_path / "idem.db")
    else:
        from guardrails.store import PostgresStore

        # A schema of its own: the keys below would meet another run's rows in a shared one.
        store = PostgresStore(str(request.getfixturevalue("pg_dsn")))
    try:
        yield store
    finally:
        store.close()


def test_idempotent_effects_run_at_most_once_when_store_writes_are_lost(
    real_store: Any, ledger: Any
) -> None:
    runs: Counter[str] = Counter()
    runs_lock = threading.Lock()

    def publish(brief_id: str) -> str:
        with runs_lock:
            runs[brief_id] += 1
            return f"published {brief_id} #{runs[brief_id]}"

    lossy = LossyStore(real_store, seed=11, rate=0.2)
    schema = {"type": "object", "properties": {"brief_id": {"type": "string"}}}
    tool = Tool(
        "publish", publish, schema, effect=True, options={"idempotency_key": "publish-{brief_id}"}
    )
    rails = Guardrails([tool], hooks=[Idempotency(lossy, wait=0.05, poll=0.005)])
    keys = [f"b{i % 20}" for i in range(400)]
    tenant = f"t{os.getpid()}-{id(lossy)}"  # a fresh key space on a shared server

    def one(key: str) -> Any:
        return key, rails.turn(tenant=tenant).call("publish", {"brief_id": key})

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, keys))

    fresh: dict[str, str] = {}
    for key, result in results:
        assert ledger.check("concurrency", result, ("brief_id",)) == []
        assert result.outcome in {Outcome.OK, Outcome.UNAVAILABLE}
        if result.outcome is Outcome.OK and result.reason is None:
            assert key not in fresh, f"{key} ran twice"
            fresh[key] = result.content
    assert all(count <= 1 for count in runs.values()), runs
    for key, result in results:
        if result.reason == Reason.REPLAYED:
            assert result.content == fresh[key]
    # Each lost write shows exactly once: a refusal before the run, or an escape after it.
    seen = sum(
        (result.reason == Reason.STORE_UNAVAILABLE)
        + sum(e.reason is EscapeReason.STORE_UNAVAILABLE for e in result.escapes)
        for _, result in results
    )
    ledger.add("concurrency", faults_injected=lossy.injected, faults_counted=seen)
    assert seen == lossy.injected
    ledger.add("concurrency", idempotent_effects=sum(runs.values()))
