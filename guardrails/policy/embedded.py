"""Values embedded in free text: each link, address, IBAN or phone number inside it.

A rule with ``embedded = ["url", "email", ...]`` on a free-text parameter
(a message body, an event description) reads the values of those kinds out
of the argument with the same linear-time scans that label tool results
(``_extract.extract``), each in its kind's normal form, and requires each to
be grounded in the rule's ``grounded_in`` sources or, for a link, an address
or a host, to be on its ``domains`` (and never on its ``deny_domains``).
The text around them is not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..errors import ConfigurationError
from ._seen import Seen
from .custom_kinds import CustomKind
from .kinds import domain_of, host_matches, split_url

__all__ = ["EMBEDDABLE", "Embedded"]

EMBEDDABLE = ("email", "host", "iban", "phone", "url")
_HOSTED = {"email", "host", "url"}
# The reason codes (``checks.Check`` values; that module imports this one).
_DOMAIN, _UNKNOWN, _NOT_GROUNDED = (
    "domain_not_allowed",
    "provenance_unknown",
    "embedded_not_grounded",
)


class Embedded:
    """The embedded-values check of one rule, prepared once."""

    __slots__ = ("custom", "deny_domains", "domains", "kinds", "need_names")

    def __init__(
        self,
        kinds: Iterable[str | CustomKind],
        domains: frozenset[str] | None,
        deny_domains: frozenset[str] | None,
        grounded: frozenset[str] | None,
    ) -> None:
        if isinstance(kinds, str):
            raise ConfigurationError("embedded must be a list of kinds")
        chosen = tuple(kinds)
        if not chosen:
            raise ConfigurationError("embedded must name at least one kind")
        for kind in chosen:
            if not isinstance(kind, CustomKind) and kind not in EMBEDDABLE:
                raise ConfigurationError(
                    f"embedded {kind!r} is not a kind found in text; use {list(EMBEDDABLE)} "
                    "or a kind declared under [kinds]"
                )
        # User-defined kinds (``custom_kinds``) are found by their own scans.
        self.custom = tuple(k for k in chosen if isinstance(k, CustomKind))
        self.kinds = frozenset(k.name if isinstance(k, CustomKind) else k for k in chosen)
        self.domains, self.deny_domains = domains, deny_domains
        self.need_names = grounded

    def failures(self, keys: Iterable[str], seen: Seen | None) -> Iterator[str]:
        """The reason codes (``Check`` values) of the values found (``_extract`` keys)."""
        need = seen.mask_of(self.need_names) if seen is not None and self.need_names else 0
        for item in keys:
            kind, sep, norm = item.partition("\x00")
            if not sep or kind not in self.kinds:
                continue  # a line or word of the text: not an embedded value
            host = _host(kind, norm)
            if host is not None and self.deny_domains and host_matches(host, self.deny_domains):
                yield _DOMAIN
                continue
            if need and seen is not None and seen.lookup(item) & need:
                continue
            if host is not None and self.domains and host_matches(host, self.domains):
                continue
            if host is not None and len(host.rpartition(".")[2]) < 2 and "." in host:
                continue  # a one-character top label ("e.g"): no name anyone can reach
            partial = seen.partial & need if seen is not None else 0
            yield _UNKNOWN if partial else _NOT_GROUNDED


def _host(kind: str, norm: str) -> str | None:
    if kind == "url":
        parts = split_url(norm)
        return parts[1] if parts else None
    if kind == "email":
        return domain_of(norm)
    return norm if kind in _HOSTED else None
