"""When a call needs a person's approval: ``always``, ``never``, or a condition on its arguments.

A condition is a small, closed language, parsed once (at registration or
when the policy file is loaded), never evaluated as Python::

    condition  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | "(" or ")" | comparison
    comparison := operand ("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") operand
    operand    := path | literal
    path       := name ("." name | "[" digits "]")*
    literal    := number | 'text' | "text" | true | false | null | "[" literal ("," literal)* "]"

Every comparison names at least one argument path; a bare path, a bare
literal or a comparison of two literals is refused (a typo such as
``alwyas`` is an error, never a silent rule). The first name of each path
must be a parameter of the tool (``check_names``).

Evaluation is three-valued and fails closed: a path that the arguments do
not have, values of types that do not compare (text with a number, a bool
with a number, anything that is not a JSON value) make the comparison
*unknown*, and a condition that ends unknown needs approval.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigurationError

__all__ = ["ALWAYS", "NEVER", "ApprovalRule", "MAX_CONDITION_CHARS", "parse_approval"]

MAX_CONDITION_CHARS = 1_000
_MAX_DEPTH = 32

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    | (?P<str>'[^'\\\n]*'|"[^"\\\n]*")
    | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,|\.)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})
_ORDER = frozenset({"<", "<=", ">", ">="})
_JSON_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True, slots=True)
class _Path:
    parts: tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _Literal:
    value: Any


@dataclass(frozen=True, slots=True)
class _Compare:
    op: str
    left: _Path | _Literal
    right: _Path | _Literal


@dataclass(frozen=True, slots=True)
class _Not:
    inner: _Node


@dataclass(frozen=True, slots=True)
class _Both:
    op: str  # "and" | "or"
    parts: tuple[_Node, ...]


_Node = _Compare | _Not | _Both


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """A parsed approval setting: ``always``, ``never``, or a condition (``source`` as written)."""

    source: str
    node: _Node | None = None

    @property
    def always(self) -> bool:
        return self.source == "always"

    @property
    def never(self) -> bool:
        return self.source == "never"

    def needs_approval(self, arguments: Mapping[str, Any]) -> bool:
        """Whether a call with ``arguments`` needs approval (an unknown answer does)."""
        if self.node is None:
            return self.source == "always"
        return _evaluate(self.node, arguments) is not False

    def names(self) -> frozenset[str]:
        """The parameters the condition reads (the first name of each path)."""
        return frozenset(_names(self.node)) if self.node is not None else frozenset()

    def check_names(self, parameters: Iterable[str], owner: str) -> None:
        """Refuse a condition that reads a parameter the tool does not have."""
        unknown = self.names() - set(parameters)
        if unknown:
            raise ConfigurationError(
                f"{owner}: approval condition {self.source!r} reads "
                f"{sorted(unknown)[0]!r}, which is not a parameter of the tool"
            )


ALWAYS = ApprovalRule("always")
NEVER = ApprovalRule("never")


def parse_approval(spec: object, owner: str) -> ApprovalRule | None:
    """``spec`` (None, ``"always"``, ``"never"``, a condition or a rule) parsed; errors name ``owner``."""
    if spec is None:
        return None
    if type(spec) is ApprovalRule:
        return spec
    if type(spec) is not str:
        raise ConfigurationError(
            f"{owner}: approval must be 'always', 'never' or a condition, not {type(spec).__name__}"
        )
    if spec == "always":
        return ALWAYS
    if spec == "never":
        return NEVER
    if len(spec) > MAX_CONDITION_CHARS:
        raise ConfigurationError(
            f"{owner}: approval condition is longer than {MAX_CONDITION_CHARS} characters"
        )
    try:
        return ApprovalRule(spec, _Parser(_tokens(spec)).condition())
    except _Refused as exc:
        raise ConfigurationError(
            f"{owner}: approval {spec!r} is not 'always', 'never' or a condition ({exc})"
        ) from None


class _Refused(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    at = 0
    end = len(text.rstrip())
    while at < end:
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise _Refused(f"unexpected character at {at + 1}")
        kind = match.lastgroup
        assert kind is not None
        found.append((kind, match.group(kind)))
        at = match.end()
    return found


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise _Refused("it ends too early")
        token = self.tokens[self.at]
        if expected is not None and token[1] != expected:
            raise _Refused(f"expected {expected!r}, found {token[1]!r}")
        self.at += 1
        return token

    def condition(self) -> _Node:
        node = self.either()
        if self.at != len(self.tokens):
            raise _Refused(f"unexpected {self.tokens[self.at][1]!r}")
        return node

    def either(self) -> _Node:
        parts = [self.both()]
        while self.peek() == "or":
            self.take()
            parts.append(self.both())
        return parts[0] if len(parts) == 1 else _Both("or", tuple(parts))

    def both(self) -> _Node:
        parts = [self.negated()]
        while self.peek() == "and":
            self.take()
            parts.append(self.negated())
        return parts[0] if len(parts) == 1 else _Both("and", tuple(parts))

    def negated(self) -> _Node:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Refused(f"nested deeper than {_MAX_DEPTH}")
        try:
            if self.peek() == "not":
                self.take()
                return _Not(self.negated())
            if self.peek() == "(":
                self.take()
                inner = self.either()
                self.take(")")
                return inner
            return self.comparison()
        finally:
            self.depth -= 1

    def comparison(self) -> _Compare:
        left = self.operand()
        op = self.peek()
        if op == "not":
            self.take()
            self.take("in")
            op = "not in"
        elif op in ("==", "!=", "<", "<=", ">", ">=", "in"):
            self.take()
        else:
            raise _Refused("a comparison needs an operator (==, !=, <, <=, >, >=, in, not in)")
        right = self.operand()
        if type(left) is _Literal and type(right) is _Literal:
            raise _Refused("a comparison must read an argument")
        return _Compare(op, left, right)

    def operand(self) -> _Path | _Literal:
        kind, text = self.take()
        if kind == "num":
            number = float(text) if any(c in text for c in ".eE") else int(text)
            if type(number) is float and not math.isfinite(number):
                raise _Refused(f"number {text} is out of range")
            return _Literal(number)
        if kind == "str":
            return _Literal(text[1:-1])
        if text == "[":
            return _Literal(self.listed())
        if kind == "name" and text in ("true", "false", "null"):
            return _Literal({"true": True, "false": False, "null": None}[text])
        if kind == "name" and text not in _KEYWORDS:
            return self.path(text)
        raise _Refused(f"unexpected {text!r}")

    def listed(self) -> tuple[Any, ...]:
        items: list[Any] = []
        while True:
            item = self.operand()
            if type(item) is not _Literal or type(item.value) is tuple:
                raise _Refused("a list holds literals only")
            items.append(item.value)
            if self.take()[1] == "]":
                return tuple(items)
            self.at -= 1
            self.take(",")

    def path(self, first: str) -> _Path:
        parts: list[str | int] = [first]
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                kind, name = self.take()
                if kind != "name":
                    raise _Refused(f"expected a name after '.', found {name!r}")
                parts.append(name)
            else:
                kind, index = self.take()
                if kind != "num" or not index.isdigit():
                    raise _Refused(f"expected an index, found {index!r}")
                parts.append(int(index))
                self.take("]")
        return _Path(tuple(parts))


# -- evaluation: True, False, or None (unknown) ------------------------------------


_MISSING = object()


def _evaluate(node: _Node, arguments: Mapping[str, Any]) -> bool | None:
    if type(node) is _Compare:
        return _compare(node, arguments)
    if type(node) is _Not:
        inner = _evaluate(node.inner, arguments)
        return None if inner is None else not inner
    assert type(node) is _Both
    found: list[bool | None] = [_evaluate(p, arguments) for p in node.parts]
    decisive = node.op == "or"  # True decides an "or", False an "and"
    if decisive in found:
        return decisive
    return None if None in found else not decisive


def _value(operand: _Path | _Literal, arguments: Mapping[str, Any]) -> Any:
    if type(operand) is _Literal:
        return operand.value
    assert type(operand) is _Path
    value: Any = arguments
    for part in operand.parts:
        # The containers' own C methods: nothing a subclass defines runs.
        if type(part) is str and issubclass(type(value), dict):
            value = dict.get(value, part, _MISSING)
        elif type(part) is str and value is arguments:
            value = arguments.get(part, _MISSING)
        elif type(part) is int and issubclass(type(value), list) and part < list.__len__(value):
            value = list.__getitem__(value, part)
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _kind(value: Any) -> str | None:
    """The comparable kind of a JSON value; None for anything else (never compared)."""
    kind = type(value)
    if kind is bool:
        return "bool"
    if kind is int or (kind is float and math.isfinite(value)):
        return "number"
    if kind is str:
        return "text"
    if value is None:
        return "null"
    if kind is tuple or issubclass(kind, list):
        return "list"
    return None


def _compare(node: _Compare, arguments: Mapping[str, Any]) -> bool | None:
    left, right = _value(node.left, arguments), _value(node.right, arguments)
    if left is _MISSING or right is _MISSING:
        return None
    op = node.op
    if op in ("in", "not in"):
        inside = _contains(right, left)
        return None if inside is None else inside == (op == "in")
    kinds = _kind(left), _kind(right)
    if None in kinds or "list" in kinds:
        return None
    if op in _ORDER:
        if kinds[0] != kinds[1] or kinds[0] not in ("number", "text"):
            return None
        return bool(
            {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
        )
    same = kinds[0] == kinds[1] and left == right
    return same if op == "==" else not same


def _contains(container: Any, item: Any) -> bool | None:
    if _kind(item) in (None, "list"):
        return None
    if type(container) is str:
        return item in container if type(item) is str else None
    if _kind(container) != "list":
        return None
    kind = _kind(item)
    for member in container:
        if _kind(member) is None:
            return None
        if _kind(member) == kind and member == item:
            return True
    return False


def _names(node: _Node) -> Iterable[str]:
    if type(node) is _Compare:
        for side in (node.left, node.right):
            if type(side) is _Path:
                yield str(side.parts[0])
    elif type(node) is _Not:
        yield from _names(node.inner)
    else:
        assert type(node) is _Both
        for part in node.parts:
            yield from _names(part)
