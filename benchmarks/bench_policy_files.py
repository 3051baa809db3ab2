"""Loading hostile policy files: what each shape costs at the bounds.

- ``policy files: load at the bounds``: ``loads`` of texts at the size bound
  (256 KiB) in the shapes that cost ``tomllib`` most, and of texts past a
  bound that are refused before parsing (5,000-deep nesting, a 100,000-part
  key, 100,000 groups). Floor: a valid policy of 1,000 rules (the rule bound),
  loaded. Each case is timed a few times, interleaved (one load takes up to
  about a second: the harness's rounds of half a millisecond do not fit).

Run: ``python benchmarks/run.py --only bench_policy_files`` (add ``--quick``).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from _harness import row

from guardrails.policy import PolicyError, loads
from guardrails.policy.loader import MAX_BYTES, MAX_RULES, MAX_TABLES

GROUP = "policy files: load at the bounds"


def _fill(line: Callable[[int], str]) -> str:
    out, size, i = [], 0, 0
    while True:
        piece = line(i)
        if size + len(piece) > MAX_BYTES:
            return "".join(out)
        out.append(piece)
        size, i = size + len(piece), i + 1


def _texts() -> dict[str, str]:
    rules = "".join(f"[tools.t.params.p{i}]\nkind = 'email'\n" for i in range(MAX_RULES))
    deep = 5_000
    return {
        "floor: 1,000 rules (valid)": rules,
        "256 KiB: one list of integers": "x = [" + _fill(lambda i: "1,")[:-10] + "1]\n",
        "256 KiB: dotted keys of 4 parts": _fill(lambda i: f"a{i}.b.c.d = 1\n"),
        "256 KiB: dotted keys of 8 parts": _fill(lambda i: f"a{i}.b.c.d.e.f.g.h = 1\n"),
        "4,096 table headers of 4 parts": "".join(f"[a{i}.b.c.d]\n" for i in range(MAX_TABLES)),
        "256 KiB: one string": 'x = "' + "a" * (MAX_BYTES - 10) + '"\n',
        "refused: 5,000-deep arrays": "x = " + "[" * deep + "]" * deep + "\n",
        "refused: 100,000-part key": ".".join(["a"] * 100_000) + " = 1\n",
        "refused: 100,000 groups": "[t.params.p]\npattern = '" + "()" * 50_000 + "'\n",
    }


def _load(text: str) -> Any:
    try:
        return loads(text)
    except PolicyError as exc:
        return exc


def run(quick: bool = False) -> list[dict[str, Any]]:
    texts = _texts()
    rounds = 3 if quick else 7
    samples: dict[str, list[float]] = {name: [] for name in texts}
    for _ in range(rounds):
        for name, text in texts.items():
            start = time.perf_counter_ns()
            _load(text)
            samples[name].append((time.perf_counter_ns() - start) / 1_000)
    floor = statistics.median(samples["floor: 1,000 rules (valid)"])
    rows = []
    for name, values in samples.items():
        median = statistics.median(values)
        rows.append(
            row(
                GROUP,
                name,
                median,
                best_us=round(min(values), 1),
                ratio=round(median / floor, 2),
                added_us=round(median - floor, 1),
                rounds=rounds,
                floor="floor: 1,000 rules (valid)",
                bytes=len(texts[name].encode()),
            )
        )
    return rows


if __name__ == "__main__":  # pragma: no cover
    for r in run(quick="--quick" in sys.argv):
        print(r)
