"""``guardrails policy init``: a draft policy from the tools, every guess marked for review.

The draft turns on the safe default (``[defaults] grounded_in``) and adds a
table for a parameter only where a guess says more: a value kind read from
the schema (``format``, ``pattern``) or the name, a free-text parameter of a
tool with an effect (``free = true``), an amount. Every guess is a line
ending in ``# review: ...`` naming what it was read from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .defaults import default_rule_name
from .schema_paths import resolve

__all__ = ["DEFAULT_SOURCES", "REVIEW", "draft", "guess_kind"]

DEFAULT_SOURCES = ("user", "context", "trusted")
REVIEW = "# review:"
_SOURCES = json.dumps(list(DEFAULT_SOURCES))
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
# What a TOML basic string (and a comment) cannot hold raw: quotes, backslashes,
# control characters, and (in a comment) a lone surrogate.
_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f\ud800-\udfff]')
_FORMATS = {
    "email": "email",
    "idn-email": "email",
    "uri": "url",
    "iri": "url",
    "url": "url",
    "hostname": "host",
    "idn-hostname": "host",
}
_NAMES = {
    "email": "email",
    "url": "url",
    "uri": "url",
    "link": "url",
    "href": "url",
    "website": "url",
    "homepage": "url",
    "host": "host",
    "hostname": "host",
    "domain": "host",
    "iban": "iban",
    "phone": "phone",
    "mobile": "phone",
    "tel": "phone",
    "telephone": "phone",
    "fax": "phone",
}
# Addressee names read as emails only on a tool whose own name says mail.
_ADDRESSEES = {"to", "cc", "bcc", "recipient", "recipients"}
_FREE = {"body", "text", "content", "message", "description", "notes", "note", "comment"}
_FREE |= {"summary", "subject", "title", "caption", "reply"}
_AMOUNTS = {"amount", "price", "total", "sum", "cost", "quantity", "value"}


@dataclass(frozen=True)
class _Table:
    """One parameter table of the draft: its path segments and its lines."""

    path: tuple[str, ...]
    lines: tuple[str, ...]


def draft(tools: Mapping[str, Any], source: str) -> str:
    """The draft policy for ``tools`` (name -> Tool), read from ``source``, as TOML text."""
    out = [
        f"# A draft policy for {len(tools)} tools from {_quote(source)}, "
        "written by `guardrails policy init`.",
        f'# Every line marked "{REVIEW[2:]}" is a guess read from a name or a schema:',
        "# check it, then delete the mark.",
        "",
        "[defaults]",
        "# Every string in the arguments of a tool with an effect must have been seen",
        "# in the user's input, the turn context or a trusted tool's result.",
        f"grounded_in = {_SOURCES}",
        "",
        "[sources]",
        f"{REVIEW} list the tools whose results are the user's own data (an address",
        "# book, saved payees); every other tool's results are untrusted.",
        "trusted = []",
    ]
    for name in sorted(tools):
        out.extend(_tool_lines(name, tools[name]))
    return "\n".join(out) + "\n"


def _tool_lines(name: str, tool: Any) -> list[str]:
    effect = bool(getattr(tool, "effect", False))
    what = (
        "has an effect: every string in its arguments must be grounded"
        if effect
        else "reads only: the default does not apply"
    )
    lines = ["", f"# {_quote(name)} {what}"]
    schema = getattr(tool, "schema", None)
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return lines
    words = set(_words(name))
    for param in sorted(properties, key=str):
        if not isinstance(param, str) or not _nameable(param):
            lines.append(f"{REVIEW} parameter {_quote(str(param))} cannot be named in a path")
            continue
        for table in _tables(param, properties[param], effect=effect, words=words):
            path = ".".join(table.path)
            try:
                resolve(tool, path)
            except LookupError:
                lines.append(f"{REVIEW} parameter {_quote(param)} cannot be named in a path")
                continue
            lines.append("")
            lines.append(f"[tools.{_key(name)}.params.{_key(path)}]")
            lines.extend(_renamed(name, path, effect))
            lines.extend(table.lines)
    return lines


def _renamed(tool: str, path: str, effect: bool) -> list[str]:
    """A ``name`` for a rule whose own name would be the safe default's guard (a
    parameter called ``defaults`` on a tool with an effect)."""
    if not effect or f"policy:{tool}.{path}" != default_rule_name(tool):
        return []
    renamed = _quote(f"policy:{tool}.params.{path}")
    return [f"name = {renamed}  {REVIEW} the safe default's guard has this rule's own name"]


def _tables(param: str, node: Any, *, effect: bool, words: set[str]) -> list[_Table]:
    """The tables a parameter gets: a kind (itself or its items), free text, an amount."""
    if not isinstance(node, Mapping):
        return []
    types = _types(node)
    items = node.get("items")
    if "array" in types and isinstance(items, Mapping) and "string" in _types(items):
        kind = guess_kind(param, items, words)
        return [] if kind is None else [_kind_table((param, "*"), *kind)]
    if "string" in types:
        kind = guess_kind(param, node, words)
        if kind is not None:
            return [_kind_table((param,), *kind)]
        if effect and _last_known(param, _FREE):
            why = f"free text the model writes ({_quote(param)}); nothing in it is checked"
            return [_Table((param,), (f"free = true  {REVIEW} {why}",))]
    if effect and types & {"number", "integer"} and _last_known(param, _AMOUNTS):
        why = "an amount the model picks must be one the user gave; add min and max"
        return [_Table((param,), (f'grounded_in = ["user", "context"]  {REVIEW} {why}',))]
    return []


def _kind_table(path: tuple[str, ...], kind: str, why: str) -> _Table:
    return _Table(
        path,
        (
            f'kind = "{kind}"  {REVIEW} {why}',
            f"grounded_in = {_SOURCES}  {REVIEW} where such a value may come from",
        ),
    )


def guess_kind(name: str, node: Mapping[str, Any], tool_words: set[str]) -> tuple[str, str] | None:
    """``(kind, why)`` for a string parameter, from its ``format``, ``pattern`` or name."""
    fmt = node.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt], f"from the schema's format {_quote(fmt)}"
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        kind = _pattern_kind(pattern)
        if kind is not None:
            return kind, f"from the schema's pattern {_quote(pattern[:60])}"
    for word in reversed(_words(name)):
        if word in _NAMES:
            return _NAMES[word], f"from the name {_quote(name)}"
        if word in _ADDRESSEES and tool_words & {"mail", "email"}:
            return "email", f"from the name {_quote(name)} on a mail tool"
        if word in _FREE or word in _AMOUNTS:
            return None
    return None


def _pattern_kind(pattern: str) -> str | None:
    if "@" in pattern:
        return "email"
    if "://" in pattern or "https?" in pattern:
        return "url"
    if pattern.lstrip("^").startswith(("\\+", "[+]")):
        return "phone"
    if "[A-Z]{2}" in pattern and ("[0-9]{2}" in pattern or "\\d{2}" in pattern):
        return "iban"
    return None


def _last_known(name: str, known: set[str]) -> bool:
    """Whether the last of the name's words that any table knows is in ``known``."""
    every = set(_NAMES) | _ADDRESSEES | _FREE | _AMOUNTS
    for word in reversed(_words(name)):
        if word in every:
            return word in known
    return False


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^a-zA-Z0-9]+", spaced.lower()) if w]


def _types(node: Mapping[str, Any]) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


def _nameable(name: str) -> bool:
    """Whether a policy path can name the parameter (no '.', not '*', a TOML string)."""
    return bool(name) and "." not in name and name != "*" and not _SURROGATE.search(name)


def _key(name: str) -> str:
    return name if _BARE.fullmatch(name) else _quote(name)


def _quote(text: str) -> str:
    """``text`` as a one-line TOML basic string (valid in a comment too)."""
    return '"' + _ESCAPE.sub(_escaped, text) + '"'


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return "\\" + char if char in '"\\' else f"\\u{ord(char):04x}"
