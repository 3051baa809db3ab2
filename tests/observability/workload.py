"""A deterministic guarded workload, run in this process or in worker processes.

``python workload.py K N CALLS`` runs the calls ``i`` with ``i % N == K`` in a
process of its own (for the multiprocess tests; ``PROMETHEUS_MULTIPROC_DIR``
comes from the environment).
"""

from __future__ import annotations

import sys
from typing import Any

from prometheus_client import CollectorRegistry

from guardrails import Guardrails, GuardResult, NotConfigured, Verdict, guard, tool
from guardrails.observe.metrics import PrometheusRecorder


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key.endswith("9"):
        raise RuntimeError("backend down")
    return key


@tool
def unused(key: str) -> str:
    """Never called."""
    return key


@guard(outcome="invalid_args")
def short_key(call: Any) -> Verdict:
    return Verdict.REJECT if int(call.arguments["key"]) % 13 == 0 else Verdict.PASS


@guard
def region_rules(call: Any) -> Verdict:
    if call.arguments["key"].endswith("7"):
        raise NotConfigured("no region")
    return Verdict.PASS


@guard(fail_closed=True, tools=["lookup"])
def strict(call: Any) -> Verdict:
    if call.arguments["key"].endswith("5"):
        raise RuntimeError("strict cannot decide")
    return Verdict.PASS


@guard(observe=True)
def shadow(call: Any) -> GuardResult:
    verdict = Verdict.REJECT if call.arguments["key"].startswith("1") else Verdict.PASS
    return GuardResult(verdict, "shadow")


@guard(tools=["unused"])
def idle(call: Any) -> Verdict:
    return Verdict.PASS


def engine(metrics: PrometheusRecorder) -> Guardrails:
    rails = Guardrails(
        [lookup, unused], [short_key, region_rules, strict, shadow, idle], recorder=metrics
    )
    metrics.bind(rails)
    return rails


def drive(rails: Guardrails, calls: range, worker: int = 0, workers: int = 1) -> None:
    turn = rails.turn(tenant="acme")
    for i in calls:
        if i % workers != worker:
            continue
        name = "invented" if i % 50 == 0 else "lookup"
        turn.call(name, {"key": str(i)}, call_id=f"c{i}")


if __name__ == "__main__":
    k, n, calls = (int(a) for a in sys.argv[1:4])
    metrics = PrometheusRecorder(CollectorRegistry())
    drive(engine(metrics), range(calls), k, n)
