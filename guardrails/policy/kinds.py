"""Value kinds: how one argument value is parsed and put in its normal form.

Each kind turns a string into its normalised form, or ``None`` when the string
is not a value of that kind. Two spellings of one value have one normal form:

- ``email``: the local part NFKC, invisible characters removed and
  casefolded; the domain as a ``host`` (``Bob@Ｅxample.COM.`` is
  ``bob@example.com``, ``ana@straße.de`` is ``ana@xn--strae-oqa.de``);
- ``url``: scheme lower-cased, host as a ``host``, default port, fragment and
  the punctuation of the prose around it dropped, the rest as written; a URL
  without a scheme is read as ``https`` (the host is the real one:
  ``https://good.com@evil.com`` has host ``evil.com``);
- ``host``: a domain name as a resolver looks it up: IDNA2008 with UTS #46
  mapping, non-transitional (``_host.py``), without a trailing dot;
- ``iban``: spaces and hyphens removed, upper-cased, the ISO 7064 MOD 97-10
  checksum checked; a country in the ISO 13616 registry (``IBAN_LENGTHS``)
  also has its length, any other the generic shape (two letters, check
  digits 02 to 98, 11 to 30 letters and digits);
- ``phone``: separators removed; ``+`` or ``00`` starts an international
  number (``+`` kept); 7 to 15 digits;
- ``text``: NFKC, invisible characters and NUL removed, casefolded, runs of
  whitespace made one space, stripped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from urllib.parse import urlsplit

from ..text import normalise
from ._host import normalise_host
from ._punct import strip_trailing

__all__ = [
    "Kind",
    "fold",
    "domain_of",
    "host_matches",
    "normalise_email",
    "normalise_host",
    "normalise_iban",
    "normalise_phone",
    "normalise_text",
    "normalise_url",
    "normaliser",
    "split_url",
]


class Kind(StrEnum):
    """The value kinds a parameter rule can declare. The strings are the policy file's."""

    EMAIL = "email"
    URL = "url"
    HOST = "host"
    IBAN = "iban"
    PHONE = "phone"
    TEXT = "text"


_LOCAL = re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]{1,64}")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_SPACE = re.compile(r"\s")
# The characters NFKC makes "@" of: an address may be spelled with them.
_WIDE_AT = str.maketrans({"\uff20": "@", "\ufe6b": "@"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21, "ws": 80, "wss": 443}


def fold(value: str) -> str:
    """``text.normalise``, with a shortcut for ASCII (where it is ``lower()``)."""
    return value.lower() if value.isascii() else normalise(value)


def normalise_text(value: str) -> str:
    return " ".join(fold(value).replace("\x00", "").split())


def normalise_email(value: str) -> str | None:
    text = str.strip(value)
    if not text.isascii():
        text = text.translate(_WIDE_AT)
    local, at, domain = text.rpartition("@")
    if not at:
        return None
    local = fold(local)
    if not _LOCAL.fullmatch(local) or local.startswith(".") or local.endswith("."):
        return None
    host = normalise_host(domain)
    if host is None or "." not in host or host.startswith("["):
        return None
    return f"{local}@{host}"


def domain_of(email: str) -> str:
    """The domain of a normalised email address."""
    return email.rpartition("@")[2]


def split_url(value: str) -> tuple[str, str, str] | None:
    """``(scheme, host, normalised url)`` of a URL, or ``None``."""
    # The punctuation of the prose around a link is dropped, as when a URL is
    # found inside prose ("see https://x.example/a."), so both spellings have
    # one normal form. Nothing but the scheme and the host is folded: a path
    # is case-sensitive.
    text = strip_trailing(str.strip(value))
    if not text or _SPACE.search(text):
        return None
    if "://" not in text:
        if text.startswith("//"):
            text = "https:" + text
        elif ":" in text.partition("/")[0] and not _looks_like_port(text):
            return None  # mailto:, javascript:, data: ... have no host
        else:
            text = "https://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    raw_host = _raw_host(parts.netloc)
    if not _SCHEME.fullmatch(scheme) or not raw_host:
        return None
    host = normalise_host(raw_host)
    if host is None:
        return None
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    path = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return scheme, host, f"{scheme}://{netloc}{path}{query}"


def _raw_host(netloc: str) -> str:
    """The host of a URL's authority as written (``urlsplit``'s ``hostname`` lower-cases it)."""
    host = netloc.rpartition("@")[2]
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.partition(":")[0]


def _looks_like_port(text: str) -> bool:
    head = text.partition("/")[0]
    return head.rpartition(":")[2].isdigit()


def normalise_url(value: str) -> str | None:
    parts = split_url(value)
    return None if parts is None else parts[2]


# The IBAN registry (ISO 13616): country -> length. An IBAN of a registered
# country with another length is not one; a country the registry does not
# (yet) list is held to the generic shape and the checksum.
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
    "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
    "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
    "YE": 30,
}  # fmt: skip
_IBAN = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}")
_IBAN_DROP = str.maketrans("", "", " -\u00a0")


def iban_checksum_ok(iban: str) -> bool:
    digits = "".join(str(int(c, 36)) for c in iban[4:] + iban[:4])
    return int(digits) % 97 == 1


def normalise_iban(value: str) -> str | None:
    text = fold(value).translate(_IBAN_DROP).upper()
    if text.startswith("IBAN"):
        text = text[4:]
    if not text.isascii() or not _IBAN.fullmatch(text):
        return None
    length = IBAN_LENGTHS.get(text[:2])
    if length is None:
        if not "02" <= text[2:4] <= "98":  # the check digits MOD 97-10 can give
            return None
    elif length != len(text):
        return None
    return text if iban_checksum_ok(text) else None


_PHONE_DROP = str.maketrans("", "", " -.()/\u00a0")


def normalise_phone(value: str) -> str | None:
    text = fold(value).strip().translate(_PHONE_DROP)
    if text.startswith("00"):
        text = "+" + text[2:]
    digits = text[1:] if text.startswith("+") else text
    if not digits.isascii() or not digits.isdigit() or not 7 <= len(digits) <= 15:
        return None
    return text


_NORMALISERS: dict[Kind, Callable[[str], str | None]] = {
    Kind.EMAIL: normalise_email,
    Kind.URL: normalise_url,
    Kind.HOST: normalise_host,
    Kind.IBAN: normalise_iban,
    Kind.PHONE: normalise_phone,
    Kind.TEXT: normalise_text,
}


def normaliser(kind: Kind) -> Callable[[str], str | None]:
    return _NORMALISERS[kind]


def host_matches(host: str, domains: frozenset[str]) -> bool:
    """Whether ``host`` is one of ``domains`` or a subdomain of one (normalised forms)."""
    if host in domains:
        return True
    at = host.find(".")
    while at != -1:
        if host[at + 1 :] in domains:
            return True
        at = host.find(".", at + 1)
    return False
