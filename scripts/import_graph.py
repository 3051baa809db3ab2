"""The import graph of ``guardrails``: its modules, and the rooms they sit in, layer by layer.

A room is a top-level module or a subpackage of ``guardrails/`` (the package
itself is ``__init__``). ``LAYERS`` orders the rooms from the top (the entry
points) down to the foundation; a room imports only rooms of the layers
below its own. ``tests/test_imports.py`` reads the graph from here and checks
it: no module reaches itself, no two rooms import each other, every edge
points down ``LAYERS``, and the drawing in ``guardrails/AGENTS.md`` is what
this prints::

    python scripts/import_graph.py          # the rooms, layer by layer: what each imports
    python scripts/import_graph.py --dot | dot -Tsvg > graph.svg

The graph is read from the source with ``ast``. What counts as an edge:

- every ``import`` and ``from ... import``, wherever it is: at module level,
  inside functions (a lazy import is still a circle) and under
  ``TYPE_CHECKING`` (two modules that name each other's types are one tangle
  to read, even when only the type checker follows the import);
- ``from package import name`` is an edge to ``package.name`` when that is a
  module (compiled ones included), to ``package`` otherwise;
- importing ``a.b.c`` also runs the ``__init__`` of ``a.b``: an edge to it,
  unless that package encloses the importing module (its ``__init__`` has
  already run by then, so a submodule importing a sibling does not loop
  through the package that re-exports it).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "guardrails"

# The rooms of ``guardrails``, top first: a room imports only rooms of later layers.
LAYERS: tuple[tuple[str, ...], ...] = (
    # ``python -m guardrails``, and the demo at its old path.
    ("__main__", "demo"),
    # The ``guardrails`` command: one module per subcommand.
    ("cli",),
    # Built on the public surface: the MCP gateway, the examples the command runs.
    ("examples", "gateway"),
    # The public surface, and the adapters for model SDKs and agent frameworks.
    ("__init__", "integrations"),
    # The object users hold.
    ("engine",),
    # What the engine is given: policies, approvals, the audit log, effect hooks.
    ("approvals", "audit", "effects", "policy"),
    # Built-in rules: guards and hooks built from configuration.
    ("rules",),
    # The choke-points: admission, tool_call, pre_turn, post_run.
    ("middleware",),
    ("tools",),
    # The guard boundary, and observe's modules at their old paths.
    ("guard", "coverage", "metrics", "recorder", "telemetry"),
    # Recorders, metrics, spans, coverage; text's look-alikes at their old path.
    ("confusables", "observe"),
    ("_call_state", "schema", "store", "testing", "text"),
    ("_aio", "_conditions", "context", "messages", "native"),
    # The foundation: imports nothing of guardrails.
    ("_ccore", "_fair", "_json_depth", "_revision", "_version", "_workers", "errors", "verdicts"),
)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = (root.name, *path.relative_to(root).parts)
    parts = (*parts[:-1], parts[-1].split(".")[0])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, package: str, modules: set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            yield sub if sub in modules else base


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package at ``root``: the modules of that package it imports."""
    sources = {module_name(p, root): p for p in root.rglob("*.py")}
    compiled = {module_name(p, root) for p in [*root.rglob("*.pyi"), *root.rglob("*.so")]}
    modules = set(sources) | compiled
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in sources.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            for target in _imported(node, package, modules):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    candidate = ".".join(parts[:i])
                    enclosing = i < len(parts) and name.startswith(candidate + ".")
                    if candidate in modules and candidate != name and not enclosing:
                        graph[name].add(candidate)
    return graph


def room_of(module: str) -> str:
    """``guardrails.observe._faults`` -> ``observe``; ``guardrails`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def room_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Each pair of rooms one imports the other: the module edges that make it, sorted."""
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            if room_of(source) != room_of(target):
                edges.setdefault((room_of(source), room_of(target)), []).append((source, target))
    return edges


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each room: the rooms it imports."""
    rooms: dict[str, set[str]] = {room_of(m): set() for m in graph}
    for source, target in room_edges(graph):
        rooms[source].add(target)
    return rooms


def two_way(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The pairs of rooms that import each other, each once."""
    edges = room_edges(graph)
    return [(a, b) for a, b in edges if a < b and (b, a) in edges]


def layer_of(layers: Sequence[Sequence[str]] = LAYERS) -> dict[str, int]:
    """Each room's layer, counted from 1 at the top."""
    return {room: i for i, layer in enumerate(layers, 1) for room in layer}


def upward(
    graph: dict[str, set[str]], layers: Sequence[Sequence[str]] = LAYERS
) -> list[tuple[str, str]]:
    """The room edges that do not point to a lower layer (a room in no layer never does)."""
    depth = layer_of(layers)
    return [
        (a, b) for a, b in room_edges(graph) if depth.get(a, 0) >= depth.get(b, len(layers) + 1)
    ]


def drawing(graph: dict[str, set[str]], layers: Sequence[Sequence[str]] = LAYERS) -> str:
    """The rooms layer by layer, top first, each with the rooms it imports."""
    rooms = room_graph(graph)
    unplaced = sorted(set(rooms) - set(layer_of(layers)))
    rows = [(str(i), layer) for i, layer in enumerate(layers, 1)]
    rows += [("?", unplaced)] if unplaced else []
    width = max(map(len, rooms))
    lines = []
    for label, layer in rows:
        for n, room in enumerate(sorted(layer, key=lambda r: (r.startswith("_"), r))):
            imports = ", ".join(sorted(rooms.get(room, ()))) or "(nothing)"
            lines.append(f"{label if n == 0 else '':>2}  {room:<{width}} -> {imports}")
    return "\n".join(lines) + "\n"


def dot(graph: dict[str, set[str]], layers: Sequence[Sequence[str]] = LAYERS) -> str:
    """Graphviz: one rank per layer, top first."""
    lines = ["digraph guardrails {", "  rankdir=TB;"]
    for i, layer in enumerate(layers, 1):
        names = " ".join(f'"{room}";' for room in sorted(layer))
        lines.append(f"  subgraph layer_{i} {{ rank=same; {names} }}")
    rooms = room_graph(graph)
    for source in sorted(rooms):
        lines.extend(f'  "{source}" -> "{target}";' for target in sorted(rooms[source]))
    return "\n".join([*lines, "}"]) + "\n"


def main(argv: list[str]) -> int:
    graph = import_graph()
    sys.stdout.write(dot(graph) if "--dot" in argv else drawing(graph))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
