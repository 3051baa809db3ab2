"""Faults under concurrency: every escape is still counted exactly once.

One engine shared by many threads (sync) or many tasks (async), with guards
that fail at random and tools that raise at random: the recorders' counts
must equal what the callers got back, call for call.
"""

from __future__ import annotations

import asyncio
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from guardrails import EscapeReason, Guardrails, NotConfigured, Outcome, Tool, Verdict, guard
from guardrails.metrics import PrometheusRecorder
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
