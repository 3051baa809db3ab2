"""Instructions per call, counted with callgrind: repeatable on a shared machine.

Each piece runs N times in a fresh process under ``valgrind --tool=callgrind``,
once with 2,000 calls and once with 6,000; the difference divided by 4,000 is
the cost of one call, start-up and warm-up cancelled out. The pieces are the
valid path of ``bench_pipeline.build()`` (no recorder) and its fixed parts.

    python benchmarks/count_instructions.py                  # every piece
    python benchmarks/count_instructions.py canonical valid_2  # some pieces
    GUARDRAILS_PURE=1 python benchmarks/count_instructions.py  # the pure-Python admission
    python benchmarks/count_instructions.py --commit 587781a valid_2  # another commit's tree

``--commit`` (repeatable) counts the package of each named commit, installed
as ``compare_commits.py`` installs it, with this tree's benchmark scripts.

Needs ``valgrind`` on PATH. Not run by ``run.py`` (minutes per piece).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
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
    "policy_0",
    "policy_5",
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
    if name.startswith("policy_"):
        return _policy(name == "policy_5")
    guards = 0 if name == "valid_0" else 2
    turn = build(guards=guards).turn(tenant="acme")
    sent = {"schema_rejection": INVALID, "guard_rejection": OVER_LIMIT}.get(name, VALID)

    def one() -> None:
        turn.call("transfer", sent)
        turn.results.clear()

    return one


def _policy(ruled: bool) -> Any:
    """The valid call of ``policy: parameter rules``: with its five rules, or none."""
    from _transfer import SCHEMA, VALID, transfer
    from bench_policy import FIVE_RULES

    from guardrails import Guardrails, Tool

    policy = FIVE_RULES if ruled else None
    turn = Guardrails([Tool("transfer", transfer, SCHEMA)], policy=policy).turn(
        values={"daily_limit": 1_000}
    )
    args = {**VALID, "memo": "rent for march"}

    def one() -> None:
        turn.call("transfer", args)
        turn.results.clear()

    return one


def _child(name: str, n: int) -> None:
    one = _piece(name)
    for _ in range(200):
        one()
    for _ in range(n):
        one()


def _count(name: str, n: int, tree: Path | None = None) -> int:
    argv = [sys.executable, __file__, "--child", name, str(n)]
    # A fixed hash seed: set and dict layouts, and so the counts, the same run after run.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if tree is not None:
        # -S keeps an editable install of this tree off sys.path; site-packages goes back after.
        site = [p for p in sys.path if p.endswith("site-packages")]
        env["PYTHONPATH"] = ":".join([str(tree), str(HERE), *site])
        argv.insert(1, "-S")
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        capture_output=True,
        text=True,
        check=True,
        env=env,
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
    commits = [argv[i + 1] for i, a in enumerate(argv) if a == "--commit"]
    names = [a for i, a in enumerate(argv) if a != "--commit" and argv[i - 1 : i] != ["--commit"]]
    if not commits:
        for name in names or PIECES:
            per_call = (_count(name, 6000) - _count(name, 2000)) / 4000
            print(f"{name:18} {per_call:10,.0f}")
        return
    from compare_commits import _extract

    with tempfile.TemporaryDirectory() as tmp:
        for commit in commits:
            place = Path(tmp) / commit.replace("/", "_").replace("~", "_")
            place.mkdir()
            tree = _extract(commit, place)
            for name in names or PIECES:
                per_call = (_count(name, 6000, tree) - _count(name, 2000, tree)) / 4000
                print(f"{commit:12} {name:18} {per_call:10,.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
