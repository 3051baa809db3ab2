"""The policy file: TOML read with the standard library, every key checked.

::

    [policy]
    fail_closed = false            # a rule that cannot decide (store unreadable): refuse

    [sources]
    trusted = ["list_contacts"]    # tool results trusted (default: untrusted)

    [tools.pay]
    intent = ["pay", "transfer"]   # offered only when the user's input says so
    max_per_turn = 1
    max_per_session = 3

    [tools.pay.params.iban]
    kind = "iban"
    grounded_in = ["user", "context"]

A mistake (an unknown table or key, a value of the wrong type, a pattern that
does not compile) is one ``PolicyError`` naming the file, the table and the
key. Tool names, parameters and sources are checked against the registered
tools when the policy is loaded into an engine (``Policy.check``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError
from .policy import Ceiling, Policy, PolicyError
from .rules import Param

__all__ = ["load", "loads"]

_STRINGS = "a list of strings"
_PARAM_KEYS: dict[str, str] = {
    "kind": "string",
    "values": "list",
    "values_from": "string",
    "deny_values": "list",
    "pattern": "string",
    "min": "number",
    "max": "number",
    "min_from": "string",
    "max_from": "string",
    "domains": _STRINGS,
    "deny_domains": _STRINGS,
    "schemes": _STRINGS,
    "countries": _STRINGS,
    "prefixes": _STRINGS,
    "grounded_in": _STRINGS,
    "not_only_untrusted": "boolean",
    "outcome": "string",
    "name": "string",
}
_TOOL_KEYS = {
    "intent": _STRINGS,
    "max_per_turn": "integer",
    "max_per_session": "integer",
    "params": "table",
}
_TOP = {"policy", "sources", "tools"}


def load(path: str | os.PathLike[str]) -> Policy:
    """Read and check a policy file (not yet against tools)."""
    origin = os.fspath(path)
    try:
        with open(origin, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise PolicyError(origin, "file", None, f"cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(origin, "file", None, "is not UTF-8 text") from None
    return loads(text, origin=origin)


def loads(text: str, *, origin: str = "<string>") -> Policy:
    """A policy from TOML text; ``origin`` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(origin, "file", None, f"is not valid TOML ({exc})") from None
    _known(origin, "", data, _TOP)
    head = _table(origin, "policy", data.get("policy", {}))
    _known(origin, "policy", head, {"fail_closed"})
    fail_closed = _typed(origin, "policy", "fail_closed", head.get("fail_closed", False), "boolean")
    sources = _table(origin, "sources", data.get("sources", {}))
    _known(origin, "sources", sources, {"trusted", "untrusted"})
    trusted = _typed(origin, "sources", "trusted", sources.get("trusted", []), _STRINGS)
    untrusted = _typed(origin, "sources", "untrusted", sources.get("untrusted", []), _STRINGS)
    params: list[Param] = []
    where: dict[str, tuple[str, str]] = {}
    intents: dict[str, tuple[str, ...]] = {}
    ceilings: dict[str, Ceiling] = {}
    tools = _table(origin, "tools", data.get("tools", {}))
    for tool, spec in tools.items():
        table = f"tools.{tool}"
        spec = _table(origin, table, spec)
        _known(origin, table, spec, set(_TOOL_KEYS))
        for key, expected in _TOOL_KEYS.items():
            if key in spec:
                _typed(origin, table, key, spec[key], expected)
        if "intent" in spec:
            if not spec["intent"]:
                raise PolicyError(origin, table, "intent", "needs at least one term")
            intents[tool] = tuple(spec["intent"])
        if "max_per_turn" in spec or "max_per_session" in spec:
            try:
                ceilings[tool] = Ceiling(spec.get("max_per_turn"), spec.get("max_per_session"))
            except ConfigurationError as exc:
                key = "max_per_turn" if str(exc).startswith("per_turn") else "max_per_session"
                raise PolicyError(origin, table, key, str(exc)) from None
        for path, rule in spec.get("params", {}).items():
            param = _param(origin, f"{table}.params.{_quoted(path)}", tool, path, rule)
            params.append(param)
            where[param.rule_name] = (origin, f"{table}.params.{_quoted(path)}")
    try:
        return Policy(
            params=tuple(params),
            trusted=frozenset(trusted),
            untrusted=frozenset(untrusted),
            intents=intents,
            ceilings=ceilings,
            fail_closed=fail_closed,
            origin=origin,
            where=where,
        )
    except PolicyError:
        raise
    except ConfigurationError as exc:
        raise PolicyError(origin, "tools", None, str(exc)) from None


def _param(origin: str, table: str, tool: str, path: str, rule: Any) -> Param:
    rule = _table(origin, table, rule)
    _known(origin, table, rule, set(_PARAM_KEYS))
    if not rule:
        raise PolicyError(origin, table, None, "declares no check")
    options = {
        key: _typed(origin, table, key, value, _PARAM_KEYS[key]) for key, value in rule.items()
    }
    try:
        return Param(tool, path, **options)
    except ConfigurationError as exc:
        message = str(exc).split(": ", 1)[-1]
        first = message.split(" ")[0].rstrip(":")
        raise PolicyError(origin, table, first if first in _PARAM_KEYS else None, message) from None


def _quoted(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else f'"{key}"'


def _table(origin: str, table: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise PolicyError(origin, table, None, "must be a table")
    return dict(value)


def _known(origin: str, table: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise PolicyError(
            origin,
            table or "(top level)",
            unknown[0],
            f"unknown key; expected one of {sorted(allowed)}",
        )


def _typed(origin: str, table: str, key: str, value: Any, expected: str) -> Any:
    ok = {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "list": isinstance(value, list),
        "table": isinstance(value, Mapping),
        _STRINGS: isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[expected]
    if not ok:
        raise PolicyError(origin, table, key, f"must be {_article(expected)}, not {value!r}")
    return value


def _article(expected: str) -> str:
    return (
        expected
        if expected.startswith("a ")
        else f"a {expected}"
        if expected[0] not in "aeiou"
        else f"an {expected}"
    )
