"""The policy file read into the arguments of ``Policy``, every key checked (see ``loader``)."""

from __future__ import annotations

import os
import reprlib
import tomllib
from collections.abc import Mapping
from typing import Any

from .._conditions import ApprovalRule, parse_approval
from ..errors import ConfigurationError
from ._ceiling import Ceiling
from ._policy_error import PolicyError
from ._toml_shape import first_excess
from ._where import free_key
from .custom_kinds import CustomKind
from .groups import check_group, expand
from .rules import MAX_PATH_PARTS, Param
from .templates import placeholder_names

__all__ = [
    "MAX_BYTES",
    "MAX_ITEMS",
    "MAX_KEY_PARTS",
    "MAX_NESTING",
    "MAX_RULES",
    "MAX_TABLES",
    "MAX_TOOLS",
    "read_file",
    "read_text",
]

MAX_BYTES = 262_144  # the file, in bytes of UTF-8
MAX_NESTING = 16  # inline arrays and tables inside one another
MAX_KEY_PARTS = 8  # parts of one dotted key or table header
MAX_TABLES = 4_096  # table headers ([...] and [[...]])
MAX_TOOLS = 1_000  # tables under [tools]
MAX_RULES = 1_000  # parameter rules in one file
MAX_ITEMS = 10_000  # items of one list

_repr = reprlib.Repr()  # an error shows the start of a value, never all of it
_repr.maxstring, _repr.maxother, _repr.maxlist, _repr.maxdict, _repr.maxlevel = 60, 60, 4, 4, 2
_shown = _repr.repr

_STRINGS = "a list of strings"
_TEXTS = "a string or a list of strings"
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
    "timeout": "number",
    "embedded": _STRINGS,
    "words": _STRINGS,
    "template": _TEXTS,
}
_TOOL_KEYS = {
    "intent": _STRINGS,
    "max_per_turn": "integer",
    "max_per_session": "integer",
    "params": "table",
    "approval": "string",
}
_KIND_KEYS = {"pattern": "string", "separators": "string", "case": "string", "width": "boolean"}
_TOP = {"defaults", "kinds", "policy", "sources", "tools"}


def read_file(path: str | os.PathLike[str]) -> tuple[str, str]:
    """A policy file's name and text, within ``MAX_BYTES`` (not yet parsed)."""
    origin = os.fspath(path)
    try:
        with open(origin, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PolicyError(origin, "file", None, f"cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_BYTES:
        raise PolicyError(origin, "file", None, f"is larger than {MAX_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(origin, "file", None, "is not UTF-8 text") from None
    return origin, text


def read_text(text: str, origin: str) -> dict[str, Any]:
    """The arguments of ``Policy`` read from TOML text; ``origin`` names it in errors."""
    _within_bounds(text, origin)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(origin, "file", None, f"is not valid TOML ({exc})") from None
    _known(origin, "", data, _TOP)
    fail_closed, groups, kinds, trusted, untrusted, default = _head(origin, data)
    free: set[tuple[str, str]] = set()
    params: list[Param] = []
    where: dict[str, tuple[str, str]] = {}
    intents: dict[str, tuple[str, ...]] = {}
    ceilings: dict[str, Ceiling] = {}
    approvals: dict[str, tuple[ApprovalRule, ...]] = {}
    tools = _table(origin, "tools", data.get("tools", {}))
    if len(tools) > MAX_TOOLS:
        raise PolicyError(origin, "tools", None, f"has {len(tools):,} tools; at most {MAX_TOOLS:,}")
    for tool, spec in tools.items():
        table = f"tools.{tool}"
        spec = _table(origin, table, spec)
        _tool_settings(origin, table, tool, spec, intents, ceilings, approvals)
        _tool_params(origin, table, tool, spec, groups, kinds, params, free, where)
    return dict(
        params=tuple(params),
        trusted=frozenset(trusted),
        untrusted=frozenset(untrusted),
        intents=intents,
        ceilings=ceilings,
        approvals=approvals,
        fail_closed=fail_closed,
        origin=origin,
        where=where,
        default_grounded_in=None if default is None else frozenset(default),
        free=frozenset(free),
        groups=groups,
        kinds=kinds,
    )


def _head(origin: str, data: dict[str, Any]) -> tuple[bool, Any, Any, Any, Any, Any]:
    """The ``[policy]``, ``[sources]``, ``[kinds]`` and ``[defaults]`` tables:
    ``fail_closed``, the source groups, the declared kinds, the trusted and untrusted
    sources, the default ``grounded_in``."""
    head = _table(origin, "policy", data.get("policy", {}))
    _known(origin, "policy", head, {"fail_closed"})
    fail_closed = _typed(origin, "policy", "fail_closed", head.get("fail_closed", False), "boolean")
    sources = _table(origin, "sources", data.get("sources", {}))
    _known(origin, "sources", sources, {"groups", "trusted", "untrusted"})
    groups = _groups(origin, sources.get("groups", {}))
    kinds = _kinds(origin, data.get("kinds", {}))
    trusted = _typed(origin, "sources", "trusted", sources.get("trusted", []), _STRINGS)
    untrusted = _typed(origin, "sources", "untrusted", sources.get("untrusted", []), _STRINGS)
    defaults = _table(origin, "defaults", data.get("defaults", {}))
    _known(origin, "defaults", defaults, {"grounded_in"})
    default = defaults.get("grounded_in")
    if default is not None:
        _typed(origin, "defaults", "grounded_in", default, _STRINGS)
        default = expand(origin, "defaults", "grounded_in", default, groups)
    return fail_closed, groups, kinds, trusted, untrusted, default


def _tool_settings(
    origin: str,
    table: str,
    tool: str,
    spec: dict[str, Any],
    intents: dict[str, tuple[str, ...]],
    ceilings: dict[str, Ceiling],
    approvals: dict[str, tuple[ApprovalRule, ...]],
) -> None:
    """A ``[tools.NAME]`` table's own keys: intent, ceilings, approval (into the dicts)."""
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
    if "approval" in spec:
        approvals[tool] = _approval(origin, table, tool, spec["approval"])


def _tool_params(
    origin: str,
    table: str,
    tool: str,
    spec: dict[str, Any],
    groups: Any,
    kinds: Mapping[str, CustomKind],
    params: list[Param],
    free: set[tuple[str, str]],
    where: dict[str, tuple[str, str]],
) -> None:
    """A ``[tools.NAME.params]`` table: each path's rule, or the path declared free."""
    if len(params) + len(spec.get("params", {})) > MAX_RULES:
        raise PolicyError(
            origin,
            f"{table}.params",
            None,
            f"more than {MAX_RULES:,} parameter rules in one file",
        )
    for path, rule in spec.get("params", {}).items():
        if path.count(".") >= MAX_PATH_PARTS:
            raise PolicyError(
                origin,
                f"{table}.params",
                None,
                f"the path {_shown(path)} has more than {MAX_PATH_PARTS} parts",
            )
        at = f"{table}.params.{_quoted(path)}"
        if _is_free(origin, at, rule):
            free.add((tool, path))
            where[free_key(tool, path)] = (origin, at)
            continue
        param = _param(origin, at, tool, path, rule, groups, kinds)
        params.append(param)
        where[param.rule_name] = (origin, at)


def _approval(origin: str, table: str, tool: str, spec: str) -> tuple[ApprovalRule, ...]:
    """``approval`` parsed now: a misspelled setting is refused at load, never approved."""
    try:
        rule = parse_approval(spec, f"tool {tool!r}")
    except ConfigurationError as exc:
        raise PolicyError(origin, table, "approval", str(exc)) from None
    return () if rule is None else (rule,)


def _groups(origin: str, given: Any) -> dict[str, tuple[str, ...]]:
    table = _table(origin, "sources.groups", given)
    return {
        name: check_group(origin, name, _typed(origin, "sources.groups", name, members, _STRINGS))
        for name, members in table.items()
    }


def _kinds(origin: str, given: Any) -> dict[str, CustomKind]:
    """``[kinds.NAME]`` tables: each a ``CustomKind``, its mistakes named by key."""
    out = {}
    for name, spec in _table(origin, "kinds", given).items():
        table = f"kinds.{_quoted(name)}"
        spec = _table(origin, table, spec)
        _known(origin, table, spec, set(_KIND_KEYS))
        if "pattern" not in spec:
            raise PolicyError(origin, table, "pattern", "a kind needs a pattern")
        options = {key: _typed(origin, table, key, v, _KIND_KEYS[key]) for key, v in spec.items()}
        try:
            out[name] = CustomKind(name, **options)
        except ConfigurationError as exc:
            first = str(exc).split(" ")[0]
            raise PolicyError(
                origin, table, first if first in _KIND_KEYS else None, str(exc)
            ) from None
    return out


def _resolve_kinds(options: dict[str, Any], kinds: Mapping[str, CustomKind]) -> None:
    """A rule's ``kind`` and ``embedded`` names of the file's own kinds, made the kinds."""
    if options.get("kind") in kinds:
        options["kind"] = kinds[options["kind"]]
    if "embedded" in options:
        options["embedded"] = [kinds.get(k, k) for k in options["embedded"]]


def _placeholders(
    origin: str,
    table: str,
    template: str | list[str],
    groups: Mapping[str, tuple[str, ...]],
    kinds: Mapping[str, CustomKind],
) -> dict[str, Any]:
    """What each placeholder of a template names: a kind of the file, or a group."""
    out: dict[str, Any] = {}
    for name in placeholder_names([template] if isinstance(template, str) else template):
        if name in kinds and name in groups:
            raise PolicyError(
                origin, table, "template", f"{{{name}}} names both a kind and a group; rename one"
            )
        if name in kinds:
            out[name] = kinds[name]
        elif name in groups:
            out[name] = groups[name]
    return out


def _param(
    origin: str,
    table: str,
    tool: str,
    path: str,
    rule: Any,
    groups: Mapping[str, tuple[str, ...]],
    kinds: Mapping[str, CustomKind],
) -> Param:
    rule = _table(origin, table, rule)
    _known(origin, table, rule, set(_PARAM_KEYS))
    if not rule:
        raise PolicyError(origin, table, None, "declares no check")
    options = {
        key: _typed(origin, table, key, value, _PARAM_KEYS[key]) for key, value in rule.items()
    }
    if "grounded_in" in options:
        options["grounded_in"] = expand(
            origin, table, "grounded_in", options["grounded_in"], groups
        )
    _resolve_kinds(options, kinds)
    if "template" in options:
        options["placeholders"] = _placeholders(origin, table, options["template"], groups, kinds)
    try:
        return Param(tool, path, **options)
    except ConfigurationError as exc:
        message = str(exc).split(": ", 1)[-1]
        first = message.split(" ")[0].rstrip(":")
        raise PolicyError(origin, table, first if first in _PARAM_KEYS else None, message) from None


def _is_free(origin: str, table: str, rule: Any) -> bool:
    """Whether a parameter's table declares it free of the default (``free = true``, alone)."""
    if not isinstance(rule, Mapping) or "free" not in rule:
        return False
    if rule["free"] is not True:
        raise PolicyError(origin, table, "free", f"must be true, not {_shown(rule['free'])}")
    if len(rule) > 1:
        other = sorted(k for k in rule if k != "free")[0]
        raise PolicyError(origin, table, other, "a free parameter has no other check")
    return True


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
        _TEXTS: isinstance(value, str)
        or (isinstance(value, list) and all(isinstance(v, str) for v in value)),
    }[expected]
    if not ok:
        raise PolicyError(origin, table, key, f"must be {_article(expected)}, not {_shown(value)}")
    if isinstance(value, list) and len(value) > MAX_ITEMS:
        raise PolicyError(
            origin, table, key, f"has {len(value):,} items; at most {MAX_ITEMS:,} are allowed"
        )
    return value


def _within_bounds(text: str, origin: str) -> None:
    """Refuse, before parsing, a text over the size bound, or one nested too deep
    or with a key of too many parts (``tomllib`` would recurse or take minutes)."""
    if text.__class__ is not str:
        raise PolicyError(origin, "file", None, "must be text (str)")
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise PolicyError(origin, "file", None, f"is larger than {MAX_BYTES:,} bytes")
    excess = first_excess(text, MAX_NESTING, MAX_KEY_PARTS, MAX_TABLES)
    if excess is not None:
        what, line = excess
        problem = {
            "nesting": f"nests inline arrays or tables more than {MAX_NESTING} deep",
            "key": f"has a dotted key or table header of more than {MAX_KEY_PARTS} parts",
            "tables": f"has more than {MAX_TABLES:,} table headers",
        }[what]
        raise PolicyError(origin, "file", None, f"line {line} {problem}")


def _article(expected: str) -> str:
    return (
        expected
        if expected.startswith("a ")
        else f"a {expected}"
        if expected[0] not in "aeiou"
        else f"an {expected}"
    )
