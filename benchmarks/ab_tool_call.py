"""The whole ``middleware/tool_call.py`` of another commit against this tree's, in one process.

``ab_pipeline.py`` swaps ``run`` alone; this swaps the module: each side's
source is compiled as a module of this tree's ``guardrails.middleware``
package (so both use this tree's ``admission``, ``_results``, ``audit``, ...),
and each engine's pipeline becomes an instance of that side's
``ToolCallPipeline``. Timed in the same interleaved rounds, each pair in both
orders (the geometric mean of the two ratios kept), against a bare call:

- ``valid``, ``valid acall``: ``bench_pipeline.build()``'s transfer with two
  guards, through ``call`` and ``acall``;
- ``audited``, ``audited acall``: ``bench_audit.py``'s read-only tool with
  ``AuditLog`` as hook and recorder over ``MemoryStore`` (which ``acall``
  writes inline, not off the loop).

    python benchmarks/ab_tool_call.py OLD [NEW] [--quick] [--passes 5]   # NEW: this tree
    python benchmarks/ab_tool_call.py HEAD --passes 5    # the same code twice: the bias left
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import bench_audit
from _harness import compare
from _transfer import VALID, transfer
from bench_pipeline import build

from guardrails import Guardrails
from guardrails.audit import AuditLog
from guardrails.middleware import tool_call
from guardrails.store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("valid", "valid acall", "audited", "audited acall")


def pipeline_class(source: str, label: str) -> Any:
    """``ToolCallPipeline`` of ``source``, compiled as a module of this tree's package."""
    namespace: dict[str, Any] = {
        "__name__": f"guardrails.middleware._ab_{abs(hash(label))}",
        "__package__": "guardrails.middleware",
    }
    exec(compile(source, label, "exec"), namespace)
    return namespace["ToolCallPipeline"]


def source_at(commit: str) -> str:
    return subprocess.run(
        ["git", "show", f"{commit}:guardrails/middleware/tool_call.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _through(engine: Guardrails, cls: Any) -> Guardrails:
    """``engine`` with its pipeline an instance of ``cls``, configured alike."""
    old = engine._pipeline
    new = cls.__new__(cls)
    for slot in type(old).__slots__:
        setattr(new, slot, getattr(old, slot))
    engine._pipeline = new
    return engine


def _cases(cls: Any) -> tuple[dict[str, Any], list[Any]]:
    """One side's four cases, and the turns whose results are emptied between rounds."""
    valid = build(guards=2)
    audit = AuditLog(MemoryStore())
    audited = Guardrails([bench_audit.lookup], hooks=[audit], recorder=[audit])
    turns = [
        _through(valid, cls).turn(tenant="acme"),
        _through(audited, cls).turn(tenant="acme", session="s-1"),
    ]
    args, lookup = dict(VALID), {"order_id": "o-1"}

    async def valid_acall(turn: Any = turns[0]) -> Any:
        return await turn.acall("transfer", args)

    async def audited_acall(turn: Any = turns[1]) -> Any:
        turn.results.clear()
        return await turn.acall("lookup", lookup)

    def audited_call(turn: Any = turns[1]) -> Any:
        turn.results.clear()
        return turn.call("lookup", lookup)

    cases = {
        "valid": partial(turns[0].call, "transfer", args),
        "valid acall": valid_acall,
        "audited": audited_call,
        "audited acall": audited_acall,
    }
    return cases, turns


def one_pass(old: Any, new: Any, quick: bool) -> dict[str, float]:
    """``new / old`` of each kind; each pair timed in both orders, the geometric mean kept."""
    sides = {"old": _cases(old), "new": _cases(new)}
    turns = [t for _, ts in sides.values() for t in ts]

    def clear() -> None:
        for turn in turns:
            turn.results.clear()

    ratios = dict.fromkeys(KINDS, 1.0)
    for order in (("old", "new"), ("new", "old")):
        cases: dict[str, Any] = {"bare": lambda: transfer(**VALID)}
        for kind in KINDS:
            for side in order:
                cases[f"{side} {kind}"] = sides[side][0][kind]
        rows = {
            r["name"]: r
            for r in compare("ab", cases, floor="bare", quick=quick, between_rounds=clear)
        }
        for kind in KINDS:
            ratios[kind] *= rows[f"new {kind}"]["median_us"] / rows[f"old {kind}"]["median_us"]
    return {kind: math.sqrt(r) for kind, r in ratios.items()}


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    passes = int(argv[argv.index("--passes") + 1]) if "--passes" in argv else 3
    commits = [
        a for i, a in enumerate(argv) if not a.startswith("--") and argv[i - 1] != "--passes"
    ]
    old = pipeline_class(source_at(commits[0]), commits[0])
    if len(commits) > 1:
        new, name = pipeline_class(source_at(commits[1]), commits[1]), commits[1]
    else:
        new, name = pipeline_class(Path(tool_call.__file__).read_text(), "this tree"), "this tree"
    found: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(passes):
        for kind, ratio in one_pass(old, new, quick).items():
            found[kind].append(ratio)
    print(f"| {name}'s tool_call.py / {commits[0]}'s | median of {passes} | each pass |")
    print("| --- | ---: | --- |")
    for kind, each in found.items():
        listed = ", ".join(f"{r:.3f}" for r in each)
        print(f"| {kind} | {statistics.median(each):.3f} | {listed} |")


if __name__ == "__main__":
    main(sys.argv[1:])
