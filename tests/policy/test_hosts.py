"""Host names are normalised as a resolver looks them up (IDNA2008, UTS #46 non-transitional)."""

from __future__ import annotations

import string

import idna
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, tool
from guardrails.policy import Check, Param, Policy
from guardrails.policy._extract import extract, key
from guardrails.policy.kinds import (
    Kind,
    normalise_email,
    normalise_host,
    normalise_url,
    split_url,
)

from .test_rules import CTX

# Pairs of names that text casefolding makes one and IDNA2008 keeps apart.
DISTINCT = [
    ("straße.de", "strasse.de"),
    ("STRASSE.de", "Straße.de"),
    ("ας.gr", "ασ.gr"),  # final and medial sigma
    ("ΑΣ.gr", "ας.gr"),  # a capital sigma maps to the medial one
    ("faß.de", "fass.de"),
]


@pytest.mark.parametrize(("one", "other"), DISTINCT)
def test_names_idna2008_tells_apart_have_different_normal_forms(one: str, other: str) -> None:
    assert normalise_host(one) != normalise_host(other)
    assert normalise_email(f"ana@{one}") != normalise_email(f"ana@{other}")
    assert normalise_url(f"https://{one}/x") != normalise_url(f"https://{other}/x")
    assert normalise_host(one) is not None and normalise_host(other) is not None


def test_the_normal_form_is_the_resolvers_a_label() -> None:
    assert normalise_host("Straße.DE.") == "xn--strae-oqa.de"
    assert normalise_email("Ana@Straße.de") == "ana@xn--strae-oqa.de"
    assert normalise_email("Straße@example.com") == "strasse@example.com"  # the local part folds
    assert split_url("https://Straße.de/Weg") == (
        "https",
        "xn--strae-oqa.de",
        "https://xn--strae-oqa.de/Weg",
    )
    assert normalise_host("ΑΣ.gr") == "xn--mxa0b.gr"


@pytest.mark.parametrize(
    "bad",
    [
        "xn--zz.example",  # not a valid A-label
        "exa\u200dmple.com",  # a joiner out of context
        "ab--cd.\u00e9.com",  # hyphens in third and fourth place beside a U-label
        "exa_mple.com",
        "a..b.com",
        "\u2024.com",  # ONE DOT LEADER: NFKC would make it a dot, IDNA refuses it
        "x" * 1025 + ".com",
    ],
)
def test_names_idna2008_refuses_are_not_hosts(bad: str) -> None:
    assert normalise_host(bad) is None


def _idna(name: str) -> str | None:
    try:
        mapped = idna.uts46_remap(name, std3_rules=True, transitional=False).rstrip(".")
        return idna.encode(mapped).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        return None


_ldh = st.text(string.ascii_letters + string.digits + "-", min_size=1, max_size=8)
_unicode_label = st.text(
    st.characters(codec="utf-8", categories=["Ll", "Lu", "Lo", "Nd", "Mn"]),
    min_size=1,
    max_size=6,
)
# Labels the codec maps, and near misses it refuses (a bad A-label, reserved
# hyphens, a joiner, "_", a leading hyphen, an empty label).
_edge_label = st.sampled_from(
    ["xn--strae-oqa", "xn--zz", "ab--cd", "exa\u200dmple", "a_b", "-a", "", "ß", "ς", "Σ"]
)
hosts = st.lists(st.one_of(_ldh, _unicode_label, _edge_label), min_size=1, max_size=4).map(".".join)


@given(st.one_of(hosts, st.lists(_ldh, min_size=1, max_size=4).map(".".join)))
@example("ab--cd.com")
@example("Xn--Strae-Oqa.De")
def test_every_host_is_what_the_idna_codec_makes_of_it(name: str) -> None:
    # The ASCII shortcut and the codec agree: a name is one normal form whichever path reads it.
    expected = _idna(name)
    event("the codec refuses it" if expected is None else "the codec maps it")
    if expected is not None and len(expected) > 253:
        expected = None
    assert normalise_host(name) == expected
    if expected is not None:
        assert normalise_host(expected) == expected


@tool
def send(to: str) -> str:
    """Send mail."""
    return "sent"


@pytest.mark.parametrize(("typed", "sent"), [pair for p in DISTINCT for pair in (p, p[::-1])])
def test_an_address_the_user_typed_does_not_ground_its_idna_twin(typed: str, sent: str) -> None:
    rails = Guardrails(
        [send], policy=Policy(params=(Param("send", "to", kind="email", grounded_in=["user"]),))
    )
    turn = rails.turn(session="s")
    turn.pre_turn(f"mail ana@{typed} please")
    assert turn.call("send", {"to": f"ana@{typed}"}).ok
    assert turn.call("send", {"to": f"ana@{sent}"}).outcome is Outcome.INVALID_ARGS


@pytest.mark.parametrize(("allowed", "other"), DISTINCT)
def test_a_domain_rule_admits_only_its_own_name(allowed: str, other: str) -> None:
    for kind, value in (("email", "ana@{}"), ("url", "https://{}/x"), ("host", "{}")):
        rule = Param("t", "p", kind=kind, domains=[allowed])
        assert rule.check(value.format(allowed), CTX, None) == []
        assert rule.check(value.format(f"mail.{allowed}"), CTX, None) == []
        assert rule.check(value.format(other), CTX, None) == [Check.DOMAIN]


def test_a_name_found_in_text_has_the_arguments_normal_form() -> None:
    found = extract("write to ana@straße.de or see https://straße.de/weg")
    assert key(Kind.EMAIL, "ana@xn--strae-oqa.de") in found
    assert key(Kind.URL, "https://xn--strae-oqa.de/weg") in found
    assert key(Kind.EMAIL, "ana@strasse.de") not in found


def test_a_spelling_of_1024_characters_is_read_and_one_of_1025_is_not() -> None:
    # Soft hyphens map to nothing: the name is short, its spelling long.
    assert normalise_host("a" + "\u00ad" * 1019 + ".com") == "a.com"
    assert normalise_host("a" + "\u00ad" * 1020 + ".com") is None


def test_a_name_of_253_characters_is_a_host_and_one_of_254_is_not() -> None:
    name = ".".join(["a" * 63] * 3 + ["b" * 61])
    assert normalise_host(name) == name
    assert normalise_host(name + "b") is None
    assert normalise_host("ä" + name[1:]) is None  # its A-label is longer still
