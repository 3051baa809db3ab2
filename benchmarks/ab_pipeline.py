"""``ToolCallPipeline.run`` of another commit against this tree's, in one process.

``compare_commits.py`` times each commit in a process of its own, and the bare
call that every ratio divides by can differ by a few percent between two
processes (code placement, memory layout): a change of 2 % in the pipeline
hides in that. Here the other commit's ``run`` is read from git and this
tree's from its file, each compiled into this tree's ``middleware.tool_call``
namespace (the same way, so that only the code differs); two engines built
alike (``bench_pipeline.build``), one through each ``run``, are timed in the
same interleaved rounds. ``python benchmarks/ab_pipeline.py HEAD`` (the same
code on both sides) shows what is left of the bias: within 1 %.

It works while the two ``run``s call helpers that this tree still has with
the same signatures (a change to ``run`` itself, not to its pieces).

    python benchmarks/ab_pipeline.py OLD [NEW] [--quick] [--passes 3]   # NEW: this tree
"""

from __future__ import annotations

import ast
import math
import statistics
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path
from typing import Any

from _harness import compare
from _transfer import OVER_LIMIT, VALID, transfer
from bench_pipeline import build

from guardrails.middleware import tool_call

ROOT = Path(__file__).resolve().parent.parent


def run_of(source: str, label: str) -> Any:
    """The ``run`` function in ``source``, compiled in this tree's module namespace."""
    found = ast.parse(source)
    cls = next(
        n for n in found.body if isinstance(n, ast.ClassDef) and n.name == "ToolCallPipeline"
    )
    # The last ``run``: the ones before it are ``@overload`` stubs.
    run = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "run"][-1]
    namespace = dict(vars(tool_call))
    code = textwrap.dedent(ast.get_source_segment(source, run) or "")
    exec(compile(code, label, "exec"), namespace)
    return namespace["run"]


def source_at(commit: str) -> str:
    return subprocess.run(
        ["git", "show", f"{commit}:guardrails/middleware/tool_call.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _call(run: Any, guards: int) -> Any:
    """One engine's valid call through ``run``, called as a function: both engines'
    pipelines stay of one type, so no call site sees two types by turns."""
    engine = build(guards=guards)
    pipeline, turn = engine._pipeline, engine.turn(tenant="acme")
    return lambda args: run(pipeline, turn, "transfer", args, None), turn


def one_pass(old: Any, new: Any, guards: int, quick: bool) -> dict[str, float]:
    """``new / old`` of the valid call and of the guard's rejection (2 guards).

    The case timed right after its twin runs warmer (the same code, the same
    data): each pair is timed in both orders, and the two ratios' geometric
    mean kept."""
    (old_call, old_turn), (new_call, new_turn) = _call(old, guards), _call(new, guards)
    calls = {"old": old_call, "new": new_call}
    kinds = {"valid": dict(VALID), "rejection": OVER_LIMIT} if guards else {"valid": dict(VALID)}

    def clear() -> None:
        new_turn.results.clear()
        old_turn.results.clear()

    ratios: dict[str, float] = dict.fromkeys(kinds, 1.0)
    for order in (("old", "new"), ("new", "old")):
        cases: dict[str, Any] = {"bare": lambda: transfer(**VALID)}
        for kind, args in kinds.items():
            for side in order:
                cases[f"{side} {kind}"] = partial(calls[side], args)
        rows = {
            r["name"]: r
            for r in compare("ab", cases, floor="bare", quick=quick, between_rounds=clear)
        }
        for kind in kinds:
            ratios[kind] *= rows[f"new {kind}"]["median_us"] / rows[f"old {kind}"]["median_us"]
    return {kind: math.sqrt(r) for kind, r in ratios.items()}


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    passes = int(argv[argv.index("--passes") + 1]) if "--passes" in argv else 3
    commits = [
        a for i, a in enumerate(argv) if not a.startswith("--") and argv[i - 1] != "--passes"
    ]
    # Both compiled the same way, so that only the code differs.
    old = run_of(source_at(commits[0]), commits[0])
    if len(commits) > 1:
        new, name = run_of(source_at(commits[1]), commits[1]), f"{commits[1]}'s"
    else:
        new, name = run_of(Path(tool_call.__file__).read_text(), "this tree"), "this tree's"
    found: dict[str, list[float]] = {}
    for _ in range(passes):
        for guards in (2, 0):
            for kind, ratio in one_pass(old, new, guards, quick).items():
                found.setdefault(f"{kind}, {guards} guards", []).append(ratio)
    print(f"| {name} run / {commits[0]}'s run | median of {passes} | each pass |")
    print("| --- | ---: | --- |")
    for name, ratios in found.items():
        each = ", ".join(f"{r:.3f}" for r in ratios)
        print(f"| {name} | {statistics.median(ratios):.3f} | {each} |")


if __name__ == "__main__":
    main(sys.argv[1:])
