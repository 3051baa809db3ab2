"""Instructions per call, counted with callgrind: repeatable on a shared machine.

Each piece runs N times in a fresh process under ``valgrind --tool=callgrind``,
once with 2,000 calls and once with 6,000; the difference divided by 4,000 is
the cost of one call, start-up and warm-up cancelled out. The pieces are the
valid path of ``bench_pipeline.build()`` (no recorder) and its fixed parts:
the canonical copy, the schema check, naming the offending parameters of
invalid arguments, and rendering the tool's result.

    python benchmarks/count_instructions.py                  # every piece
    python benchmarks/count_instructions.py canonical valid_2  # some pieces
    python benchmarks/count_instructions.py --commit 7deb0b1   # another commit's package
    GUARDRAILS_PURE=1 python benchmarks/count_instructions.py  # the pure-Python admission
    python benchmarks/count_instructions.py --commit 587781a --commit HEAD valid_2  # several
    python benchmarks/count_instructions.py audit_bare audit_append audit_discard audited
    python benchmarks/count_instructions.py --commit OLD --commit . avalid_2 audit_memory aaudit_memory

The ``audit_*`` pieces (named only, not in the default set) are the cases of
``bench_audit.py``'s ``audit.sqlite`` group on a file in a fresh folder: a
bare ``INSERT`` of the row (``audit_bare``), ``SQLiteStore.append``
(``audit_append``), a guarded call with ``AuditLog`` over a store that keeps
nothing (``audit_discard``) and the audited call (``audited``). Instructions
in the process only: the kernel's share of each commit is not counted.

``avalid_2`` is ``valid_2`` through ``acall`` (the calls awaited one after
another in one event loop); ``audit_memory`` and ``aaudit_memory`` the audited
call over ``MemoryStore`` (which ``acall`` writes inline, not off the loop)
through ``call`` and ``acall``; both ``acall`` pieces without fair turns
(``loop_slice=None``: whether a call waits depends on the clock, which valgrind
slows). Named only, not in the default set.

``--commit`` (repeatable) counts the package of each named commit, installed
as ``compare_commits.py`` installs it, with this tree's benchmark scripts; a
directory instead of a commit counts that checkout as it is.

Needs ``valgrind`` on PATH. Not run by ``run.py`` (minutes per piece).
"""

from __future__ import annotations

import asyncio
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
    "render",
    "offending",
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
    if name == "offending":  # naming the two offending parameters of a schema rejection
        compiled = build()._pipeline.plans["transfer"].tool.compiled
        invalid = canonical(dict(INVALID), 1_000_000)[0]  # type: ignore[index]
        return lambda: compiled.offending(invalid)
    if name == "render":  # the transfer tool's 4-key dict result, as the model sees it
        from guardrails.middleware._render import render

        result = transfer(**args)
        return lambda: render(result, 1_000_000)
    if name.startswith("policy_"):
        return _policy(name == "policy_5")
    if name.startswith(("audit", "aaudit")):
        return _audit(name)
    guards = 0 if name == "valid_0" else 2
    turn = build(guards=guards).turn(tenant="acme")
    sent = {"schema_rejection": INVALID, "guard_rejection": OVER_LIMIT}.get(name, VALID)

    def one() -> None:
        turn.call("transfer", sent)
        turn.results.clear()

    async def aone() -> None:
        await turn.acall("transfer", sent)
        turn.results.clear()

    if name == "avalid_2":
        # No fair turns: whether a call waits for one depends on the clock, which
        # valgrind slows down; the count is then of the pipeline alone.
        turn.engine.loop_slice = None
        return aone
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


def _audit(name: str) -> Any:
    """One case of ``bench_audit.py``'s ``audit.sqlite`` group, on files in a new folder."""
    import bench_audit

    from guardrails.store import SQLiteStore

    if name.endswith("audit_memory"):
        return _memory_audit(name == "aaudit_memory")
    folder = tempfile.mkdtemp(prefix="guardrails-count-")
    store = SQLiteStore(os.path.join(folder, "store.db"))
    if name == "audit_bare":
        bare, insert = bench_audit._bare_sqlite(os.path.join(folder, "bare.db"), store)
        values = (*bench_audit._VALUES, bench_audit._HASH)
        return lambda: bare.execute(insert, values)
    if name == "audit_append":
        return lambda: store.append(bench_audit._ROW)
    return bench_audit._calls(store if name == "audited" else bench_audit._Discard())


def _memory_audit(through_acall: bool) -> Any:
    """The audited call of ``bench_audit.py`` over ``MemoryStore``, through ``call`` or
    ``acall``; the store's rows emptied after each call."""
    import bench_audit

    from guardrails import Guardrails
    from guardrails.audit import AuditLog
    from guardrails.store import MemoryStore

    store = MemoryStore()
    audit = AuditLog(store)
    rails = Guardrails([bench_audit.lookup], hooks=[audit], recorder=[audit], loop_slice=None)
    turn = rails.turn(tenant="acme", session="s-1")
    args = {"order_id": "o-1"}

    def one() -> None:
        turn.call("lookup", args)
        turn.results.clear()

    async def aone() -> None:
        await turn.acall("lookup", args)
        turn.results.clear()

    return aone if through_acall else one


def _child(name: str, n: int) -> None:
    one = _piece(name)
    if asyncio.iscoroutinefunction(one):

        async def calls() -> None:
            for _ in range(200):
                await one()
            for _ in range(n):
                await one()

        asyncio.run(calls())
        return
    for _ in range(200):
        one()
    for _ in range(n):
        one()


def _python(tree: Path | None) -> tuple[list[str], dict[str, str]]:
    """The interpreter's argv and environment: this tree's, or ``tree`` first on the path.

    One hash seed for every run: str hashes move dict probes, a few hundred
    instructions from one process to the next otherwise."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if tree is None:
        return [sys.executable], env
    # -S keeps an editable install of this tree off sys.path (as compare_commits.py).
    site = "".join(f":{p}" for p in sys.path if p.endswith("site-packages"))
    env["PYTHONPATH"] = f"{tree}:{HERE}{site}"
    where = subprocess.run(
        [sys.executable, "-S", "-c", "import guardrails; print(guardrails.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    if not where.stdout.startswith(str(tree)):
        raise RuntimeError(f"guardrails was imported from outside {tree}: {where.stdout}")
    return [sys.executable, "-S"], env


def _count(name: str, n: int, python: list[str], env: dict[str, str]) -> int:
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    out = subprocess.run(
        [*valgrind, *python, __file__, "--child", name, str(n)],
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
        python, env = _python(None)
        for name in names or PIECES:
            per_call = (_count(name, 6000, python, env) - _count(name, 2000, python, env)) / 4000
            print(f"{name:18} {per_call:10,.0f}")
        return
    from compare_commits import extract

    with tempfile.TemporaryDirectory() as tmp:
        for commit in commits:
            place = Path(tmp) / commit.replace("/", "_").replace("~", "_")
            if Path(commit).is_dir():  # a checkout, as it is
                python, env = _python(Path(commit).resolve())
            else:
                place.mkdir()
                python, env = _python(extract(commit, place))
            for name in names or PIECES:
                per_call = (
                    _count(name, 6000, python, env) - _count(name, 2000, python, env)
                ) / 4000
                print(f"{commit:12} {name:18} {per_call:10,.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
