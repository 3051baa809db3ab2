"""The valid path of several commits, side by side: what each change bought.

Each commit's package is extracted with ``git archive`` and installed into a
temporary directory (``pip install --target``: its compiled core built when it
has one), then
timed in a child process with that tree first on ``PYTHONPATH`` and this
tree's ``bench_pipeline.build()``: the same tool and guards, no recorder,
full-mode interleaved rounds, every figure a ratio to the bare call of the
same rounds. The trees run alternately, ``--passes`` times (order rotated);
each cell is the median of the passes.

    python benchmarks/compare_commits.py 587781a HEAD~1 HEAD [--passes 3] [--quick]
    GUARDRAILS_PURE=1 python benchmarks/compare_commits.py HEAD  # the pure path
    python benchmarks/compare_commits.py OLD HEAD --hot --passes 9   # the hot paths

``--hot``: the valid call (2 guards) and the audited call of ``bench_audit.py``
(a read-only tool, ``AuditLog`` as hook and recorder): over a store that keeps
nothing (the code's own cost), over ``MemoryStore`` through ``call`` and
``acall`` (a store ``acall`` writes inline, not off the loop) and over
``SQLiteStore``. A last table gives each column's ratio to the
first commit's in every pass (same pass, same minutes) and their median.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLUMNS = ("valid, 2 guards", "valid, 0 guards", "each guard 2 to 5", "schema rejection")
COLUMNS += ("guard rejection",)
HOT = ("valid", "valid acall", "audited", "audited memory", "audited memory acall")
HOT += ("audited SQLite",)


def _hot(quick: bool) -> dict[str, Any]:
    """``--hot``: the valid and the audited call, sync and async, as ratios to a bare call."""
    import os
    import tempfile

    import bench_audit
    from _harness import compare
    from _transfer import VALID, transfer
    from bench_pipeline import build

    from guardrails.store import MemoryStore, SQLiteStore

    turn = build(guards=2).turn(tenant="acme")
    args = dict(VALID)
    audited, aaudited = bench_audit._calls(bench_audit._Discard()), _acalls()
    memory = bench_audit._calls(MemoryStore())
    folder = tempfile.mkdtemp(prefix="guardrails-hot-")
    store = SQLiteStore(os.path.join(folder, "calls.db"))

    async def valid_acall() -> Any:
        return await turn.acall("transfer", args)

    cases = {
        "bare": lambda: transfer(**args),
        "valid": lambda: turn.call("transfer", args),
        "valid acall": valid_acall,
        "audited": audited,
        "audited memory": memory,
        "audited memory acall": aaudited,
        "audited SQLite": bench_audit._calls(store),
    }
    rows = compare("hot", cases, floor="bare", quick=quick, between_rounds=turn.results.clear)
    store.close()
    out: dict[str, Any] = {
        name: rows_by[name]["ratio"] for rows_by in [{r["name"]: r for r in rows}] for name in HOT
    }
    out["bare_us"] = next(r["median_us"] for r in rows if r["name"] == "bare")
    return out


def _acalls() -> Any:
    """``bench_audit._calls`` over ``MemoryStore``, through ``acall``."""
    import bench_audit

    from guardrails import Guardrails
    from guardrails.audit import AuditLog
    from guardrails.store import MemoryStore

    audit = AuditLog(MemoryStore())
    turn = Guardrails([bench_audit.lookup], hooks=[audit], recorder=[audit]).turn(
        tenant="acme", session="s-1"
    )
    args = {"order_id": "o-1"}

    async def call() -> Any:
        turn.results.clear()
        return await turn.acall("lookup", args)

    return call


def _child(quick: bool, hot: bool = False) -> None:
    if hot:
        print(json.dumps({**_hot(quick), "package": __import__("guardrails").__file__}))
        return
    from _harness import compare
    from _transfer import INVALID, OVER_LIMIT, VALID, transfer
    from bench_pipeline import build

    turns = {g: build(guards=g).turn(tenant="acme") for g in (0, 2, 5)}
    args = dict(VALID)
    cases = {
        "bare": lambda: transfer(**args),
        "valid 0": lambda: turns[0].call("transfer", args),
        "valid 2": lambda: turns[2].call("transfer", args),
        "valid 5": lambda: turns[5].call("transfer", args),
        "schema rejection": lambda: turns[2].call("transfer", INVALID),
        "guard rejection": lambda: turns[2].call("transfer", OVER_LIMIT),
    }

    def clear() -> None:
        for turn in turns.values():
            turn.results.clear()

    rows = {
        r["name"]: r for r in compare("c", cases, floor="bare", quick=quick, between_rounds=clear)
    }
    ratio = {name: rows[name]["ratio"] for name in cases if name != "bare"}
    out = {
        "valid, 2 guards": ratio["valid 2"],
        "valid, 0 guards": ratio["valid 0"],
        "each guard 2 to 5": (ratio["valid 5"] - ratio["valid 2"]) / 3,
        "schema rejection": ratio["schema rejection"],
        "guard rejection": ratio["guard rejection"],
        "bare_us": rows["bare"]["median_us"],
        "package": __import__("guardrails").__file__,
    }
    print(json.dumps(out))


def extract(commit: str, into: Path) -> Path:
    """The commit's package, installed (and its compiled core built) into ``into``."""
    source = into / "src"
    source.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    pip = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--target",
        str(into / "site"),
    ]
    subprocess.run([*pip, str(source)], check=True, capture_output=True)
    return into / "site"


def _time(tree: Path, quick: bool, hot: bool) -> dict[str, float]:
    env = {**__import__("os").environ, "PYTHONPATH": f"{tree}:{HERE}"}
    argv = [sys.executable, "-S", __file__, "--child"] + (["--quick"] if quick else [])
    argv += ["--hot"] if hot else []
    # -S keeps an editable install of this tree off sys.path; site-packages is added back.
    site = [p for p in sys.path if p.endswith("site-packages")]
    env["PYTHONPATH"] += "".join(f":{p}" for p in site)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if not str(found.pop("package")).startswith(str(tree)):
        raise RuntimeError(f"the child imported guardrails from outside {tree}")
    return found  # type: ignore[no-any-return]


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        _child("--quick" in argv, "--hot" in argv)
        return
    quick, hot = "--quick" in argv, "--hot" in argv
    columns = HOT if hot else COLUMNS
    passes = int(argv[argv.index("--passes") + 1]) if "--passes" in argv else 3
    commits = [
        a for i, a in enumerate(argv) if not a.startswith("--") and argv[i - 1] != "--passes"
    ]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for commit in commits:
            if Path(commit).is_dir():  # a checkout, as it is (its compiled core built)
                trees[commit] = Path(commit).resolve()
                continue
            place = Path(tmp) / commit.replace("/", "_").replace("~", "_")
            place.mkdir()
            trees[commit] = extract(commit, place)
        results: dict[str, list[dict[str, float]]] = {c: [] for c in commits}
        for p in range(passes):
            order = commits[p % len(commits) :] + commits[: p % len(commits)]
            for commit in order:
                results[commit].append(_time(trees[commit], quick, hot))
    print("| commit | " + " | ".join(columns) + " | bare µs |")
    print("| --- |" + " ---: |" * (len(columns) + 1))
    for commit in commits:
        cells = [statistics.median(r[c] for r in results[commit]) for c in columns]
        bare = statistics.median(r["bare_us"] for r in results[commit])
        line = " | ".join(f"{x:.2f}x" for x in cells)
        print(f"| `{commit}` | {line} | {bare:.3f} |")
    if len(commits) > 1:
        _relative(commits, columns, results)


def _relative(
    commits: list[str], columns: tuple[str, ...], results: dict[str, list[dict[str, float]]]
) -> None:
    """Each commit's ratio over the first commit's, pass by pass: the median of those."""
    first = commits[0]
    print(f"\n| over `{first}`, median of passes (each pass) | " + " | ".join(columns) + " |")
    print("| --- |" + " ---: |" * len(columns))
    for commit in commits[1:]:
        cells = []
        for c in columns:
            each = [r[c] / b[c] for r, b in zip(results[commit], results[first], strict=True)]
            cells.append(f"{statistics.median(each):.3f} ({', '.join(f'{x:.2f}' for x in each)})")
        print(f"| `{commit}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
