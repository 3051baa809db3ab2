"""Field-scoped sources: the values at one path of a tool's results.

``grounded_in = ["list_contacts.email"]`` names a source of its own: only
the values found at that path of ``list_contacts``'s (JSON) results ground
the argument, not every value anywhere in them. The path has the syntax of a
parameter path (``"email"``, ``"shared_with.*"``, ``"owner.email"``), and a
result's lists are looked through: ``email`` reaches the ``email`` field of
every object of a result that is a list of objects, at any level. A field
source is trusted when its tool is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..rules import _paths
from .rules import MAX_PATH_PARTS

__all__ = ["field_sources", "split_source", "values_at"]

_Path = tuple[str | int, ...]
_MAX_DEPTH = 64  # lists looked through and fields read, together


def split_source(name: str, tools: Iterable[str]) -> tuple[str, str] | None:
    """``(tool, path)`` when ``name`` is a field source of a known tool; else None."""
    known = set(tools)
    if name in known or "." not in name:
        return None
    tool, _, path = name.partition(".")
    if tool not in known or "" in path.split(".") or path.count(".") >= MAX_PATH_PARTS:
        return None
    return tool, path


def field_sources(
    names: Iterable[str], tools: Iterable[str]
) -> dict[str, tuple[tuple[_Path, str], ...]]:
    """Per tool, the parsed path and the source name of each field source named."""
    known = tuple(tools)
    out: dict[str, list[tuple[_Path, str]]] = {}
    for name in sorted(set(names)):
        split = split_source(name, known)
        if split is not None:
            out.setdefault(split[0], []).append((_paths.parse(split[1]), name))
    return {tool: tuple(items) for tool, items in out.items()}


def values_at(value: Any, path: _Path) -> Iterator[Any]:
    """Every value at ``path`` in a JSON value, lists looked through (``*`` too)."""
    stack: list[tuple[Any, int, int]] = [(value, 0, 0)]
    while stack:
        node, depth, steps = stack.pop()
        if depth == len(path):
            yield node
            continue
        if steps >= _MAX_DEPTH:
            continue
        segment = path[depth]
        if isinstance(node, list):
            if segment == "*":
                stack.extend((item, depth + 1, steps + 1) for item in reversed(node))
            elif isinstance(segment, int) and -len(node) <= segment < len(node):
                stack.append((node[segment], depth + 1, steps + 1))
            else:
                stack.extend((item, depth, steps + 1) for item in reversed(node))
        elif isinstance(node, Mapping):
            child = node.get(str(segment), _paths.MISSING)
            if child is not _paths.MISSING:
                stack.append((child, depth + 1, steps + 1))
