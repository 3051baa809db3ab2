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
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLUMNS = ("valid, 2 guards", "valid, 0 guards", "each guard 2 to 5", "schema rejection")
COLUMNS += ("guard rejection",)


def _child(quick: bool) -> None:
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


def _time(tree: Path, quick: bool) -> dict[str, float]:
    env = {**__import__("os").environ, "PYTHONPATH": f"{tree}:{HERE}"}
    argv = [sys.executable, "-S", __file__, "--child"] + (["--quick"] if quick else [])
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
        _child("--quick" in argv)
        return
    quick = "--quick" in argv
    passes = int(argv[argv.index("--passes") + 1]) if "--passes" in argv else 3
    commits = [
        a for i, a in enumerate(argv) if not a.startswith("--") and argv[i - 1] != "--passes"
    ]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for commit in commits:
            place = Path(tmp) / commit.replace("/", "_").replace("~", "_")
            place.mkdir()
            trees[commit] = extract(commit, place)
        results: dict[str, list[dict[str, float]]] = {c: [] for c in commits}
        for p in range(passes):
            order = commits[p % len(commits) :] + commits[: p % len(commits)]
            for commit in order:
                results[commit].append(_time(trees[commit], quick))
    print("| commit | " + " | ".join(COLUMNS) + " | bare µs |")
    print("| --- |" + " ---: |" * (len(COLUMNS) + 1))
    for commit in commits:
        cells = [statistics.median(r[c] for r in results[commit]) for c in COLUMNS]
        bare = statistics.median(r["bare_us"] for r in results[commit])
        line = " | ".join(f"{x:.2f}x" for x in cells)
        print(f"| `{commit}` | {line} | {bare:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
