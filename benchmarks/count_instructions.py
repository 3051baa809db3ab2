"""Instructions per call, counted with callgrind: repeatable on a shared machine.

Each piece runs N times in a fresh process under ``valgrind --tool=callgrind``,
once with 2,000 calls and once with 6,000; the difference divided by 4,000 is
the cost of one call, start-up and warm-up cancelled out. The pieces are the
valid path of ``bench_pipeline.build()`` (no recorder) and its fixed parts.

    python benchmarks/count_instructions.py                  # every piece
    python benchmarks/count_instructions.py canonical valid_2  # some pieces
    GUARDRAILS_PURE=1 python benchmarks/count_instructions.py  # the pure-Python admission

Needs ``valgrind`` on PATH. Not run by ``run.py`` (minutes per piece).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PIECES = (
    "bare",
    "canonical",
    "schema",
    "valid_0",
    "valid_2",
    "schema_rejection",
    "guard_rejection",
)


def _piece(name: str) -> Any:
    """A zero-argument callable: one call of the piece."""
    sys.path.insert(0, str(HERE))
    from _transfer import INVALID, OVER_LIMIT, VALID, transfer
    from bench_pipeline import build

    from guardrails.middleware.admission import canonical

    args = dict(VALID)
    if name == "bare":
        return lambda: transfer(**args)
    if name == "canonical":
        return lambda: canonical(args, 1_000_000)
    if name == "schema":
        check = build()._pipeline.plans["transfer"].tool.compiled.check
        return lambda: check(args)
    guards = 0 if name == "valid_0" else 2
    turn = build(guards=guards).turn(tenant="acme")
    sent = {"schema_rejection": INVALID, "guard_rejection": OVER_LIMIT}.get(name, VALID)

    def one() -> None:
        turn.call("transfer", sent)
        turn.results.clear()

    return one


def _child(name: str, n: int) -> None:
    one = _piece(name)
    for _ in range(200):
        one()
    for _ in range(n):
        one()


def _count(name: str, n: int) -> int:
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            name,
            str(n),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(out.stderr[-2000:])
    return int(found.group(1))


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        _child(argv[1], int(argv[2]))
        return
    pure = os.environ.get("GUARDRAILS_PURE") == "1"
    print(f"admission: {'pure Python' if pure else 'compiled, where built'}")
    for name in argv or PIECES:
        per_call = (_count(name, 6000) - _count(name, 2000)) / 4000
        print(f"{name:18} {per_call:10,.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
