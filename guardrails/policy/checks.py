"""The checks of a parameter rule, compiled once: ``Compiled.check`` is pure.

Each check that applies is one step, ``(value, normal form, context, seen,
failed)``, that appends the ``Check`` it failed; every step runs, so the
order never matters. A rule checks one JSON scalar: anything else (a
subclass included) fails ``wrong_type`` before any step, so a hostile object
can neither raise inside a check nor pass one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Protocol

from ..errors import ConfigurationError
from ._extract import extract, number_text
from ._seen import Seen
from .custom_kinds import CustomKind
from .embedded import Embedded
from .kinds import (
    Kind,
    domain_of,
    host_matches,
    normalise_host,
    normalise_text,
    normaliser,
    split_url,
)
from .patterns import Pattern
from .templates import Template
from .words import Words

DEFAULT_TIMEOUT = 1.0  # a rule's deadline in seconds, unless it says (``rules.DEFAULT_TIMEOUT``)

__all__ = ["Check", "Compiled", "Seen"]


class Check(StrEnum):
    """The checks of a parameter rule: the reason codes of its rejections (public strings)."""

    TYPE = "wrong_type"
    KIND = "not_a_valid_value"
    VALUES = "not_allowed"
    DENIED = "denied"
    PATTERN = "pattern"
    MIN = "below_minimum"
    MAX = "above_maximum"
    DOMAIN = "domain_not_allowed"
    SCHEME = "scheme_not_allowed"
    COUNTRY = "country_not_allowed"
    PREFIX = "prefix_not_allowed"
    GROUNDED = "not_grounded"
    UNTRUSTED = "untrusted_only"
    UNKNOWN = "provenance_unknown"
    EMBEDDED = "embedded_not_grounded"
    WORDS = "word_not_grounded"
    TEMPLATE = "template_not_matched"
    TIMEOUT = "timeout"


_CACHE_SIZE = 4096


class Spec(Protocol):
    """What ``Compiled`` reads of a ``rules.Param`` (its options, validated)."""

    @property
    def timeout(self) -> float | None: ...
    @property
    def values(self) -> Iterable[Any] | None: ...
    @property
    def deny_values(self) -> Iterable[Any] | None: ...
    @property
    def values_from(self) -> str | None: ...
    @property
    def pattern(self) -> str | None: ...
    @property
    def min(self) -> float | None: ...
    @property
    def max(self) -> float | None: ...
    @property
    def min_from(self) -> str | None: ...
    @property
    def max_from(self) -> str | None: ...
    @property
    def domains(self) -> Iterable[str] | None: ...
    @property
    def deny_domains(self) -> Iterable[str] | None: ...
    @property
    def schemes(self) -> Iterable[str] | None: ...
    @property
    def countries(self) -> Iterable[str] | None: ...
    @property
    def prefixes(self) -> Iterable[str] | None: ...
    @property
    def grounded_in(self) -> Iterable[str] | None: ...
    @property
    def not_only_untrusted(self) -> bool: ...
    @property
    def embedded(self) -> Iterable[str | CustomKind] | None: ...
    @property
    def words(self) -> Iterable[str] | None: ...
    @property
    def template(self) -> Any: ...
    @property
    def placeholders(self) -> Any: ...


def _strings(name: str, value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigurationError(f"{name} must be a list of strings")
    items = tuple(value)
    if not all(isinstance(v, str) for v in items):
        raise ConfigurationError(f"{name} must be a list of strings")
    return frozenset(items)


def _number(name: str, value: Any) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a finite number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(f"{name} must be a finite number")
    return value


class Compiled:
    """A ``Param``'s checks, prepared: normalised sets, a compiled pattern, the bounds."""

    __slots__ = (
        "cache",
        "countries",
        "deny",
        "deny_domains",
        "domains",
        "embedded",
        "grounded",
        "kind",
        "max",
        "max_from",
        "min",
        "min_from",
        "normalise",
        "pattern",
        "prefix",
        "prefixes",
        "rule",
        "schemes",
        "steps",
        "template",
        "timeout",
        "untrusted",
        "values",
        "values_from",
        "words",
    )

    def __init__(self, p: Spec, kind: Kind | CustomKind | None) -> None:
        self.rule = p
        self.kind = kind
        self.timeout: float = p.timeout  # type: ignore[assignment]  # set by ``Param``
        self.normalise = (
            None
            if kind is None
            else kind.normalise
            if isinstance(kind, CustomKind)
            else normaliser(kind)
        )
        self.cache: dict[str, str | None] = {}
        self.values = self._value_set("values", p.values)
        self.deny = self._value_set("deny_values", p.deny_values)
        self.values_from = p.values_from
        self.pattern = Pattern(p.pattern) if p.pattern is not None else None
        self.min = _number("min", p.min)
        self.max = _number("max", p.max)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ConfigurationError("min is greater than max")
        self.min_from, self.max_from = p.min_from, p.max_from
        self.domains = self._hosts("domains", p.domains)
        self.deny_domains = self._hosts("deny_domains", p.deny_domains)
        schemes = _strings("schemes", p.schemes)
        if kind is Kind.URL and schemes is None:
            schemes = frozenset({"http", "https"})
        self.schemes = None if schemes is None else frozenset(s.lower() for s in schemes)
        countries = _strings("countries", p.countries)
        self.countries = None if countries is None else frozenset(c.upper() for c in countries)
        prefixes = _strings("prefixes", p.prefixes)
        if prefixes is not None:
            bad = [x for x in prefixes if not x.startswith("+") or not x[1:].isdigit()]
            if bad:
                raise ConfigurationError(f"prefix {bad[0]!r} must be + and digits")
        self.prefixes = None if prefixes is None else tuple(sorted(prefixes))
        self.grounded = _strings("grounded_in", p.grounded_in)
        if self.grounded is not None and not self.grounded:
            raise ConfigurationError("grounded_in must name at least one source")
        self.untrusted = p.not_only_untrusted
        self.embedded = (
            None
            if p.embedded is None
            else Embedded(p.embedded, self.domains, self.deny_domains, self.grounded)
        )
        self.words = None if p.words is None else Words(p.words, self.grounded)
        self.template = (
            None
            if p.template is None
            else Template(p.template, self.grounded, dict(p.placeholders or ()))
        )
        # Of the keys the ledger holds (``_extract.key``): a text value is its own key.
        self.prefix = "" if kind in (None, Kind.TEXT) else f"{kind.value}\x00"
        self.steps = self._steps()

    def _value_set(self, name: str, given: Iterable[Any] | None) -> frozenset[Any] | None:
        if given is None:
            return None
        if isinstance(given, str | bytes | Mapping) or not isinstance(given, Iterable):
            raise ConfigurationError(f"{name} must be a list")
        out = set()
        for item in given:
            if self.normalise is not None:
                if not isinstance(item, str):
                    raise ConfigurationError(f"{name}: {item!r} is not a {self.kind} value")
                norm = self.normalise(item)
                if norm is None:
                    raise ConfigurationError(f"{name}: {item!r} is not a valid {self.kind}")
                out.add(norm)
            elif isinstance(item, str | int | float | bool) or item is None:
                out.add(_literal(item))
            else:
                raise ConfigurationError(f"{name}: {item!r} is not a string, number or boolean")
        return frozenset(out)

    def _hosts(self, name: str, given: Iterable[str] | None) -> frozenset[str] | None:
        names = _strings(name, given)
        if names is None:
            return None
        out = set()
        for item in names:
            host = normalise_host(item.lstrip("*.").lstrip("@"))
            if host is None:
                raise ConfigurationError(f"{name}: {item!r} is not a domain")
            out.add(host)
        return frozenset(out)

    # -- evaluation -----------------------------------------------------------

    def normal(self, value: str) -> str | None:
        cache = self.cache
        try:
            return cache[value]
        except KeyError:
            pass
        norm = self.normalise(value)  # type: ignore[misc]
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        cache[value] = norm
        return norm

    def _steps(self) -> tuple[Any, ...]:
        """The checks that apply, in a fixed order, each ``(value, norm, context, seen, failed)``."""
        steps: list[Any] = []
        if self.kind is not None and (
            self.domains or self.deny_domains or self.schemes or self.countries or self.prefixes
        ):
            steps.append(self._kind_checks)
        if self.values is not None:
            steps.append(self._in_values)
        if self.deny is not None:
            steps.append(self._not_denied)
        if self.values_from is not None:
            steps.append(self._in_context_values)
        if self.pattern is not None:
            steps.append(self._matches)
        if self.min is not None or self.max is not None or self.min_from or self.max_from:
            steps.append(self._bounds)
        if self.embedded is not None:
            steps.append(self._embedded)  # grounded_in and domains apply to what it finds
        elif self.words is not None:
            steps.append(self._words)  # grounded_in applies to each word
        elif self.template is not None:
            steps.append(self._template)  # grounded_in applies to each placeholder
        elif self.grounded is not None or self.untrusted:
            steps.append(self._provenance)
        return tuple(steps)

    def check(self, value: Any, context: Any, seen: Seen | None) -> list[Check]:
        failed: list[Check] = []
        if self.normalise is not None:
            if value.__class__ is not str:
                return [Check.TYPE]
            norm = self.cache.get(value, _UNSEEN)
            if norm is _UNSEEN:
                norm = self.normal(value)
            if norm is None:
                return [Check.KIND]
        elif value.__class__ not in _PLAIN:
            # A rule checks one JSON scalar (use ``.*`` for the items of a
            # list); anything else, a subclass included, is refused as is.
            return [Check.TYPE]
        else:
            norm = value
        steps = self.steps
        if len(steps) == 1:
            steps[0](value, norm, context, seen, failed)
        else:
            for step in steps:
                step(value, norm, context, seen, failed)
        return failed

    def _in_values(
        self, value: Any, norm: Any, context: Any, seen: Any, failed: list[Check]
    ) -> None:
        if _literal(norm) not in self.values:  # type: ignore[operator]
            failed.append(Check.VALUES)

    def _not_denied(
        self, value: Any, norm: Any, context: Any, seen: Any, failed: list[Check]
    ) -> None:
        if _literal(norm) in self.deny:  # type: ignore[operator]
            failed.append(Check.DENIED)

    def _in_context_values(
        self, value: Any, norm: Any, context: Any, seen: Any, failed: list[Check]
    ) -> None:
        if not self._in_context(_literal(norm) if self.normalise is None else norm, context):
            failed.append(Check.VALUES)

    def _matches(self, value: Any, norm: Any, context: Any, seen: Any, failed: list[Check]) -> None:
        if value.__class__ is not str:
            failed.append(Check.TYPE)
            return
        matched = self.pattern.fullmatch_within(value, self.timeout)  # type: ignore[union-attr]
        if matched is None:
            failed.append(Check.TIMEOUT)
        elif not matched:
            failed.append(Check.PATTERN)

    def _kind_checks(
        self, value: Any, norm: str, context: Any, seen: Any, failed: list[Check]
    ) -> None:
        kind = self.kind
        if kind is Kind.EMAIL or kind is Kind.HOST or kind is Kind.URL:
            if kind is Kind.URL:
                parts = split_url(norm)
                scheme, host = (parts[0], parts[1]) if parts else ("", "")
                if self.schemes is not None and scheme not in self.schemes:
                    failed.append(Check.SCHEME)
            else:
                host = domain_of(norm) if kind is Kind.EMAIL else norm
            if (self.domains is not None and not host_matches(host, self.domains)) or (
                self.deny_domains is not None and host_matches(host, self.deny_domains)
            ):
                failed.append(Check.DOMAIN)
        elif kind is Kind.IBAN:
            if self.countries is not None and norm[:2] not in self.countries:
                failed.append(Check.COUNTRY)
        elif (
            kind is Kind.PHONE and self.prefixes is not None and not norm.startswith(self.prefixes)
        ):
            failed.append(Check.PREFIX)

    def _embedded(
        self, value: Any, norm: Any, context: Any, seen: Seen | None, failed: list[Check]
    ) -> None:
        if value.__class__ is not str:
            failed.append(Check.TYPE)
            return
        found = extract(value)
        for kind in self.embedded.custom:  # type: ignore[union-attr]
            kind.find(value, found)
        failed.extend(Check(code) for code in self.embedded.failures(found, seen))  # type: ignore[union-attr]

    def _words(
        self, value: Any, norm: Any, context: Any, seen: Seen | None, failed: list[Check]
    ) -> None:
        if value.__class__ is not str:
            failed.append(Check.TYPE)
            return
        failed.extend(Check(code) for code in self.words.failures(value, seen))  # type: ignore[union-attr]

    def _template(
        self, value: Any, norm: Any, context: Any, seen: Seen | None, failed: list[Check]
    ) -> None:
        if value.__class__ is not str:
            failed.append(Check.TYPE)
            return
        failed.extend(Check(code) for code in self.template.failures(value, seen))  # type: ignore[union-attr]

    def _in_context(self, norm: Any, context: Any) -> bool:
        allowed = context.get(self.values_from) if context is not None else None
        if allowed is None:
            return False
        items = [allowed] if isinstance(allowed, str | int | float) else allowed
        try:
            for item in items:
                if self.normalise is not None:
                    if isinstance(item, str) and self.normal(item) == norm:
                        return True
                elif _literal(item) == norm:
                    return True
        except TypeError:
            return False
        return False

    def _bounds(self, value: Any, norm: Any, context: Any, seen: Any, failed: list[Check]) -> None:
        cls = value.__class__
        if (cls is not float and cls is not int) and (
            isinstance(value, bool) or not isinstance(value, int | float)
        ):
            failed.append(Check.TYPE)
            return
        low, high = self.min, self.max
        if self.min_from is not None:
            low = _max(low, _context_number(context, self.min_from), failed, Check.MIN)
        if self.max_from is not None:
            high = _min(high, _context_number(context, self.max_from), failed, Check.MAX)
        if low is not None and not value >= low:
            failed.append(Check.MIN)
        if high is not None and not value <= high:
            failed.append(Check.MAX)

    def _provenance(
        self, value: Any, key: Any, context: Any, seen: Seen | None, failed: list[Check]
    ) -> None:
        if seen is None:
            return
        if self.kind is None:  # no kind: the value as text (numbers as written in JSON)
            key = normalise_text(key) if key.__class__ is str else _as_text(key)
            if key is None:
                failed.append(Check.TYPE)
                return
        mask = seen.lookup(self.prefix + key)
        if self.grounded is not None:
            need = seen.mask_of(self.grounded)
            # Not found where it must be: refused, and unknown (a fault) when
            # those sources' labels may be missing: never a pass.
            if not mask & need:
                failed.append(Check.UNKNOWN if seen.partial & need else Check.GROUNDED)
        if self.untrusted and not mask & seen.trusted:
            partial = seen.partial
            if mask:  # seen only in untrusted results, as far as the record says
                failed.append(Check.UNKNOWN if partial & seen.trusted else Check.UNTRUSTED)
            elif partial & ~seen.trusted:  # unseen, but the untrusted labels are partial
                failed.append(Check.UNKNOWN)

    def explain(self) -> list[str]:
        p = self.rule
        lines = []
        if isinstance(self.kind, CustomKind):
            lines.append(
                f"kind {self.kind.name}: must match {self.kind.pattern!r} (case {self.kind.case}, "
                f"separators {self.kind.separators!r} dropped)"
            )
        elif self.kind is not None:
            lines.append(f"kind {self.kind.value}: must parse as one")
        for key in ("values", "deny_values", "values_from", "pattern", "min", "max", "min_from",
                    "max_from", "domains", "deny_domains", "countries", "prefixes"):  # fmt: skip
            given = getattr(p, key)
            if given is not None:
                shown = (
                    sorted(given) if isinstance(given, frozenset | set | list | tuple) else given
                )
                lines.append(f"{key} = {shown!r}")
        if self.kind is Kind.URL:
            lines.append(f"schemes = {sorted(self.schemes or ())!r}")
        if self.embedded is not None:
            lines.append(
                f"embedded = {sorted(self.embedded.kinds)!r}: each one found in the text "
                "must be grounded or on domains"
            )
        if self.words is not None:
            lines.append(
                f"words = {sorted(self.words.literal)!r}: every other word must be grounded"
            )
        if self.template is not None:
            shown = [p.template] if isinstance(p.template, str) else list(p.template)
            lines.append(f"template = {shown!r}: literal words, each placeholder grounded")
        if self.grounded is not None:
            lines.append(f"grounded_in = {sorted(self.grounded)!r}")
        if self.untrusted:
            lines.append("not_only_untrusted: a value seen only in untrusted results is refused")
        if p.timeout is not None and p.timeout != DEFAULT_TIMEOUT:
            lines.append(f"timeout = {self.timeout:g} (seconds; later: refused, a timeout fault)")
        return lines


def _as_text(value: Any) -> str | None:
    """A number as ``extract_value`` labels it; None for anything else."""
    return number_text(value)


_UNSEEN: Any = object()
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _literal(value: Any) -> Any:
    # JSON equality: 1 == 1.0, but True is not 1.
    if value is True or value is False:
        return ("bool", value)
    return value


def _context_number(context: Any, key: str) -> float | None:
    try:
        value = context.values[key]  # a TurnContext's values: the usual place
    except (AttributeError, KeyError, TypeError):
        value = context.get(key) if context is not None else None
    cls = value.__class__
    # An int is finite however large (``math.isfinite`` would overflow on it).
    if cls is int or (cls is float and math.isfinite(value)):
        return value  # type: ignore[no-any-return]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _max(a: float | None, b: float | None, failed: list[Check], check: Check) -> float | None:
    if b is None:
        failed.append(check)  # the bound's context value is missing: nothing can be below it
        return a
    return b if a is None else max(a, b)


def _min(a: float | None, b: float | None, failed: list[Check], check: Check) -> float | None:
    if b is None:
        failed.append(check)
        return a
    return b if a is None else min(a, b)
