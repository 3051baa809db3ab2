"""What prometheus_client's multiprocess mode adds to counting one call.

Group ``multiprocess``: the Prometheus recorder's ``on_tool_result`` on one
finished result (two verdicts), in one process (plain integers), and in
multiprocess mode (each count also written to this process's file in
``PROMETHEUS_MULTIPROC_DIR``), against an empty method call. The mode is read
when prometheus_client is imported, so the cases run in a child process that
starts with the variable set.

Run alone: ``python benchmarks/bench_multiprocess.py [--quick]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

Row = dict[str, Any]


def _child(quick: bool) -> list[Row]:
    from _harness import compare
    from prometheus_client import CollectorRegistry

    from guardrails import Guardrails, Verdict, guard, tool
    from guardrails.observe.metrics import PrometheusRecorder

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    @guard
    def short_key(call: Any) -> Verdict:
        return Verdict.PASS

    @guard
    def allowed_key(call: Any) -> Verdict:
        return Verdict.PASS

    def engine() -> Guardrails:
        return Guardrails([lookup], [short_key, allowed_key])

    result = engine().turn().call("lookup", {"key": "a"})
    single = PrometheusRecorder(CollectorRegistry(), multiprocess=False).bind(engine())
    multi = PrometheusRecorder(multiprocess=True).bind(engine())

    class Empty:
        def on_tool_result(self, result: Any, /) -> None:
            pass

    empty = Empty()
    return compare(
        "multiprocess",
        {
            "empty method": lambda: empty.on_tool_result(result),
            "Prometheus, one process": lambda: single.on_tool_result(result),
            "Prometheus, multiprocess mode": lambda: multi.on_tool_result(result),
        },
        floor="empty method",
        quick=quick,
    )


def run(quick: bool = False) -> list[Row]:
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(prefix="guardrails-mp-") as directory:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": directory}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
        args = [sys.executable, os.path.abspath(__file__), "--child"]
        done = subprocess.run(
            [*args, *(["--quick"] if quick else [])],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
    rows: list[Row] = json.loads(done.stdout)
    return rows


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    if "--child" in sys.argv:
        print(json.dumps(_child(quick)))
    else:
        for r in run(quick):
            print(
                f"{r['group']:15} {r['name']:40} {r['median_us']:9.3f} us"
                f"  x{r['ratio']:<6} +{r['added_us']} us"
            )
