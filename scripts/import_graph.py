"""Print the import graph between the packages of ``guardrails`` (text, or DOT with ``--dot``).

Each top-level module and each subpackage of ``guardrails/`` is one node; an
edge ``a -> b`` says some module of ``a`` imports some module of ``b`` (lazy
imports and imports under ``TYPE_CHECKING`` included, as in
``tests/test_imports.py``)::

    python scripts/import_graph.py          # one line per package: what it imports
    python scripts/import_graph.py --dot | dot -Tsvg > graph.svg
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "guardrails"
PUBLIC = ("__init__", "__main__")


def node_of(module: str) -> str:
    """``guardrails.observe._faults`` -> ``observe``; ``guardrails.engine`` -> ``engine``."""
    parts = module.split(".")[1:]
    return parts[0] if parts else "__init__"


def _targets(tree: ast.AST, package: list[str], modules: set[str]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("guardrails.")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == "guardrails":
                named = {f"guardrails.{a.name}" for a in node.names}
                found |= named & modules
                if named - modules:
                    found.add("guardrails")
            elif base.startswith("guardrails."):
                found.add(base)
    return found


def package_graph(root: Path = ROOT) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    paths = sorted(root.rglob("*.py"))
    modules = {f"guardrails.{p.name.split('.')[0]}" for p in root.iterdir()}
    for path in paths:
        parts = ["guardrails", *path.relative_to(root).with_suffix("").parts]
        if path.name == "__init__.py":
            parts = parts[:-1]
        package = parts if path.name == "__init__.py" else parts[:-1]
        source = node_of(".".join(parts))
        edges = graph.setdefault(source, set())
        for target in _targets(ast.parse(path.read_text()), package, modules):
            if node_of(target) != source:
                edges.add(node_of(target))
    return graph


def main(argv: list[str]) -> int:
    graph = package_graph()
    if "--dot" in argv:
        print("digraph guardrails {")
        for source in sorted(graph):
            for target in sorted(graph[source]):
                print(f'  "{source}" -> "{target}";')
        print("}")
        return 0
    width = max(map(len, graph))
    for source in sorted(graph, key=lambda n: (n.startswith("_"), n)):
        print(f"{source:<{width}} -> {', '.join(sorted(graph[source])) or '(nothing)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
