"""The safe default: every string in the arguments of a tool with an effect is grounded.

With ``[defaults] grounded_in = [...]``, each tool declared with an effect
(``effect=True``) gets one guard, ``policy:TOOL.defaults``: every string in
its arguments, at any depth (object fields, list items), must have been seen
in one of the default's sources in this session, unless its path is declared
free (``free = true``) or has a rule of its own (which then decides it alone).
A string is grounded when its normal form as text, or as any value kind it
parses as whole (an address, a link, an IBAN...), was seen there.

What the guard records holds no value: the rule name, the top-level parameter
when the tool's schema declares it, and the names of the failed checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from time import perf_counter_ns
from typing import Any

from ..context import GuardResult, Invocation
from ..guard import Guard
from ..middleware import _paths
from ..middleware._frozen import FrozenDict, FrozenList
from ..verdicts import EscapeReason, Outcome, Verdict
from ._grounding import KINDS as _KINDS
from ._grounding import Kinds as _Kinds
from ._grounding import grounded_anywhere
from .checks import DEFAULT_TIMEOUT, Check, Seen

__all__ = ["DefaultCheck", "default_guards", "default_rule_name", "grounded_anywhere"]

_PASS = Verdict.PASS
_Path = tuple[str | int, ...]


def default_rule_name(tool: str) -> str:
    return f"policy:{tool}.defaults"


def default_guards(policy: Any, tools: Mapping[str, Any], ledgers: Any) -> list[Guard]:
    """One guard per tool with an effect, when the policy has a default (else none)."""
    sources = policy.default_grounded_in
    if sources is None:
        return []
    own: dict[str, list[str]] = {}
    for rule in policy.params:
        own.setdefault(rule.tool, []).append(rule.path)
    for tool, path in policy.free:
        own.setdefault(tool, []).append(path)
    guards = []
    for name in sorted(tools):
        spec = tools[name]
        if getattr(spec, "effect", False):
            properties = (getattr(spec, "schema", None) or {}).get("properties") or {}
            check = DefaultCheck(name, own.get(name, ()), sources, ledgers, frozenset(properties))
            guards.append(
                Guard(
                    check,
                    name=check.__name__,
                    outcome=Outcome.INVALID_ARGS,
                    tools=[name],
                    fail_closed=policy.fail_closed,
                )
            )
    return guards


class DefaultCheck:
    """The guard function of the safe default for one tool."""

    __slots__ = ("__name__", "declared", "exempt", "kinds", "ledgers", "need", "reads_store")

    def __init__(
        self,
        tool: str,
        exempt: Iterable[str],
        sources: frozenset[str],
        ledgers: Any,
        declared: frozenset[str],
    ) -> None:
        self.__name__ = default_rule_name(tool)
        self.exempt = tuple(_paths.parse(p) for p in sorted(set(exempt)))
        self.need = ledgers.sources.mask_of(sources)
        self.ledgers = ledgers
        self.declared = declared  # top-level parameters the schema names: safe to record
        self.reads_store = ledgers.store
        custom = getattr(ledgers, "kinds", ())
        self.kinds = _KINDS + tuple((f"{k.name}\x00", k.normalise) for k in custom)

    def __call__(self, inv: Invocation) -> Verdict | GuardResult:
        start = perf_counter_ns()
        arguments = inv.arguments
        if not arguments:
            return _PASS
        seen: Seen = self.ledgers.view(inv.turn, inv.context, inv.call_id)
        failed: set[Check] = set()
        first: str | None = None
        for head, value in arguments.items():
            if head.__class__ is not str:
                failed.add(Check.TYPE)
                continue
            alive = tuple(p for p in self.exempt if p[0] == head)
            for check in _strings(value, (head,), alive, seen, self.need, self.kinds):
                failed.add(check)
                if first is None:
                    first = head
        if perf_counter_ns() - start > DEFAULT_TIMEOUT * 1e9:
            failed.add(Check.TIMEOUT)
        return self._rejected(failed, first) if failed else _PASS

    def _rejected(self, failed: set[Check], head: str | None) -> GuardResult:
        param = head if head in self.declared else None
        checks = sorted(c.value for c in failed)
        evidence: dict[str, Any] = {"rule": self.__name__, "checks": checks}
        if param is not None:
            evidence["param"] = param
        if Check.TIMEOUT in failed:
            escape: EscapeReason | None = EscapeReason.TIMEOUT
            reason = Check.TIMEOUT.value
        else:
            escape = EscapeReason.NOT_CONFIGURED if failed == {Check.UNKNOWN} else None
            reason = checks[0]
        params = (param,) if param is not None else ()
        return GuardResult.rejected(reason, evidence=evidence, params=params, escape=escape)


def _strings(
    value: Any,
    where: _Path,
    alive: tuple[_Path, ...],
    seen: Seen,
    need: int,
    kinds: _Kinds = _KINDS,
) -> Iterable[Check]:
    """The failed checks of every string under ``value`` not exempt by a path in ``alive``."""
    stack: list[tuple[Any, _Path, tuple[_Path, ...]]] = [(value, where, alive)]
    while stack:
        node, at, paths = stack.pop()
        depth = len(at)
        if any(len(p) == depth for p in paths):
            continue  # this path (or one above it) is free or has its own rule
        cls = node.__class__
        if cls is str:
            if not grounded_anywhere(node, seen, need, kinds):
                yield Check.UNKNOWN if seen.partial & need else Check.GROUNDED
        elif cls in _OBJECTS:
            for name, item in dict.items(node):
                if name.__class__ is not str:
                    yield Check.TYPE
                    continue
                stack.append((item, (*at, name), _step(paths, depth, name)))
        elif cls in _ARRAYS:
            for i, item in enumerate(list.__iter__(node)):
                stack.append((item, (*at, i), _step(paths, depth, i)))
        elif cls not in _SCALARS:
            yield Check.TYPE  # not a JSON value (a str subclass included): refused as is


def _step(paths: tuple[_Path, ...], depth: int, segment: str | int) -> tuple[_Path, ...]:
    if not paths:
        return paths
    if segment.__class__ is int:
        return tuple(p for p in paths if p[depth] == "*" or p[depth] == segment)
    return tuple(p for p in paths if p[depth] == segment)


_SCALARS = frozenset({int, float, bool, type(None)})
# The admitted arguments' read-only views, or plain JSON containers (nothing else).
_OBJECTS: frozenset[type] = frozenset((dict, FrozenDict))
_ARRAYS: frozenset[type] = frozenset((list, FrozenList))
