"""Value extraction on hostile and ordinary text of 10 KB, 100 KB and 1 MB: linear growth.

Each input is one short unit repeated to the size (dense ``://``, ``@``,
dots, digits, separators, slashes, IBAN anchors, quotes), or mail-like
text (``bench_policy.mail_text``). The case is ``extract_tokens(text)``:
every scan (addresses, links, hosts, IBANs, phone numbers, lines, slashed
words) and the words and numbers of the user's input. Its floor is
``text.find("\\x00")`` over the same text (one pass in C that finds
nothing), timed in the same rounds; inputs and sizes are interleaved round
by round, and each call is timed by the process's CPU time
(``time.process_time_ns``), which the load of other processes does not
inflate. Rows: ``median_us``, ``floor_us``, ``ratio`` (median / floor),
``us_per_kb`` and ``growth``: µs per KB at this size over µs per KB at
10 KB for the same input (1.0 is linear; a quadratic scan doubles it at
every doubling of the size).

Run: ``python benchmarks/run.py --only bench_extract`` (add ``--quick``), or
``python benchmarks/bench_extract.py [--quick]``.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import row
from bench_policy import mail_text

from guardrails.policy._extract import extract_tokens

SIZES = {"10 KB": 10_000, "100 KB": 100_000, "1 MB": 1_000_000}
HOSTILE = {
    "dense ://": "x://",
    "links in a link": "https://a.example/?u=",
    "dense @": "a@",
    "addresses a@b.": "a@b.",
    "dots before letters": ".a",
    "short hosts": "x.a ",
    "digits": "0",
    "digits and separators": "0 ",
    "slashes": "/ ",
    "IBAN anchors": "GB00 ",
    "IBAN groups outside the registry": "DZ05 1234 ",
    "quotes, brackets, @ and dots": "'\u201c@.\u00ab(",
    "mixed": "x://a@b.c/0 ",
}
ORDINARY = "ordinary mail-like text"


def inputs(size: int) -> dict[str, str]:
    """Every input of one size, by name."""
    texts = {name: (unit * (size // len(unit) + 1))[:size] for name, unit in HOSTILE.items()}
    texts[ORDINARY] = mail_text(random.Random(20_261_201), size)
    return texts


def _per_call(fn: Callable[[], Any], reps: int) -> float:
    # The process's CPU time: on a shared machine, the time other processes
    # take from this one is not counted (the scans run on this thread only).
    # A short call is repeated so that reading the clock does not count.
    start = time.process_time_ns()
    for _ in range(reps):
        fn()
    return (time.process_time_ns() - start) / reps


def _samples(
    texts: dict[str, dict[str, str]], rounds: int
) -> dict[tuple[str, str, str], list[float]]:
    """Nanoseconds of each (size, input, case) per round, interleaved, the collector off."""
    cases: dict[tuple[str, str, str], tuple[Callable[[], Any], int]] = {}
    for size, by_name in texts.items():
        for name, text in by_name.items():
            cases[(size, name, "extract")] = (lambda t=text: extract_tokens(t), 1)
            floor_reps = max(1, 2_000_000 // len(text))
            cases[(size, name, "floor")] = (lambda t=text: t.find("\x00"), floor_reps)
    for fn, _ in cases.values():  # warm-up
        fn()
    samples: dict[tuple[str, str, str], list[float]] = {case: [] for case in cases}
    order = list(cases)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            shift = (r * 7) % len(order)
            for case in order[shift:] + order[:shift]:
                samples[case].append(_per_call(*cases[case]))
            gc.collect(1)
    finally:
        gc.enable()
    return samples


def run(quick: bool = False) -> list[dict[str, Any]]:
    texts = {size: inputs(n) for size, n in SIZES.items()}
    samples = _samples(texts, rounds=3 if quick else 7)
    rows = []
    per_kb_at_10: dict[str, float] = {}
    for size, n in SIZES.items():
        for name in texts[size]:
            median = statistics.median(samples[(size, name, "extract")])
            floor = max(1.0, statistics.median(samples[(size, name, "floor")]))
            us_per_kb = median / 1e3 / (n / 1_000)
            per_kb_at_10.setdefault(name, us_per_kb)
            rows.append(
                row(
                    f"extract: {size}",
                    name,
                    median / 1e3,
                    best_us=round(min(samples[(size, name, "extract")]) / 1e3, 1),
                    floor_us=round(floor / 1e3, 2),
                    ratio=round(median / floor, 1),
                    us_per_kb=round(us_per_kb, 2),
                    growth=round(us_per_kb / per_kb_at_10[name], 2),
                    mb_per_s=round(n / 1e6 / (median / 1e9), 1),
                    rounds=len(samples[(size, name, "extract")]),
                    floor='text.find("\\x00")',
                )
            )
    return rows


if __name__ == "__main__":  # pragma: no cover
    for r in run(quick="--quick" in sys.argv):
        print(
            f"{r['group']:16} {r['name']:30} {r['median_us'] / 1e3:9.2f} ms"
            f"  floor {r['floor_us']:8.2f} us  x{r['ratio']:>9}"
            f"  {r['us_per_kb']:7.2f} us/KB  growth {r['growth']:5.2f}  {r['mb_per_s']:7.1f} MB/s"
        )
