"""The engine and the choke-points import each other in one direction only.

The import graph is read from the source (every import: module level, inside
functions, and under ``TYPE_CHECKING``), so a cycle hidden in a lazy import
counts too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import guardrails

ROOT = Path(guardrails.__file__).parent


def module_name(path: Path) -> str:
    parts = ("guardrails", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                # A submodule import runs its packages' __init__ too (the root excepted:
                # every module would otherwise depend on everything).
                parts = target.split(".")
                for i in range(2, len(parts) + 1):
                    candidate = ".".join(parts[:i])
                    if candidate in modules and candidate != name:
                        graph[name].add(candidate)
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = list(graph[start])
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(graph.get(node, ()))
    return seen


def test_the_import_graph_is_read_from_every_kind_of_import() -> None:
    graph = import_graph()
    assert "guardrails.middleware.tool_call" in graph["guardrails.engine"]
    assert "guardrails.middleware.pre_turn" in graph["guardrails.engine"]
    # Imports under TYPE_CHECKING are edges too.
    assert "guardrails.middleware._turn" in graph["guardrails.middleware.pre_turn"]


@pytest.mark.parametrize(
    "module",
    [
        "guardrails.engine",
        "guardrails.middleware.pre_turn",
        "guardrails.middleware.post_run",
        "guardrails.middleware.tool_call",
        "guardrails.middleware.admission",
    ],
)
def test_no_choke_point_reaches_back_to_the_engine(module: str) -> None:
    graph = import_graph()
    assert "guardrails.engine" not in reachable(graph, module)


@pytest.mark.parametrize(
    "module",
    ["guardrails.engine", "guardrails.middleware.tool_call", "guardrails.middleware.admission"],
)
def test_no_import_cycle_runs_through_the_engine_or_the_tool_call_pipeline(module: str) -> None:
    assert module not in reachable(import_graph(), module)


@pytest.mark.parametrize(
    "module",
    ["guardrails.middleware.pre_turn", "guardrails.middleware.post_run", "guardrails.engine"],
)
def test_each_module_imports_first_in_a_fresh_interpreter(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
