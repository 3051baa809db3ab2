"""Parameter rules: what one argument of one tool may be.

A ``Param`` names a tool and a path into its arguments (``"to"``,
``"recipient.iban"``, ``"cc.*"``) and holds independent checks: allowed and
denied values, a pattern, numeric bounds, a value kind with its own limits
(domains, schemes, countries, prefixes), and provenance (``grounded_in``,
``not_only_untrusted``). Every check that applies runs; any failure rejects,
so the order of checks and of rules never matters. ``check()`` is pure: it
takes the value, the turn's context and a provenance lookup, and returns the
names of the failed checks (never the value).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from ..verdicts import Outcome
from .checks import DEFAULT_TIMEOUT, Check, Compiled, Seen
from .custom_kinds import CustomKind
from .kinds import Kind

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_PATH_PARTS",
    "MAX_TIMEOUT",
    "Check",
    "Param",
    "Seen",
    "normalised",
]

# A rule's deadline (seconds): an evaluation that ends later refuses the call.
MAX_TIMEOUT = 60.0
MAX_PATH_PARTS = 16

_KIND_OPTIONS = {
    "domains": {Kind.EMAIL, Kind.URL, Kind.HOST},
    "deny_domains": {Kind.EMAIL, Kind.URL, Kind.HOST},
    "schemes": {Kind.URL},
    "countries": {Kind.IBAN},
    "prefixes": {Kind.PHONE},
}
_LISTS = (
    "values", "deny_values", "domains", "deny_domains", "schemes", "countries", "prefixes",
    "grounded_in", "embedded", "words",
)  # fmt: skip
_REJECT_OUTCOMES = (Outcome.INVALID_ARGS, Outcome.LIMIT, Outcome.UNAVAILABLE)


@dataclass(frozen=True, slots=True)
class Param:
    """One rule on one parameter of one tool. Built once; raises ``ConfigurationError``
    naming the rule when its own options disagree (the tool is checked at install)."""

    tool: str
    path: str
    kind: Kind | CustomKind | str | None = None
    values: Iterable[Any] | None = None
    values_from: str | None = None
    deny_values: Iterable[Any] | None = None
    pattern: str | None = None
    min: float | None = None
    max: float | None = None
    min_from: str | None = None
    max_from: str | None = None
    domains: Iterable[str] | None = None
    deny_domains: Iterable[str] | None = None
    schemes: Iterable[str] | None = None
    countries: Iterable[str] | None = None
    prefixes: Iterable[str] | None = None
    grounded_in: Iterable[str] | None = None
    not_only_untrusted: bool = False
    outcome: Outcome | str = Outcome.INVALID_ARGS
    name: str | None = None
    timeout: float | None = None
    embedded: Iterable[str | CustomKind] | None = None
    words: Iterable[str] | None = None
    template: str | Iterable[str] | None = None
    # What each template placeholder that is not a built-in kind names: a
    # ``CustomKind``, or the sources (a group) its value is grounded in.
    # (Given as a mapping; kept as sorted ``(name, kind or sources)`` pairs.)
    placeholders: Any = None
    _compiled: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        label = self.name or f"policy:{self.tool}.{self.path}"
        try:
            _validate(self, label)
        except ConfigurationError as exc:
            raise ConfigurationError(f"rule {label!r}: {exc}") from None
        object.__setattr__(self, "name", label)

    @property
    def rule_name(self) -> str:
        return self.name or f"policy:{self.tool}.{self.path}"

    def check(self, value: Any, context: Any, seen: Seen | None) -> list[Check]:
        """The failed checks for one value (empty: it passes). Pure; never raises."""
        return self._compiled.check(value, context, seen)  # type: ignore[no-any-return]

    def explain(self) -> list[str]:
        """One line per check this rule makes, for ``guardrails policy explain``."""
        return self._compiled.explain()  # type: ignore[no-any-return]


def _check_where(p: Param) -> None:
    """The rule's tool name and parameter path."""
    if not isinstance(p.tool, str) or not p.tool:
        raise ConfigurationError("tool must be a tool name")
    if not isinstance(p.path, str) or not p.path:
        raise ConfigurationError("path must be a parameter name or a dotted path")
    if p.path.count(".") >= MAX_PATH_PARTS:
        raise ConfigurationError(f"path has more than {MAX_PATH_PARTS} parts")
    if "" in p.path.split("."):
        raise ConfigurationError("path must be a parameter name or a dotted path")


def _check_text_options(p: Param, kind: Any) -> None:
    """``embedded``, ``template`` and ``words``: text parameters only, and not together."""
    if p.embedded is not None:
        if kind not in (None, Kind.TEXT):
            raise ConfigurationError("embedded needs a text parameter (no kind, or kind text)")
        if p.not_only_untrusted:
            raise ConfigurationError(
                "not_only_untrusted does not apply to embedded values; use grounded_in"
            )
    if p.template is not None:
        if kind not in (None, Kind.TEXT):
            raise ConfigurationError("template needs a text parameter (no kind, or kind text)")
        if p.embedded is not None or p.words is not None or p.not_only_untrusted:
            raise ConfigurationError(
                "template cannot be combined with embedded, words or not_only_untrusted"
            )
    if p.words is not None:
        if kind not in (None, Kind.TEXT):
            raise ConfigurationError("words needs a text parameter (no kind, or kind text)")
        if p.embedded is not None or p.not_only_untrusted:
            raise ConfigurationError("words cannot be combined with embedded or not_only_untrusted")


def _validate(p: Param, label: str) -> None:
    _check_where(p)
    kind = _kind(p.kind)
    object.__setattr__(p, "kind", kind)
    _check_text_options(p, kind)
    object.__setattr__(p, "placeholders", _placeholders(p.placeholders))
    for option, kinds in _KIND_OPTIONS.items():
        hosts = option in ("domains", "deny_domains") and p.embedded is not None
        if getattr(p, option) is not None and kind not in kinds and not hosts:
            raise ConfigurationError(
                f"{option} needs kind {' or '.join(sorted(k.value for k in kinds))}"
            )
    outcome: Outcome | None
    try:
        outcome = Outcome(p.outcome)
    except ValueError:
        outcome = None
    if outcome not in _REJECT_OUTCOMES:
        raise ConfigurationError("outcome must be invalid_args, limit or unavailable")
    object.__setattr__(p, "outcome", outcome)
    if p.not_only_untrusted not in (True, False):
        raise ConfigurationError("not_only_untrusted must be true or false")
    timeout = DEFAULT_TIMEOUT if p.timeout is None else p.timeout
    if (
        timeout.__class__ not in (int, float)
        or not 0 < timeout <= MAX_TIMEOUT  # NaN fails this too
    ):
        raise ConfigurationError(
            f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT}"
        )
    object.__setattr__(p, "timeout", float(timeout))
    for key in ("values_from", "min_from", "max_from"):
        if getattr(p, key) is not None and not isinstance(getattr(p, key), str):
            raise ConfigurationError(f"{key} must name a context value")
    object.__setattr__(p, "_compiled", Compiled(p, kind))
    # Frozen all the way down: the lists given become tuples (sets: sorted).
    if p.template is not None and not isinstance(p.template, str):
        object.__setattr__(p, "template", tuple(p.template))
    for key in _LISTS:
        given = getattr(p, key)
        if given is not None:
            items = sorted(given, key=repr) if isinstance(given, set | frozenset) else given
            object.__setattr__(p, key, tuple(items))


def _placeholders(given: Any) -> tuple[tuple[str, Any], ...] | None:
    """Placeholders frozen: ``(name, CustomKind or a tuple of sources)`` pairs, sorted."""
    if given is None:
        return None
    if not isinstance(given, Mapping):
        raise ConfigurationError("placeholders must map each name to a kind or a list of sources")
    out: list[tuple[str, Any]] = []
    for name, value in dict(given).items():
        if isinstance(value, CustomKind):
            out.append((name, value))
        elif isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise ConfigurationError(f"placeholder {name!r} must be a kind or a list of sources")
        else:
            out.append((name, tuple(value)))
    return tuple(sorted(out, key=lambda pair: pair[0]))


def _kind(given: Any) -> Kind | CustomKind | None:
    if given is None or isinstance(given, CustomKind):
        return given
    try:
        return Kind(given)
    except ValueError:
        raise ConfigurationError(
            f"kind must be one of {[k.value for k in Kind]} or a kind declared under [kinds], "
            f"not {given!r}"
        ) from None


def normalised(p: Param, value: str) -> str | None:
    """The rule's normal form of ``value`` (its kind's), or None when it is not one."""
    return p._compiled.normal(value) if p.kind is not None else value
