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

from .._conditions import ApprovalRule
from ..errors import ConfigurationError
from ..rules.triggers import TermSet
from ._ceiling import Ceiling
from ._policy_error import PolicyError
from ._toml_read import read_file, read_text
from ._where import free_key
from .custom_kinds import CustomKind
from .defaults import default_rule_name
from .fields import split_source
from .provenance import CONTEXT, TRUSTED, USER
from .rules import Param
from .schema_paths import resolve

__all__ = ["Ceiling", "Policy", "PolicyError", "build", "free_key"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


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
    # The safe default: the sources every string argument of a tool with an
    # effect must be grounded in, and the (tool, path) pairs declared free of it.
    default_grounded_in: frozenset[str] | None = None
    free: frozenset[tuple[str, str]] = frozenset()
    # [sources.groups] of the file(s), already expanded in the rules: kept to be checked.
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)
    # When a tool's calls need a person's approval (docs/approvals.md): the rules of
    # every file that set one; a call needs approval when any of them says so.
    approvals: Mapping[str, tuple[ApprovalRule, ...]] = field(default_factory=lambda: _EMPTY)
    # [kinds.NAME] of the file(s): user-defined kinds, by name (``custom_kinds``).
    kinds: Mapping[str, CustomKind] = field(default_factory=lambda: _EMPTY)

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
        approvals = {tool: tuple(rules) for tool, rules in dict(self.approvals).items()}
        if not all(type(r) is ApprovalRule for rules in approvals.values() for r in rules):
            raise ConfigurationError("policy approvals must be ApprovalRule values")
        object.__setattr__(self, "approvals", MappingProxyType(approvals))
        object.__setattr__(self, "where", MappingProxyType(dict(self.where)))
        _check_default(self)
        object.__setattr__(self, "groups", MappingProxyType(dict(self.groups)))
        object.__setattr__(self, "kinds", MappingProxyType(_all_kinds(self)))
        names: dict[str, Param] = {}
        for p in params:
            if p.rule_name in names:
                origin, table, _ = self.locate(p)
                raise PolicyError(origin, table, "name", f"rule {p.rule_name!r} is declared twice")
            names[p.rule_name] = p

    @classmethod
    def from_toml(cls, path: Any, *, tools: Any = None) -> Policy:
        """Read a policy file; with ``tools`` (a mapping or list of tools), check it too."""
        policy = build(*read_file(path))
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
            default_grounded_in=_merged_default(self, other),
            free=self.free | other.free,
            groups=_merged_groups(self, other),
            kinds=_merged_kinds(self, other),
            approvals={
                tool: tuple(dict.fromkeys((*self.approvals.get(tool, ()), *rules)))
                for tool, rules in {**self.approvals, **other.approvals}.items()
            },
        )

    def where_all(self) -> dict[str, tuple[str, str]]:
        names = [p.rule_name for p in self.params] + [free_key(*f) for f in self.free]
        return {name: self.where.get(name, (self.origin, f"rule {name}")) for name in names}

    @property
    def sources_used(self) -> bool:
        return self.default_grounded_in is not None or any(
            p.grounded_in is not None or p.not_only_untrusted or p.template is not None
            for p in self.params
        )

    def source_names(self) -> set[str]:
        """Every source named in a ``grounded_in`` (the rules' and the default's)
        or by a template's placeholder."""
        names = set(self.default_grounded_in or ())
        for p in self.params:
            names.update(p.grounded_in or ())
            names.update(_placeholder_sources(p))
        return names

    def _names_source(self, name: str) -> bool:
        if name != TRUSTED:
            return self.sources_used
        return name in (self.default_grounded_in or ()) or any(
            name in (p.grounded_in or ()) for p in self.params
        )

    # -- checked against the registered tools ---------------------------------------

    def check(self, tools: Mapping[str, Any]) -> None:
        """Raise ``PolicyError`` at the first mistake against ``tools`` (name -> Tool)."""
        known_sources = {USER, CONTEXT, TRUSTED, *tools}
        for reserved in (USER, CONTEXT, TRUSTED):
            if reserved in tools and self._names_source(reserved):
                raise PolicyError(
                    self.origin,
                    "sources",
                    None,
                    f"a tool is named {reserved!r}, which is also the name of a trusted source; "
                    "rename the tool",
                )
        for group, members in sorted(self.groups.items()):
            for source in members:
                if source not in known_sources and split_source(source, tools) is None:
                    raise PolicyError(self.origin, "sources.groups", group, _unknown_source(source))
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
        for tool in sorted(self.approvals):
            if tool not in tools:
                raise PolicyError(
                    self.origin, f"tools.{tool}", "approval", f"unknown tool {tool!r}"
                )
            for approval in self.approvals[tool]:
                try:
                    approval.check_names(_parameters(tools[tool]), f"tool {tool!r}")
                except ConfigurationError as exc:
                    raise PolicyError(self.origin, f"tools.{tool}", "approval", str(exc)) from None
        self._check_params(tools, known_sources)
        check_default(self, tools, known_sources)

    def _check_params(self, tools: Mapping[str, Any], known_sources: set[str]) -> None:
        """Each parameter rule against its tool: the tool, its sources, the path's type."""
        for rule in self.params:
            origin, table, _ = self.locate(rule)
            spec = tools.get(rule.tool)
            if spec is None:
                raise PolicyError(origin, table, None, f"unknown tool {rule.tool!r}")
            for source in sorted(rule.grounded_in or ()):
                if source not in known_sources and split_source(source, tools) is None:
                    raise PolicyError(
                        origin,
                        table,
                        "grounded_in",
                        _unknown_source(source),
                    )
            for source in sorted(_placeholder_sources(rule)):
                if source not in known_sources and split_source(source, tools) is None:
                    raise PolicyError(origin, table, "template", _unknown_source(source))
            try:
                types = resolve(spec, rule.path)
            except LookupError as exc:
                raise PolicyError(
                    origin, table, None, f"tool {rule.tool!r} has no parameter {exc.args[0]!r}"
                ) from None
            problem = _type_mismatch(rule, types)
            if problem is not None:
                raise PolicyError(origin, table, problem[0], problem[1])


def _placeholder_sources(rule: Param) -> set[str]:
    """The sources a rule's template placeholders name (its groups)."""
    return {
        source
        for _, value in (rule.placeholders or ())
        if not isinstance(value, CustomKind)
        for source in value
    }


def _parameters(tool: Any) -> Iterable[str]:
    schema = getattr(tool, "source_schema", None) or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties.keys() if isinstance(properties, Mapping) else ()


def _check_default(policy: Policy) -> None:
    given = policy.default_grounded_in
    if given is not None:
        if isinstance(given, str) or not all(isinstance(s, str) for s in given):
            raise PolicyError(policy.origin, "defaults", "grounded_in", "must be a list of strings")
        if not given:
            raise PolicyError(
                policy.origin, "defaults", "grounded_in", "must name at least one source"
            )
        object.__setattr__(policy, "default_grounded_in", frozenset(given))
    free = frozenset(policy.free)
    for item in free:
        if not (
            isinstance(item, tuple) and len(item) == 2 and all(isinstance(x, str) for x in item)
        ):
            raise ConfigurationError("policy free must be a set of (tool, path) pairs")
    object.__setattr__(policy, "free", free)


def _unknown_source(source: str) -> str:
    return (
        f"unknown source {source!r}; "
        "use 'user', 'context', 'trusted', a tool name or a tool's field (TOOL.PATH)"
    )


def _merged_groups(a: Policy, b: Policy) -> dict[str, tuple[str, ...]]:
    for name in sorted(set(a.groups) & set(b.groups)):
        if a.groups[name] != b.groups[name]:
            raise PolicyError(
                f"{a.origin} + {b.origin}", "sources.groups", name, "defined twice, differently"
            )
    return {**a.groups, **b.groups}


def _all_kinds(policy: Policy) -> dict[str, CustomKind]:
    """The kinds declared and those the rules use (a ``Param`` built in Python), one per name."""
    out: dict[str, CustomKind] = {}
    used = [(name, kind, "kinds") for name, kind in dict(policy.kinds).items()]
    for p in policy.params:
        for kind in (p.kind, *(p.embedded or ())):
            if isinstance(kind, CustomKind):
                used.append((kind.name, kind, f"rule {p.rule_name}"))
    for name, kind, where in used:
        if not isinstance(kind, CustomKind) or kind.name != name:
            raise ConfigurationError("policy kinds must map each name to its CustomKind")
        if out.setdefault(name, kind) != kind:
            raise PolicyError(policy.origin, where, "kind", f"two kinds named {name!r} differ")
    return out


def _merged_kinds(a: Policy, b: Policy) -> dict[str, CustomKind]:
    for name in sorted(set(a.kinds) & set(b.kinds)):
        if a.kinds[name] != b.kinds[name]:
            raise PolicyError(
                f"{a.origin} + {b.origin}", f"kinds.{name}", None, "defined twice, differently"
            )
    return {**a.kinds, **b.kinds}


def _merged_default(a: Policy, b: Policy) -> frozenset[str] | None:
    one, two = a.default_grounded_in, b.default_grounded_in
    if one is not None and two is not None and one != two:
        raise PolicyError(
            f"{a.origin} + {b.origin}",
            "defaults",
            "grounded_in",
            f"two policies give different defaults ({sorted(one)} and {sorted(two)}); give one",
        )
    return one if one is not None else two


def check_default(policy: Policy, tools: Mapping[str, Any], known: set[str]) -> None:
    """Raise ``PolicyError`` at the first mistake of the safe default or a free path."""
    for source in sorted(policy.default_grounded_in or ()):
        if source not in known and split_source(source, tools) is None:
            raise PolicyError(
                policy.origin,
                "defaults",
                "grounded_in",
                _unknown_source(source),
            )
    names = {p.rule_name for p in policy.params}
    if policy.default_grounded_in is None and policy.free:
        tool, path = min(policy.free)
        origin, table = policy.where.get(free_key(tool, path), (policy.origin, f"tools.{tool}"))
        raise PolicyError(origin, table, "free", "needs [defaults] grounded_in to be free of")
    for tool, path in sorted(policy.free):
        origin, table = policy.where.get(
            free_key(tool, path), (policy.origin, f"tools.{tool}.params.{path}")
        )
        spec = tools.get(tool)
        if spec is None:
            raise PolicyError(origin, table, None, f"unknown tool {tool!r}")
        if not getattr(spec, "effect", False):
            raise PolicyError(
                origin, table, "free", f"tool {tool!r} has no effect; the default does not apply"
            )
        try:
            resolve(spec, path)
        except LookupError as exc:
            raise PolicyError(
                origin, table, None, f"tool {tool!r} has no parameter {exc.args[0]!r}"
            ) from None
    if policy.default_grounded_in is not None:
        for tool in sorted(tools):
            if getattr(tools[tool], "effect", False) and default_rule_name(tool) in names:
                raise PolicyError(
                    policy.origin,
                    f"tools.{tool}",
                    "name",
                    f"the rule name {default_rule_name(tool)!r} is the safe default's guard",
                )


def _type_mismatch(rule: Param, types: frozenset[str] | None) -> tuple[str, str] | None:
    if types is None:  # the schema does not say: nothing to compare
        return None
    text = "string" in types
    number = bool(types & {"number", "integer"})
    if rule.kind is not None and not text:
        return "kind", f"kind {rule.kind} needs a string parameter; the schema says {sorted(types)}"
    if rule.template is not None and not text:
        return "template", f"template needs a string parameter; the schema says {sorted(types)}"
    if rule.words is not None and not text:
        return "words", f"words needs a string parameter; the schema says {sorted(types)}"
    if rule.embedded is not None and not text:
        return "embedded", f"embedded needs a string parameter; the schema says {sorted(types)}"
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


def build(origin: str, text: str) -> Policy:
    """The policy of TOML ``text`` read from ``origin``: one ``PolicyError`` for any mistake."""
    fields = read_text(text, origin)
    try:
        return Policy(**fields)
    except PolicyError:
        raise
    except ConfigurationError as exc:
        raise PolicyError(origin, "tools", None, str(exc)) from None
