"""Field-scoped sources: the values at one path of a tool's results.

``grounded_in = ["list_contacts.email"]`` names a source of its own: only
the values found at that path of ``list_contacts``'s (JSON) results ground
the argument, not every value anywhere in them. The path has the syntax of a
parameter path (``"email"``, ``"shared_with.*"``, ``"owner.email"``), and a
result's lists are looked through: ``email`` reaches the ``email`` field of
every object of a result that is a list of objects, at any level. A field
source is trusted when its tool is.

``"list_payees.iban by name"`` narrows it to the records the user named: the
``iban`` of an object is labelled only when a field of that object named
after ``by`` (``name``; several joined by ``or``) holds text the user wrote
earlier in the session, whole or one of its words of three letters or more
(the user's "Anna's" is the word "anna" too). So "pay Anna" grounds
Anna's account, never another payee's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..middleware import _paths
from ._punct import EDGES
from .kinds import normalise_text
from .rules import MAX_PATH_PARTS

__all__ = ["BY", "field_sources", "named_by", "records_named", "split_source", "values_at"]

_Path = tuple[str | int, ...]
_MAX_DEPTH = 64  # lists looked through and fields read, together
BY, _OR = " by ", " or "
_MIN_WORD = 3  # shorter words of a name ("of", "GB") never name its record


def split_source(name: str, tools: Iterable[str]) -> tuple[str, str] | None:
    """``(tool, path)`` when ``name`` is a field source of a known tool; else None."""
    known = set(tools)
    if name in known or "." not in name:
        return None
    tool, _, rest = name.partition(".")
    path, by, keys = rest.partition(BY)
    if tool not in known or not _path_ok(path):
        return None
    if by and not (_leaf_ok(path) and all(_path_ok(k) for k in keys.split(_OR))):
        return None
    return tool, path


def _path_ok(path: str) -> bool:
    return bool(path) and "" not in path.split(".") and path.count(".") < MAX_PATH_PARTS


def _leaf_ok(path: str) -> bool:
    leaf = _paths.parse(path)[-1]
    return isinstance(leaf, str) and leaf != "*"


_Field = tuple[_Path, str, tuple[_Path, ...]]


def field_sources(names: Iterable[str], tools: Iterable[str]) -> dict[str, tuple[_Field, ...]]:
    """Per tool, the parsed path, the source name and the ``by`` paths of each field source."""
    known = tuple(tools)
    out: dict[str, list[_Field]] = {}
    for name in sorted(set(names)):
        split = split_source(name, known)
        if split is not None:
            keys = name.partition(BY)[2]
            by = tuple(_paths.parse(k) for k in keys.split(_OR)) if keys else ()
            out.setdefault(split[0], []).append((_paths.parse(split[1]), name, by))
    return {tool: tuple(items) for tool, items in out.items()}


def named_by(said: Callable[[str], bool]) -> Callable[[Any], bool]:
    """Whether a field's value is text the user wrote (``said``: a text key the user's)."""

    def named(value: Any) -> bool:
        if value.__class__ is not str:
            return False
        text = normalise_text(value)
        if said(text):
            return True
        for word in set(text.split()):
            word = word.strip(EDGES)
            if len(word) >= _MIN_WORD and said(word):  # "Anna's" labels "anna" too
                return True
        return False

    return named


def records_named(
    value: Any, path: _Path, by: tuple[_Path, ...], named: Callable[[Any], bool]
) -> Iterator[Any]:
    """The values at ``path`` of the objects one of whose ``by`` fields the user named."""
    *parent, leaf = path
    for node in values_at(value, tuple(parent)):
        for record in node if isinstance(node, list) else (node,):
            if not isinstance(record, Mapping) or leaf not in record:
                continue
            if any(named(v) for key in by for v in values_at(record, key)):
                yield record[leaf]


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
