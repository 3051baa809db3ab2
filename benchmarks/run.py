"""Run every benchmark and write the results: ``python benchmarks/run.py [--quick]``.

Finds each ``benchmarks/bench_*.py``, calls its ``run(quick)``, and writes
``results/<mode>.md`` (a table per group) and ``results/<mode>.json`` (the raw
rows, with the Python version, package versions and machine). A module that
fails is reported and the others still run; the exit status is then 1.

Options: ``--quick`` (short rounds, for iterating), ``--only NAME`` (run the
modules whose name contains NAME; repeatable), ``--out DIR``, ``--readme``
(also replace the tables at the end of ``benchmarks/HISTORY.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _harness import check_row  # noqa: E402

PACKAGES = (
    "guardrails-kit",
    "pydantic",
    "pydantic-core",
    "jsonschema",
    "jsonschema-rs",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "prometheus-client",
    "openai-agents",
    "langchain",
    "langchain-core",
    "langgraph",
    "langgraph-prebuilt",
    "chokepoint",
    "pyahocorasick",
    "psycopg",
)

COLUMNS = (
    ("median_us", "median µs"),
    ("best_us", "best µs"),
    ("ratio", "x floor"),
    ("added_us", "added µs"),
    ("x_ours", "x ours"),
    ("mb_per_s", "MB/s"),
    ("ops_per_s", "ops/s"),
    ("speedup", "speedup"),
    ("note", "note"),
)


def discover(directory: Path = HERE, only: Sequence[str] = ()) -> list[str]:
    """Module names of the ``bench_*.py`` files in ``directory``, sorted."""
    names = sorted(p.stem for p in directory.glob("bench_*.py"))
    if only:
        names = [n for n in names if any(o in n for o in only)]
    return names


def run_modules(
    names: Iterable[str], quick: bool, directory: Path = HERE
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
    """(rows, errors, seconds per module). Each row gains a ``module`` key."""
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    rows: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for name in names:
        start = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(name)
            produced = module.run(quick=quick)
            for r in produced:
                check_row(r)
            rows.extend({"module": name, **r} for r in produced)
        except Exception as exc:  # one broken benchmark must not hide the rest
            errors.append(
                {
                    "module": name,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(),
                }
            )
            print(f"[bench] {name} failed: {exc!r}", file=sys.stderr, flush=True)
        seconds[name] = round(time.perf_counter() - start, 2)
        print(f"[bench] {name} done in {seconds[name]} s", file=sys.stderr, flush=True)
    return rows, errors, seconds


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
    }
    with contextlib.suppress(OSError):
        info["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def versions(packages: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _git_commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """One table per group, in the order the groups first appear."""
    lines: list[str] = []
    if meta:
        m = meta["machine"]
        lines += [
            f"Python {m['python']} on {m['cpu_model']} ({m['cpu_count']} cores), "
            f"{meta['mode']} mode, {meta['date']}, commit {meta.get('commit')}.",
            "",
        ]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r["group"]), []).append(r)
    for group, members in groups.items():
        cols = [(k, title) for k, title in COLUMNS if any(r.get(k) is not None for r in members)]
        lines.append(f"### {group}")
        lines.append("")
        lines.append("| case | " + " | ".join(title for _, title in cols) + " |")
        lines.append(
            "| --- | " + " | ".join("---:" if k != "note" else "---" for k, _ in cols) + " |"
        )
        for r in members:
            cells = [_cell(k, r.get(k)) for k, _ in cols]
            lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "note":
        return str(value).replace("|", "\\|")
    if key in ("ratio", "x_ours", "speedup"):
        return f"{value:.2f}"
    if key == "ops_per_s":
        return f"{value:,.0f}"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def splice(document: str, name: str, text: str) -> str:
    """``document`` with what lies between ``<!-- name:start -->`` and ``<!-- name:end -->`` replaced."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    head, found, rest = document.partition(start)
    _, found_end, tail = rest.partition(end)
    if not (found and found_end):
        raise ValueError(f"no {start} ... {end} markers")
    return f"{head}{start}\n{text.strip()}\n{end}{tail}"


def print_rows(rows: Sequence[Mapping[str, Any]]) -> None:
    print(markdown(rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short rounds, for iterating")
    parser.add_argument(
        "--only", action="append", default=[], help="modules whose name contains this"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results", help="where to write results")
    parser.add_argument(
        "--readme",
        action="store_true",
        help="also put the tables at the end of benchmarks/HISTORY.md",
    )
    args = parser.parse_args(argv)

    names = discover(HERE, args.only)
    started = datetime.datetime.now(datetime.UTC)
    meta: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(
            ["python", "benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "commit": _git_commit(),
        "machine": machine(),
        "packages": versions(),
        "modules": names,
    }
    rows, errors, seconds = run_modules(names, args.quick)
    meta["seconds"] = seconds
    with contextlib.suppress(OSError):
        meta["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]

    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / meta["mode"]
    stem.with_suffix(".json").write_text(
        json.dumps({"meta": meta, "rows": rows, "errors": errors}, indent=1, default=str) + "\n"
    )
    text = markdown(rows, meta)
    if errors:
        text += (
            "\n### failed modules\n\n"
            + "\n".join(f"- {e['module']}: {e['error']}" for e in errors)
            + "\n"
        )
    stem.with_suffix(".md").write_text(text)
    if args.readme:
        readme = HERE / "HISTORY.md"
        readme.write_text(splice(readme.read_text(), "results", text))
    print(text)
    print(f"[bench] wrote {stem}.md and {stem}.json", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
