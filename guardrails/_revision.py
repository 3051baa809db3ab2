"""The revision of an engine: a content hash of its guards, tools and policy.

An audit row, a span and the ``guardrails_policy_revision_info`` metric carry
it, so a decision can be traced to the exact rules that made it: two engines
with the same guards (names, options, the functions' qualified names), the
same tools (names and input schemas) and the same policy have the same
revision, in any process; a change to any of them gives another.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Mapping
from typing import Any

_DEPTH = 32  # a policy is a few levels deep; deeper is cut to the type's name


def canonical(value: Any, depth: int = 0) -> Any:
    """A JSON-ready form of ``value`` that is the same in every process."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return repr(value)  # nan and inf too
    if depth >= _DEPTH:
        return _name(type(value))
    if isinstance(value, enum.Enum):
        return canonical(value.value, depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: canonical(getattr(value, f.name, None), depth + 1)
            for f in dataclasses.fields(value)
            if not f.name.startswith("_")
        }
        return {"type": _name(type(value)), "fields": fields}
    if isinstance(value, Mapping):
        items = [
            (json.dumps(canonical(k, depth + 1)), canonical(v, depth + 1)) for k, v in value.items()
        ]
        return sorted(items)
    if isinstance(value, set | frozenset):
        return sorted(json.dumps(canonical(v, depth + 1), sort_keys=True) for v in value)
    if isinstance(value, list | tuple):
        return [canonical(v, depth + 1) for v in value]
    pattern = getattr(value, "pattern", None)
    if isinstance(pattern, str):  # a compiled regular expression
        return {"pattern": pattern}
    return _name(value if isinstance(value, type) or callable(value) else type(value))


def _name(obj: Any) -> str:
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    return f"{module}.{name}" if isinstance(module, str) and isinstance(name, str) else "?"


def revision_of(engine: Any) -> str:
    """16 hex digits of the SHA-256 of the engine's guards, tools and policy."""
    guards = [
        {
            "name": g.name,
            "at": sorted(str(p) for p in g.choke_points),
            "fail_closed": bool(g.fail_closed),
            "observe": bool(g.observe),
            "outcome": str(g.outcome),
            "timeout": repr(g.timeout),
            "tools": None if g.tools is None else sorted(g.tools),
            "fn": _name(getattr(g, "fn", None)),
        }
        for g in sorted(engine.guards.values(), key=lambda g: g.name)
    ]
    tools = [
        {
            "name": name,
            "schema": canonical(getattr(t, "schema", None)),
            "bind": canonical(getattr(t, "bind", None)),
            "effect": bool(getattr(t, "effect", False)),
        }
        for name, t in sorted(engine.tools.items())
    ]
    installed = getattr(engine, "_policy", None)
    policy = canonical(getattr(installed, "policy", None))
    text = json.dumps({"guards": guards, "tools": tools, "policy": policy}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
