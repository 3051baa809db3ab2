"""What a tool's JSON Schema says about a dotted parameter path (checked at load)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["optional_nullable", "resolve"]


def resolve(tool: Any, path: str) -> frozenset[str] | None:
    """The JSON types the schema allows at ``path``, or None when it does not say.

    Raises ``LookupError(segment)`` for a segment the schema does not declare.
    A bound parameter (filled from the context) exists, with no declared type.
    """
    segments = path.split(".")
    if segments[0] in getattr(tool, "bound", frozenset()):
        return None
    return _types(_deref(_node(tool.schema, segments), tool.schema), tool.schema)


def optional_nullable(tool: Any, path: str) -> bool:
    """Whether ``path`` ends at an object property that its object does not require
    and whose schema says null is allowed (``"type": ["string", "null"]``, an
    ``anyOf`` with ``{"type": "null"}``, ``null`` in an ``enum``)."""
    segments = path.split(".")
    last = segments[-1]
    if last == "*" or last.isdigit() or segments[0] in getattr(tool, "bound", frozenset()):
        return False
    root = tool.schema
    try:
        parent = _deref(_node(root, segments[:-1]), root)
        leaf = _node(root, segments)
    except LookupError:
        return False
    for option in _options(parent):
        required = _deref(option, root).get("required")
        if isinstance(required, list) and last in required:
            return False
    return _admits_null(leaf, root, 0)


def _node(root: Mapping[str, Any], segments: list[str]) -> Any:
    """The schema at ``segments`` (not dereferenced); ``LookupError(segment)`` when undeclared."""
    node: Any = root
    for depth, segment in enumerate(segments):
        node = _deref(node, root)
        options = _options(node)
        if segment == "*" or segment.isdigit():
            items = [o.get("items") for o in options if isinstance(o.get("items"), Mapping)]
            if not items:
                raise LookupError(segment)
            node = items[0]
            continue
        found = None
        for option in options:
            props = option.get("properties")
            if isinstance(props, Mapping) and segment in props:
                found = props[segment]
                break
        if found is None:
            # Inside a parameter, an object open to more keys may hold this one.
            found = _open_object(options) if depth else None
            if found is None:
                raise LookupError(segment)
        node = found
    return node


def _admits_null(node: Any, root: Mapping[str, Any], depth: int) -> bool:
    """Whether the schema says, in so many words, that null is valid here (a schema
    that says nothing about null, or that ``not`` could exclude it, does not)."""
    if not isinstance(node, Mapping) or not node or depth > 32 or "not" in node:
        return False
    said = False
    if "$ref" in node:  # the target and the keywords beside it both apply
        if not _admits_null(_deref({"$ref": node["$ref"]}, root), root, depth + 1):
            return False
        said = True
    declared = node.get("type")
    if declared is not None:
        if not (declared == "null" or (isinstance(declared, list) and "null" in declared)):
            return False
        said = True
    if "enum" in node:
        if not (isinstance(node["enum"], list) and None in node["enum"]):
            return False
        said = True
    if "const" in node:
        if node["const"] is not None:
            return False
        said = True
    for option in node.get("allOf", ()) or ():
        if not _admits_null(option, root, depth + 1):
            return False
        said = True
    options = node.get("anyOf")
    if isinstance(options, list):
        if not any(_admits_null(o, root, depth + 1) for o in options):
            return False
        said = True
    options = node.get("oneOf")
    if isinstance(options, list):
        # Exactly one: one option admits null and every other one refuses it.
        admitting = [o for o in options if _admits_null(o, root, depth + 1)]
        if len(admitting) != 1 or not all(
            _refuses_null(o, root, depth + 1) for o in options if o is not admitting[0]
        ):
            return False
        said = True
    return said


def _refuses_null(node: Any, root: Mapping[str, Any], depth: int) -> bool:
    """Whether the schema plainly refuses null (a type, enum or const without it)."""
    if not isinstance(node, Mapping) or not node or depth > 32:
        return False
    if "$ref" in node and _refuses_null(_deref({"$ref": node["$ref"]}, root), root, depth + 1):
        return True
    declared = node.get("type")
    if isinstance(declared, str) and declared != "null":
        return True
    if isinstance(declared, list) and "null" not in declared:
        return True
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        return True
    if "const" in node and node["const"] is not None:
        return True
    if any(_refuses_null(o, root, depth + 1) for o in node.get("allOf", ()) or ()):
        return True
    options = node.get("anyOf")
    return isinstance(options, list) and all(_refuses_null(o, root, depth + 1) for o in options)


def _open_object(options: list[Mapping[str, Any]]) -> Any:
    for option in options:
        extra = option.get("additionalProperties", True)
        if option.get("type") == "object" and extra is not False:
            return extra if isinstance(extra, Mapping) else {}
    return None


def _deref(node: Any, root: Mapping[str, Any]) -> Any:
    seen = 0
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and seen < 32:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        node = target
        seen += 1
    return node if isinstance(node, Mapping) else {}


def _options(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out = [node]
    for key in ("anyOf", "oneOf", "allOf"):
        for option in node.get(key, ()) or ():
            if isinstance(option, Mapping):
                out.append(option)
    return out


def _types(node: Mapping[str, Any], root: Mapping[str, Any]) -> frozenset[str] | None:
    found: set[str] = set()
    for option in _options(node):
        option = _deref(option, root)
        declared = option.get("type")
        if isinstance(declared, str):
            found.add(declared)
        elif isinstance(declared, list):
            found.update(t for t in declared if isinstance(t, str))
        elif "enum" in option or "const" in option:
            values = option.get("enum", [option.get("const")])
            for v in values if isinstance(values, list) else ():
                found.add(_json_type(v))
    return frozenset(found) if found else None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else "object"
