"""Host names in the form a resolver looks them up: IDNA2008 with UTS #46 mapping.

``normalise_host`` maps a name as browsers and resolvers do (UTS #46,
non-transitional processing, STD3 rules): case and width folded, a few
invisible characters dropped, each internationalised label turned into its
``xn--`` A-label. ``straße.de`` and ``strasse.de`` stay two names
(``xn--strae-oqa.de`` and ``strasse.de``), as do labels with a final and a
medial sigma; text casefolding (``ß`` to ``ss``, ``ς`` to ``σ``) would have
made them one. A name that IDNA2008 refuses (an invalid A-label, a joiner
out of context, a disallowed character) is not a host.
"""

from __future__ import annotations

import re

import idna

__all__ = ["MAX_HOST_INPUT", "normalise_host"]

# Longer spellings are refused before any mapping: a name holds at most 253
# characters, and this leaves room for ignorable characters and wide forms.
MAX_HOST_INPUT = 1024

_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
_IPV6_INNER = frozenset("0123456789abcdef:.")


def normalise_host(value: str) -> str | None:
    """A domain name or IP literal in its normal form, or ``None``."""
    host = str.strip(value)
    if not host or len(host) > MAX_HOST_INPUT:
        return None
    if host.startswith("[") and host.endswith("]"):  # an IPv6 literal
        inner = host[1:-1].lower()
        return f"[{inner}]" if inner and _IPV6_INNER.issuperset(inner) else None
    if host.isascii():
        host = host.lower().rstrip(".")
        labels = host.split(".")
        # An LDH name needs no mapping; a label with "--" in third and fourth
        # place (an A-label, or one IDNA2008 reserves) goes to the codec,
        # which checks it.
        if all(_LABEL.fullmatch(label) and label[2:4] != "--" for label in labels):
            return host if len(host) <= 253 else None
    try:
        # Mapped first, so a trailing dot in any spelling ("。") goes as in ASCII.
        mapped = idna.uts46_remap(host, std3_rules=True, transitional=False).rstrip(".")
        ascii_host = idna.encode(mapped).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        return None
    return ascii_host if len(ascii_host) <= 253 else None
