"""How the cost of a valid call grows with the work around it.

- registered tools: 10, 1,000, 10,000 (the call should not notice: a dict lookup);
- guards on the tool: 0, 1, 10, 100 trivial ones (at most linear);
- schema size: 5, 50, 500 required properties, all supplied;
- throughput of valid calls with 1 thread, 2 threads and 2 processes.

Each figure is timed in interleaved rounds with a bare call of the same
function as the floor. Registering 10,000 tools is timed once and reported
as the cost per tool.

Run alone: ``python benchmarks/bench_scaling.py [--quick]``.
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from _harness import Row, compare, row
from _transfer import VALID, transfer
from bench_pipeline import build

from guardrails import Guardrails, Tool, Verdict, guard, tool
from guardrails.middleware import admission as _admission
from guardrails.testing import MemoryRecorder

TOOL_COUNTS = (10, 1_000, 10_000)
GUARD_COUNTS = (0, 1, 10, 100)
PROPERTY_COUNTS = (5, 50, 500)
THROUGHPUT_CALLS = 5_000  # per worker in quick mode; eight times as many in full
_FILLER_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def run(quick: bool = False) -> list[Row]:
    return (
        tools(quick) + registration(quick) + guards(quick) + schema_size(quick) + throughput(quick)
    )


def registration(quick: bool) -> list[Row]:
    """What registering one tool costs, and the metaschema check inside it."""
    import jsonschema
    import jsonschema_rs

    draft = jsonschema.Draft202012Validator
    schema, _ = _wide_schema(5)
    cases: dict[str, Callable[[], Any]] = {
        "Tool(): check, compile, strip bound parameters": lambda: Tool("wide", _count, schema),
        "metaschema check: jsonschema check_schema": lambda: draft.check_schema(schema),
        "compile: jsonschema_rs.validator_for": lambda: jsonschema_rs.validator_for(schema),
    }
    meta = getattr(jsonschema_rs, "meta", None)
    if meta is not None:
        cases["metaschema check: jsonschema_rs.meta.is_valid"] = lambda: meta.is_valid(schema)
    return compare(
        "scaling: registration (5-property schema)",
        cases,
        floor="Tool(): check, compile, strip bound parameters",
        quick=quick,
    )


def _filler(i: int) -> Tool:
    return Tool(f"tool_{i:05d}", _echo, _FILLER_SCHEMA, description="filler")


def _echo(q: str = "") -> str:
    return q


def tools(quick: bool) -> list[Row]:
    group = "scaling: registered tools"
    largest = max(TOOL_COUNTS)
    start = time.perf_counter()
    fillers = [_filler(i) for i in range(largest - 1)]
    per_tool_us = (time.perf_counter() - start) / len(fillers) * 1e6
    rows = [
        row(
            group,
            f"registration, per tool ({largest - 1:,} tools)",
            per_tool_us,
            note="Tool(): metaschema check and compile, timed once",
        )
    ]
    valid = dict(VALID)
    cases: dict[str, Callable[[], Any]] = {"bare call": lambda: transfer(**valid)}
    turns = []
    for count in TOOL_COUNTS:
        rails = Guardrails([tool(transfer), *fillers[: count - 1]], _two_guards())
        turn = rails.turn(tenant="acme")
        turns.append(turn)
        cases[f"{count:,} tools"] = (lambda t: lambda: t.call("transfer", valid))(turn)

    def clear() -> None:
        for t in turns:
            t.results.clear()

    timed = compare(group, cases, floor="bare call", quick=quick, between_rounds=clear)
    smallest = timed[1]["median_us"]
    for r in timed[1:]:
        r["note"] = f"{r['median_us'] / smallest:.2f}x the {TOOL_COUNTS[0]}-tool cost"
    return rows + timed


def _two_guards() -> list[Any]:
    # The same two rules as everywhere else, as registered guards.
    rails = build()
    return list(rails.guards.values())


def guards(quick: bool) -> list[Row]:
    group = "scaling: guards per call"
    valid = dict(VALID)
    cases: dict[str, Callable[[], Any]] = {"bare call": lambda: transfer(**valid)}
    turns = []
    for count in GUARD_COUNTS:
        turn = build(guards=count).turn(tenant="acme")
        turns.append(turn)
        label = f"{count} guard" if count == 1 else f"{count} guards"
        cases[label] = (lambda t: lambda: t.call("transfer", valid))(turn)

    def clear() -> None:
        for t in turns:
            t.results.clear()

    timed = compare(group, cases, floor="bare call", quick=quick, between_rounds=clear)
    by_count = dict(zip(GUARD_COUNTS, timed[1:], strict=True))
    one = by_count[1]["median_us"]
    bare = timed[0]["median_us"]
    by_count[1]["note"] = f"{one - by_count[0]['median_us']:.2f} µs for the first guard"
    for count in GUARD_COUNTS[2:]:
        per_guard = (by_count[count]["median_us"] - one) / (count - 1)
        by_count[count]["note"] = (
            f"{per_guard:.2f} µs per guard after the first ({per_guard / bare:.2f}x the bare call)"
        )
    return timed


def _wide_schema(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A schema of ``n`` required properties of mixed types, and arguments that satisfy it."""
    kinds: list[tuple[dict[str, Any], Any]] = [
        ({"type": "string", "maxLength": 64}, "text"),
        ({"type": "number", "minimum": 0}, 1.5),
        ({"type": "integer", "maximum": 1_000}, 7),
        ({"type": "boolean"}, True),
        ({"type": "string", "enum": ["a", "b", "c"]}, "b"),
    ]
    properties: dict[str, Any] = {}
    arguments: dict[str, Any] = {}
    for i in range(n):
        schema, value = kinds[i % len(kinds)]
        properties[f"p{i:03d}"] = schema
        arguments[f"p{i:03d}"] = value
    schema = {
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }
    return schema, arguments


def _count(**kwargs: Any) -> int:
    return len(kwargs)


def schema_size(quick: bool) -> list[Row]:
    group = "scaling: schema properties"
    rows: list[Row] = []
    for n in PROPERTY_COUNTS:
        schema, arguments = _wide_schema(n)
        pass_all = guard(name="noop")(lambda call: Verdict.PASS)
        memory = MemoryRecorder()
        rails = Guardrails([Tool("wide", _count, schema)], [pass_all], recorder=memory)
        turn = rails.turn(tenant="acme")
        compiled = rails.tools["wide"].compiled
        invalid = dict(arguments, p001=-1.0)
        cases: dict[str, Callable[[], Any]] = {
            f"{n} properties: bare call": lambda a=arguments: _count(**a),
            f"{n} properties: pipeline, valid": lambda t=turn, a=arguments: t.call("wide", a),
            f"{n} properties: pipeline, one invalid": lambda t=turn, a=invalid: t.call("wide", a),
            f"{n} properties: schema check alone": lambda c=compiled, a=arguments: c.is_valid(a),
        }
        # private: the canonical value with its size/depth bound, before validation
        fits = getattr(_admission, "canonical", None)
        if fits is not None:
            cases[f"{n} properties: canonical value alone"] = lambda a=arguments: fits(a, 1_000_000)

        def clear(t: Any = turn, m: MemoryRecorder = memory) -> None:
            t.results.clear()
            m.clear()

        rows += compare(
            group, cases, floor=f"{n} properties: bare call", quick=quick, between_rounds=clear
        )
    return rows


# -- throughput ---------------------------------------------------------------


def _calls(count: int) -> float:
    """Make ``count`` valid calls in a fresh turn; seconds taken (also the process worker)."""
    rails = _SHARED.get("rails") or build()
    turn = rails.turn(tenant="acme")
    valid = dict(VALID)
    call = turn.call
    start = time.perf_counter()
    for i in range(count):
        call("transfer", valid)
        if i & 4095 == 0:
            turn.results.clear()
    return time.perf_counter() - start


_SHARED: dict[str, Any] = {}


def _in_threads(threads: int, per_thread: int) -> float:
    barrier = threading.Barrier(threads + 1)
    workers = [
        threading.Thread(target=lambda: (barrier.wait(), _calls(per_thread)))
        for _ in range(threads)
    ]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    return time.perf_counter() - start


def _in_processes(pool: ProcessPoolExecutor, processes: int, per_process: int) -> float:
    start = time.perf_counter()
    futures = [pool.submit(_worker(), per_process) for _ in range(processes)]
    for f in futures:
        f.result()
    return time.perf_counter() - start


def _worker() -> Callable[[int], float]:
    # Pickled by reference: it must come from the importable module, not __main__.
    fn: Callable[[int], float] = importlib.import_module("bench_scaling")._calls
    return fn


def throughput(quick: bool) -> list[Row]:
    group = "scaling: throughput"
    per_worker = THROUGHPUT_CALLS if quick else 8 * THROUGHPUT_CALLS
    repeats = 3 if quick else 7
    _SHARED["rails"] = build()
    _calls(1_000)  # warm-up
    samples: dict[str, list[float]] = {"1 thread": [], "2 threads": [], "2 processes": []}
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        list(pool.map(_worker(), [1_000, 1_000]))  # start both and import everything
        for _ in range(repeats):  # interleaved, like the timed rounds
            samples["1 thread"].append(2 * per_worker / _in_threads(1, 2 * per_worker))
            samples["2 threads"].append(2 * per_worker / _in_threads(2, per_worker))
            samples["2 processes"].append(2 * per_worker / _in_processes(pool, 2, per_worker))
    _SHARED.clear()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    single = statistics.median(samples["1 thread"])
    rows = []
    for name, rates in samples.items():
        rate = statistics.median(rates)
        rows.append(
            row(
                group,
                f"valid calls, {name}",
                1e6 / rate,
                ops_per_s=round(rate),
                speedup=round(rate / single, 2),
                note=f"no recorder, garbage collector on; load average {load:.1f} on {os.cpu_count()} cores",
            )
        )
    return rows


if __name__ == "__main__":
    from run import print_rows

    print_rows(run(quick="--quick" in sys.argv))
