"""CPU time of ``bench_audit.py``'s SQLite cases, several trees alternately.

Each pass runs every tree once, in a fresh process with the tree first on the
path; a run times the cases in interleaved rounds of 400 operations each with
``time.thread_time_ns`` (CPU time of the thread, the kernel's share of its
commits included; not the time it waited for a core, which on a shared
machine moves wall-clock medians by 1.5 to 2 times), the collector off. Per
tree it prints, over passes, the median of each case's median and best round,
and of its ratio to the bare ``INSERT`` of the same run.

    python benchmarks/audit_cpu.py 8 /tmp/base "$PWD"   # passes, then trees

A tree is a checkout with its compiled core built (``git archive`` and
``pip install --no-deps -e``, or the ``.so`` copied in); this tree's
``bench_audit.py`` is used for every tree.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _child(rounds: int) -> None:
    sys.path.insert(0, str(HERE))
    import bench_audit as b

    import guardrails._ccore
    from guardrails.store import SQLiteStore

    for module in (b.AuditLog, guardrails._ccore):  # the package and core of the tree asked
        where = getattr(module, "__file__", None) or sys.modules[module.__module__].__file__
        if not str(where).startswith(os.getcwd()):
            raise RuntimeError(f"{where} is not from {os.getcwd()}")

    folder = tempfile.mkdtemp(prefix="guardrails-cpu-")
    store = SQLiteStore(os.path.join(folder, "store.db"))
    bare, insert = b._bare_sqlite(os.path.join(folder, "bare.db"), store)
    values = (*b._VALUES, b._HASH)
    nulls_sql, kept = b._nulls_in_statement(insert, values)
    cases: dict[str, Any] = {
        "bare INSERT": lambda: bare.execute(insert, values),
        "bare INSERT, NULLs in the statement": lambda: bare.execute(nulls_sql, kept),
        "SQLiteStore.append": lambda: store.append(b._ROW),
        "guarded call, no audit": b._calls(None),
        "guarded call + AuditLog, keeps nothing": b._calls(b._Discard()),
        "audited call": b._calls(SQLiteStore(os.path.join(folder, "calls.db"))),
    }
    for case in cases.values():
        for _ in range(300):
            case()
    gc.collect()
    gc.disable()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            case, started = cases[name], time.thread_time_ns()
            for _ in range(400):
                case()
            samples[name].append((time.thread_time_ns() - started) / 400 / 1000)
    print(json.dumps(samples))


def main(passes: int, trees: list[str]) -> None:
    found: dict[str, list[dict[str, list[float]]]] = {tree: [] for tree in trees}
    print("start", time.strftime("%H:%M:%S UTC", time.gmtime()), os.getloadavg())
    for _ in range(passes):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": tree}
            out = subprocess.run(
                [sys.executable, __file__, "--child", "40"],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            found[tree].append(json.loads(out.stdout))
    print("end", time.strftime("%H:%M:%S UTC", time.gmtime()), os.getloadavg())
    med = statistics.median
    for tree, runs in found.items():
        print("==", tree)
        for name in runs[0]:
            ratios = [med(run[name]) / med(run["bare INSERT"]) for run in runs]
            print(
                f"  {name:40} median {med([med(r[name]) for r in runs]):6.2f} µs"
                f"  best {med([min(r[name]) for r in runs]):6.2f} µs"
                f"  x bare {med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
            )


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        _child(int(sys.argv[2]))
    else:
        main(int(sys.argv[1]), sys.argv[2:])
