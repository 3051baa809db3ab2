"""Dotted paths into JSON-like values: ``"claims"``, ``"order.id"``, ``"items.*.id"``.

A segment that is all digits indexes a list; ``*`` (reading only) walks every
item of a list. The empty path is the value itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["MISSING", "get", "parse", "put", "walk"]

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


def parse(path: str | tuple[str | int, ...]) -> tuple[str | int, ...]:
    if isinstance(path, tuple):
        return path
    if not path:
        return ()
    return tuple(int(s) if s.isdigit() else s for s in path.split("."))


def _step(node: Any, segment: str | int) -> Any:
    if isinstance(node, Mapping):
        return node.get(str(segment), MISSING)
    if isinstance(node, list) and isinstance(segment, int) and -len(node) <= segment < len(node):
        return node[segment]
    return MISSING


def get(value: Any, path: tuple[str | int, ...]) -> Any:
    """The value at ``path``, or ``MISSING``."""
    for segment in path:
        value = _step(value, segment)
        if value is MISSING:
            return MISSING
    return value


def walk(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every ``(concrete path, value)`` that ``path`` reaches, ``*`` expanded."""
    stack: list[tuple[tuple[str | int, ...], Any, int]] = [((), value, 0)]
    while stack:
        where, node, depth = stack.pop()
        if depth == len(path):
            yield where, node
            continue
        segment = path[depth]
        if segment == "*":
            if isinstance(node, list):
                for i in range(len(node) - 1, -1, -1):
                    stack.append(((*where, i), node[i], depth + 1))
            continue
        child = _step(node, segment)
        if child is not MISSING:
            stack.append(((*where, segment), child, depth + 1))


def put(value: Any, path: tuple[str | int, ...], new: Any) -> None:
    """Set ``path`` in ``value`` (mutates), creating missing objects on the way."""
    if not path:
        raise ValueError("cannot replace the root")
    node = value
    for segment in path[:-1]:
        child = _step(node, segment)
        if child is MISSING:
            if not isinstance(node, dict):
                raise LookupError(path)
            child = node[str(segment)] = {}
        node = child
    last = path[-1]
    if isinstance(node, list) and isinstance(last, int):
        node[last] = new
    elif isinstance(node, dict):
        node[str(last)] = new
    else:
        raise LookupError(path)
