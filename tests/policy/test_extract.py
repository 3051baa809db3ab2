"""Values found in text: every scan linear in its input, and values read as whole tokens."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from guardrails.policy import _codes, _extract, _links, _scan
from guardrails.policy._extract import extract, extract_tokens, iter_keys, key
from guardrails.policy._punct import QUOTES, WIDE
from guardrails.policy.kinds import (
    IBAN_LENGTHS,
    Kind,
    normalise_email,
    normalise_phone,
    normalise_url,
)
from tests._hostile import CALLS, LoudStr, loud

from . import _extract_before
from .test_kinds import _iban, _spaced, domains, emails, generic_ibans, ibans, phones

# -- linear in the input ------------------------------------------------------------


class _Meter:
    """A compiled pattern that counts the characters its matches cover."""

    def __init__(self, pattern: re.Pattern[str], read: list[int]) -> None:
        self.pattern = pattern
        self.read = read

    def _count(self, match: re.Match[str] | None, pos: int) -> re.Match[str] | None:
        self.read[0] += 1 + (0 if match is None else match.end() - pos)
        return match

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self._count(self.pattern.match(text, pos), pos)

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self._count(self.pattern.search(text, pos), pos)

    def finditer(self, text: str, pos: int = 0) -> Iterator[re.Match[str]]:
        for found in self.pattern.finditer(text, pos):
            self._count(found, found.start())
            yield found


def _characters_read(monkeypatch: pytest.MonkeyPatch, text: str) -> int:
    """Characters the scans' patterns covered and handed to the value readers for ``text``."""
    read = [0]
    readers = ("split_url", "normalise_email", "normalise_iban", "normalise_phone")
    for module in (_extract, _links, _codes, _scan):
        for name, value in list(vars(module).items()):
            if isinstance(value, re.Pattern):
                monkeypatch.setattr(module, name, _Meter(value, read))
            elif (
                isinstance(value, dict)
                and value
                and all(isinstance(v, re.Pattern) for v in value.values())
            ):
                monkeypatch.setattr(module, name, {k: _Meter(v, read) for k, v in value.items()})
            elif name in (*readers, "normalise_text", "fold"):
                monkeypatch.setattr(module, name, _counted(value, read))
    extract_tokens(text)
    monkeypatch.undo()
    return read[0]


def _counted(reader: Callable[[str], Any], read: list[int]) -> Callable[[str], Any]:
    def counted(value: str) -> Any:
        read[0] += 1 + len(value)
        return reader(value)

    return counted


# Dense anchors of every scan, and runs a scan might read again from each anchor.
HOSTILE = [
    "x://",
    "a://b",
    "https://a.example/?u=",
    "a@",
    "a@b.",
    "a.b@",
    ".a",
    "x.a ",
    "ab.",
    "a.b.c-d.",
    "0",
    "0 ",
    "0-0.",
    "/",
    "/ ",
    "a/",
    "GB00",
    "GB00 ",
    "DZ05 ",
    "DZ05 1234 ",
    "GB33BUKB20201555555555",
    "+(0",
    "'\u201c@.\u00ab",
    "x://a@b.c/0 ",
]


@pytest.mark.parametrize("unit", HOSTILE)
def test_every_scan_reads_each_character_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch, unit: str
) -> None:
    # Four times the text reads at most about four times the characters, and
    # each character at most a few dozen times, whatever the text repeats.
    # The quadratic scan read 9.4 million characters of 16,000 of "x://".
    small, large = ((unit * (n // len(unit) + 1))[:n] for n in (4_000, 16_000))
    read_small = _characters_read(monkeypatch, small)
    read_large = _characters_read(monkeypatch, large)
    assert read_large <= 4.5 * read_small, (read_small, read_large)
    assert read_large <= 40 * len(large), read_large


def test_the_meter_sees_a_quadratic_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # The old "://" scan, metered the same way, reads the rest of the text
    # from every anchor: the test above would catch it.
    read = [0]
    monkeypatch.setattr(_extract_before, "_URL_TAIL", _Meter(_extract_before._URL_TAIL, read))
    _extract_before.extract("x://" * 1_000)
    assert read[0] > 100 * 4_000


# -- what the linear scans find on ordinary text: what the scans before found ----------

_word = st.one_of(
    st.text(string.ascii_letters, min_size=1, max_size=10),
    st.sampled_from(["straße", "café", "東京", "Ελλάδα", "naïve", "O'Neil", "e.g.", "1,250.00"]),
)
_path = st.text(string.ascii_letters + string.digits + "/=?&-_", max_size=16)
_ordinary_fragment = st.one_of(
    _word,
    _word.map(lambda w: w.capitalize() + "."),
    st.integers(0, 10**12).map(str),
    emails,
    ibans,
    st.builds(lambda i, d: _spaced(i, d), ibans, st.data()),
    phones,
    st.builds(lambda d, p: f"https://{d}/{p}", domains, _path),
    domains,
    st.builds(lambda d, p: f"{d}/{p}", domains, _path),
    st.builds(lambda a, b: f"{a}/{b}", _word, _word),
)
_separator = st.sampled_from([" ", " ", "\n", ", ", ". ", "; ", ": ", " (", ") "])
ordinary_text = st.lists(st.tuples(_ordinary_fragment, _separator), max_size=14).map(
    lambda parts: "".join(f + s for f, s in parts)
)


def _hosts_of_local_parts(text: str, keys: set[str]) -> set[str]:
    """URL and host keys of a run of host characters that "@" or "_" continues."""
    lowered = text.lower()
    junk = set()
    for kind, value in iter_keys(keys):
        host = value if kind == "host" else value.partition("://")[2].rstrip("/")
        if kind in ("url", "host") and (f"{host}@" in lowered or f"{host}_" in lowered):
            junk.add(key(kind, value))
    return junk


def _phones_out_of_longer_tokens(text: str) -> set[str]:
    """Phone keys the scans before read where a word character or a joined word goes on."""
    shape = text.translate(_extract_before._SHAPE)
    scan = _scan.Scan(text, set())
    keys = set()
    for match in _extract_before._PHONE_SHAPE.finditer(shape):
        start, end = match.span()
        start -= 1 if start and shape[start - 1] in "+(" else 0
        number = normalise_phone(text[start:end])
        if number is not None and (scan.joined_before(start) or scan.joined_after(end)):
            keys.add(key(Kind.PHONE, number))
    return keys


def _as_before(text: str, before: set[str], now: set[str]) -> None:
    """``now`` is ``before`` less the scans' named corrections on ordinary text: an
    address's dotted local part read as a host ("jane.doe" of jane.doe@example.com,
    "a.b" of a.b_c@x.com), and a phone number read out of a longer token
    ("1234567" of "/1234567_" in a path, or of "100000 0_@x.com"); plus the IBANs
    of countries outside the registry, which the scans before never read (a run
    of letters and digits passes their checksum once in 97)."""
    added = now - before
    assert all(k == "iban" and v[:2] not in IBAN_LENGTHS for k, v in iter_keys(added)), added
    missing = before - now
    local_hosts = _hosts_of_local_parts(text, missing)
    if local_hosts:
        event("a dotted local part read as a host before")
    joined_phones = missing & _phones_out_of_longer_tokens(text)
    if joined_phones:
        event("a phone number read out of a longer token before")
    tails = _iban_tails(missing, now)
    if tails:
        event("an IBAN read as the tail of a longer one before")
    assert missing <= local_hosts | joined_phones | tails


def _iban_tails(missing: set[str], now: set[str]) -> set[str]:
    """IBAN keys the scans before read out of the middle of a longer IBAN the scans
    now read whole: a group of a spaced IBAN is not another's start ("NL91..." of
    "BG08 NL91 ABNA 0417 1643 00", a Bulgarian IBAN by length and checksum)."""
    found = [v for k, v in iter_keys(now) if k == "iban"]
    return {
        key(k, v)
        for k, v in iter_keys(missing)
        if k == "iban" and any(len(f) > len(v) and f.endswith(v) for f in found)
    }


@given(ordinary_text)
@example("write to jane.doe@example.com today")
@example("100000 0_@0.com ")
def test_on_ordinary_text_the_scans_find_what_the_scans_before_found(text: str) -> None:
    now = extract(text)
    _as_before(text, _extract_before.extract(text), now)
    for kind in sorted({kind for kind, _ in iter_keys(now)}):
        event(f"found {kind}")


@given(ordinary_text)
@example("AE42 KY89 FS0L 8BFX A015 BIH ")  # a group of a spaced IBAN is not another's start
@example("BG08 NL91 ABNA 0417 1643 00 ")  # nor is its second group, when the whole is one
def test_on_ordinary_text_the_words_are_those_found_before(text: str) -> None:
    now = extract_tokens(text)
    # the one addition since: a possessive's name without its 's ("tom" of "Tom's")
    bases = {w[:-2] for w in now if w.endswith(("'s", "’s")) and len(w) > 2}
    _as_before(text, _extract_before.extract_tokens(text), now - (bases - extract(text)))


def test_a_possessive_grounds_the_name_too() -> None:
    found = extract_tokens("Book Tom's birthday dinner with Dana’s team, it's 's")
    assert {"tom's", "tom", "dana’s", "dana", "it's", "it"} <= found
    assert "" not in found  # a lone 's is the word s, never an empty name


# -- whole tokens: quotes, brackets, longer tokens, sentences ----------------------------

# Every quotation mark, bracket and wide sentence mark before a value, and every
# one but an opening ASCII bracket after it ("(" is part of a link).
_marks = st.sampled_from(QUOTES + WIDE + "`()[]{}<>")
_closing = st.sampled_from(QUOTES + WIDE + "`)]}>")


@given(_marks, _closing, emails, st.sampled_from(["", ".", ",", ";", "!"]))
@example("'", "'", "jane@example.com", "")
def test_an_address_in_quotes_or_brackets_of_any_kind_is_found_without_them(
    opening: str, closing: str, address: str, after: str
) -> None:
    found = extract_tokens(f"please write to {opening}{address}{closing}{after} today")
    assert key(Kind.EMAIL, normalise_email(address)) in found  # type: ignore[arg-type]
    assert not any(
        opening in value or closing in value for kind, value in iter_keys(found) if kind == "email"
    )


@given(_marks, _closing, domains, _path, st.booleans())
@example("\u201c", "\u201d", "x.example", "a", True)
def test_a_link_in_quotes_or_brackets_of_any_kind_is_found_without_them(
    opening: str, closing: str, domain: str, path: str, scheme: bool
) -> None:
    link = f"{'https://' if scheme else ''}{domain}/{path}"
    found = extract(f"see {opening}{link}{closing}. Then")
    assert key(Kind.URL, normalise_url(link)) in found  # type: ignore[arg-type]
    assert key(Kind.HOST, domain) in found


def test_a_link_keeps_the_brackets_it_opened() -> None:
    found = extract("see (https://en.wikipedia.org/wiki/Mercury_(planet)).")
    assert key(Kind.URL, "https://en.wikipedia.org/wiki/Mercury_(planet)") in found


_continuations = st.one_of(
    st.text(string.ascii_letters + string.digits + "_", min_size=1, max_size=6),
    st.sampled_from(["é", "ß", "東", "٣"]),
    st.text(string.ascii_letters + string.digits, min_size=1, max_size=4).map("-{}".format),
)


@given(ibans, _continuations, st.booleans())
@example("GB33BUKB20201555555555", "XY77", False)
def test_an_iban_is_not_read_out_of_a_longer_token(iban: str, more: str, before: bool) -> None:
    token = f"{more}{iban}" if before and not more.startswith("-") else f"{iban}{more}"
    found = extract(f"REF:{token} paid")
    assert not any(kind == "iban" for kind, _ in iter_keys(found))
    assert key(Kind.IBAN, iban) in extract(f"REF:{iban}, paid")


@given(emails, _continuations)
def test_an_address_is_not_read_out_of_a_longer_token(address: str, more: str) -> None:
    # More letters, digits or a joined word make a longer label: another address, or none.
    assert key(Kind.EMAIL, normalise_email(address)) not in extract(f"to {address}{more} now")  # type: ignore[arg-type]
    local, _, domain = address.partition("@")
    longer = f"{'x' * (65 - len(local))}{local}@{domain}"
    assert not any(kind == "email" for kind, _ in iter_keys(extract(f"to {longer} now")))


@given(phones, st.sampled_from(["INV-", "A", "x_", "٣"]))
def test_a_phone_number_is_not_read_out_of_a_longer_token(phone: str, prefix: str) -> None:
    assert not any(kind == "phone" for kind, _ in iter_keys(extract(f"ref {prefix}{phone} ok")))


@given(domains, st.sampled_from(["They", "The", "It", "Our", "I"]), st.booleans())
@example("www.example.com", "They", False)
def test_a_host_run_into_the_next_sentence_is_found(domain: str, word: str, scheme: bool) -> None:
    link = f"{'https://' if scheme else ''}{domain}"
    found = extract(f"visit {link}.{word} said so")
    assert key(Kind.URL, f"https://{domain}/") in found
    assert key(Kind.HOST, domain) in found
    assert key(Kind.EMAIL, f"ana@{domain}") in extract(f"mail ana@{domain}.{word} said so")


def test_a_capitalised_top_label_is_not_cut() -> None:
    # "Uk" after "Co": a name written in capitals, not a sentence after a name.
    found = extract("pay at Bank.Co.Uk now")
    assert key(Kind.HOST, "bank.co.uk") in found
    assert key(Kind.HOST, "bank.co") not in found


def test_an_address_after_a_key_or_in_a_query_is_found() -> None:
    found = extract("to=jane@example.com or https://x.example/?email=ana@example.org")
    assert key(Kind.EMAIL, "jane@example.com") in found
    assert key(Kind.EMAIL, "ana@example.org") in found
    assert key(Kind.EMAIL, "o'brien@example.com") in extract("o'brien@example.com")


def test_links_nested_in_a_link_are_each_found() -> None:
    text = "https://a.example/?u=https://b.example/x&v=https://c.example/y"
    found = extract(text)
    assert key(Kind.URL, text) in found
    assert key(Kind.URL, "https://c.example/y") in found
    assert {key(Kind.HOST, f"{h}.example") for h in "abc"} <= found


@given(generic_ibans, st.booleans(), st.sampled_from(["", ".", ", and", " and more", " 12"]))
@example("DZ" + _iban("DZ", "0002100001113000000570")[2:], True, " and more")
def test_an_iban_of_a_country_outside_the_registry_is_found_as_printed(
    iban: str, grouped: bool, after: str
) -> None:
    spelled = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)) if grouped else iban
    assert key(Kind.IBAN, iban) in extract(f"pay to {spelled}{after}")
    assert key(Kind.IBAN, iban) not in extract(f"pay to {iban}X9 now")


# -- the bounds of a token, at the bound and one past it ---------------------------------


def _kinds(text: str) -> set[tuple[str, str]]:
    return set(iter_keys(extract(text)))


def test_a_local_part_of_64_characters_is_read_and_one_of_65_is_not() -> None:
    assert ("email", f"{'a' * 64}@example.com") in _kinds(f"to {'a' * 64}@example.com now")
    assert not any(k == "email" for k, _ in _kinds(f"to {'a' * 65}@example.com now"))
    # Quotes that open it do not count, and a longer run is not cut to its end.
    assert ("email", f"{'a' * 64}@example.com") in _kinds(f"to '{'a' * 64}@example.com' now")


def test_a_domain_label_of_63_characters_is_read_and_one_of_64_is_not() -> None:
    assert ("email", f"ana@{'b' * 63}.com") in _kinds(f"to ana@{'b' * 63}.com now")
    assert not any(k == "email" for k, _ in _kinds(f"to ana@{'b' * 64}.com now"))
    assert not any(k == "email" for k, _ in _kinds(f"to ana@example.{'c' * 64} now"))


def test_a_scheme_of_32_characters_is_read_and_one_of_33_is_not() -> None:
    scheme = "s" * 32
    assert ("host", "x.example") in _kinds(f"see {scheme}://x.example/a now")
    assert not any(k in ("url", "host") for k, _ in _kinds(f"see s{scheme}://x.example/a now"))


def test_a_bare_host_of_253_characters_is_read_and_one_of_254_is_not() -> None:
    name = ".".join(["a" * 63] * 3 + ["b" * 61])  # 253 characters
    assert len(name) == 253
    assert ("host", name) in _kinds(f"see {name} now")
    assert not any(k == "host" for k, _ in _kinds(f"see a{name} now"))


class _HostileText(LoudStr):
    """Text whose every method a scan could call raises (only ``str``'s own code may read it)."""

    __contains__ = loud("contains")
    __getitem__ = loud("getitem")
    __iter__ = loud("iter")
    find = loud("find")
    translate = loud("translate")
    split = loud("split")
    lower = loud("lower")
    isascii = loud("isascii")
    splitlines = loud("splitlines")


def test_a_str_subclass_is_read_as_its_characters_without_its_methods() -> None:
    plain = "mail 'ana@example.com' or see www.example.com.They, IBAN GB33BUKB20201555555555\nx/y"
    CALLS.clear()
    assert extract(_HostileText(plain)) == extract(plain)
    assert extract_tokens(_HostileText(plain)) == extract_tokens(plain)
    assert not CALLS
