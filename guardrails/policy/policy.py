"""A policy: parameter rules, trusted sources, intent gates and per-tool ceilings.

A ``Policy`` is a frozen value. ``a | b`` merges two (rules of both; a tool
trusted by one and declared untrusted by the other is an error; intent terms
are united; of two ceilings the lower wins). ``check(tools)`` compares it
with the registered tools and raises one ``PolicyError`` naming the file,
the table and the key of the first mistake; it runs when the policy is
loaded into an engine, never at a call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import ConfigurationError
from ..rules.triggers import TermSet
from .provenance import CONTEXT, USER
from .rules import Param
from .schema_paths import resolve

__all__ = ["Ceiling", "Policy", "PolicyError"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class PolicyError(ConfigurationError):
    """A mistake in a policy: ``origin`` (file), ``table`` and ``key`` say where."""

    def __init__(self, origin: str, table: str, key: str | None, problem: str) -> None:
        self.origin, self.table, self.key, self.problem = origin, table, key, problem
        where = f"[{table}]" + (f" {key}" if key else "")
        super().__init__(f"{origin}: {where}: {problem}")


@dataclass(frozen=True, slots=True)
class Ceiling:
    """At most ``per_turn`` calls of a tool in one turn and ``per_session`` in one session."""

    per_turn: int | None = None
    per_session: int | None = None

    def __post_init__(self) -> None:
        for key in ("per_turn", "per_session"):
            value = getattr(self, key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ConfigurationError(f"{key} must be a non-negative integer")
        if self.per_turn is None and self.per_session is None:
            raise ConfigurationError("a ceiling needs per_turn, per_session or both")

    def __and__(self, other: Ceiling) -> Ceiling:
        return Ceiling(
            _lower(self.per_turn, other.per_turn), _lower(self.per_session, other.per_session)
        )


def _lower(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True, slots=True)
class Policy:
    """Rules declared in Python or read from TOML (``Policy.from_toml``)."""

    params: tuple[Param, ...] = ()
    trusted: frozenset[str] = frozenset()
    untrusted: frozenset[str] = frozenset()
    intents: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)
    ceilings: Mapping[str, Ceiling] = field(default_factory=lambda: _EMPTY)
    fail_closed: bool = False
    origin: str = "<python>"
    # Where each rule was declared: rule name -> (origin, table).
    where: Mapping[str, tuple[str, str]] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        params = tuple(self.params)
        if not all(isinstance(p, Param) for p in params):
            raise ConfigurationError("policy params must be Param rules")
        object.__setattr__(self, "params", params)
        for which in ("trusted", "untrusted"):
            if isinstance(getattr(self, which), str):
                raise PolicyError(self.origin, "sources", which, "must be a list of tool names")
        object.__setattr__(self, "trusted", frozenset(self.trusted))
        object.__setattr__(self, "untrusted", frozenset(self.untrusted))
        both = self.trusted & self.untrusted
        if both:
            raise PolicyError(
                self.origin,
                "sources",
                None,
                f"{sorted(both)[0]!r} is declared both trusted and untrusted",
            )
        intents = {}
        for tool, terms in dict(self.intents).items():
            if isinstance(terms, str) or not all(isinstance(t, str) and t.strip() for t in terms):
                raise PolicyError(
                    self.origin, f"tools.{tool}", "intent", "must be a list of non-empty strings"
                )
            intents[tool] = tuple(terms)
            if not intents[tool]:
                raise PolicyError(self.origin, f"tools.{tool}", "intent", "needs at least one term")
            try:
                TermSet(intents[tool])  # matched like literal triggers: checked the same way
            except ConfigurationError as exc:
                raise PolicyError(self.origin, f"tools.{tool}", "intent", str(exc)) from None
        object.__setattr__(self, "intents", MappingProxyType(intents))
        ceilings = dict(self.ceilings)
        if not all(isinstance(c, Ceiling) for c in ceilings.values()):
            raise ConfigurationError("policy ceilings must be Ceiling values")
        object.__setattr__(self, "ceilings", MappingProxyType(ceilings))
        object.__setattr__(self, "where", MappingProxyType(dict(self.where)))
        names: dict[str, Param] = {}
        for p in params:
            if p.rule_name in names:
                origin, table, _ = self.locate(p)
                raise PolicyError(origin, table, "name", f"rule {p.rule_name!r} is declared twice")
            names[p.rule_name] = p

    @classmethod
    def from_toml(cls, path: Any, *, tools: Any = None) -> Policy:
        """Read a policy file; with ``tools`` (a mapping or list of tools), check it too."""
        from .loader import load

        policy = load(path)
        if tools is not None:
            policy.check(_tool_map(tools))
        return policy

    def locate(self, rule: Param) -> tuple[str, str, str | None]:
        origin, table = self.where.get(rule.rule_name, (self.origin, f"rule {rule.rule_name}"))
        return origin, table, None

    def __or__(self, other: Policy) -> Policy:
        if not isinstance(other, Policy):
            return NotImplemented
        intents = {k: tuple(v) for k, v in self.intents.items()}
        for tool, terms in other.intents.items():
            intents[tool] = tuple(dict.fromkeys((*intents.get(tool, ()), *terms)))
        ceilings = dict(self.ceilings)
        for tool, ceiling in other.ceilings.items():
            ceilings[tool] = ceilings[tool] & ceiling if tool in ceilings else ceiling
        return Policy(
            params=(*self.params, *other.params),
            trusted=self.trusted | other.trusted,
            untrusted=self.untrusted | other.untrusted,
            intents=intents,
            ceilings=ceilings,
            fail_closed=self.fail_closed or other.fail_closed,
            origin=self.origin
            if self.origin == other.origin
            else f"{self.origin} + {other.origin}",
            where={**self.where_all(), **other.where_all()},
        )

    def where_all(self) -> dict[str, tuple[str, str]]:
        return {
            p.rule_name: self.where.get(p.rule_name, (self.origin, f"rule {p.rule_name}"))
            for p in self.params
        }

    @property
    def sources_used(self) -> bool:
        return any(p.grounded_in is not None or p.not_only_untrusted for p in self.params)

    # -- checked against the registered tools ---------------------------------------

    def check(self, tools: Mapping[str, Any]) -> None:
        """Raise ``PolicyError`` at the first mistake against ``tools`` (name -> Tool)."""
        known_sources = {USER, CONTEXT, *tools}
        for reserved in (USER, CONTEXT):
            if reserved in tools and self.sources_used:
                raise PolicyError(
                    self.origin,
                    "sources",
                    None,
                    f"a tool is named {reserved!r}, which is also the name of a trusted source; "
                    "rename the tool",
                )
        for name in sorted(self.trusted | self.untrusted):
            if name not in tools:
                which = "trusted" if name in self.trusted else "untrusted"
                raise PolicyError(self.origin, "sources", which, f"unknown tool {name!r}")
        for tool in sorted(self.intents):
            if tool not in tools:
                raise PolicyError(self.origin, f"tools.{tool}", "intent", f"unknown tool {tool!r}")
        for tool in sorted(self.ceilings):
            if tool not in tools:
                raise PolicyError(
                    self.origin, f"tools.{tool}", "max_per_turn", f"unknown tool {tool!r}"
                )
        for rule in self.params:
            origin, table, _ = self.locate(rule)
            spec = tools.get(rule.tool)
            if spec is None:
                raise PolicyError(origin, table, None, f"unknown tool {rule.tool!r}")
            for source in sorted(rule.grounded_in or ()):
                if source not in known_sources:
                    raise PolicyError(
                        origin,
                        table,
                        "grounded_in",
                        f"unknown source {source!r}; use 'user', 'context' or a tool name",
                    )
            try:
                types = resolve(spec, rule.path)
            except LookupError as exc:
                raise PolicyError(
                    origin, table, None, f"tool {rule.tool!r} has no parameter {exc.args[0]!r}"
                ) from None
            problem = _type_mismatch(rule, types)
            if problem is not None:
                raise PolicyError(origin, table, problem[0], problem[1])


def _type_mismatch(rule: Param, types: frozenset[str] | None) -> tuple[str, str] | None:
    if types is None:  # the schema does not say: nothing to compare
        return None
    text = "string" in types
    number = bool(types & {"number", "integer"})
    if rule.kind is not None and not text:
        return "kind", f"kind {rule.kind} needs a string parameter; the schema says {sorted(types)}"
    if rule.pattern is not None and not text:
        return "pattern", f"a pattern needs a string parameter; the schema says {sorted(types)}"
    for key in ("min", "max", "min_from", "max_from"):
        if getattr(rule, key) is not None and not number:
            return key, f"{key} needs a number parameter; the schema says {sorted(types)}"
    return None


def _tool_map(tools: Any) -> dict[str, Any]:
    if isinstance(tools, Mapping):
        return dict(tools)
    if hasattr(tools, "tools") and isinstance(tools.tools, Mapping):
        return dict(tools.tools)
    if isinstance(tools, Iterable):
        return {t.name: t for t in tools}
    raise ConfigurationError("tools must be a mapping, a list of tools or a Guardrails engine")
