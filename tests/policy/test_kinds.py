"""Value kinds: parsing, normal forms, and values found inside longer text."""

from __future__ import annotations

import string

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from guardrails.policy._extract import (
    extract,
    extract_tokens,
    extract_value,
    iter_keys,
    key,
    number_text,
)
from guardrails.policy.kinds import (
    IBAN_LENGTHS,
    Kind,
    host_matches,
    iban_checksum_ok,
    normalise_email,
    normalise_host,
    normalise_iban,
    normalise_phone,
    normalise_text,
    normalise_url,
    split_url,
)

# -- strategies -------------------------------------------------------------------

_label = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=12)
domains = st.builds(
    lambda labels, tld: ".".join([*labels, tld]),
    st.lists(_label, min_size=1, max_size=3),
    st.sampled_from(["com", "org", "example", "de", "co"]),
)
locals_ = st.text(string.ascii_letters + string.digits + "._+-", min_size=1, max_size=20).filter(
    lambda s: not s.startswith(".") and not s.endswith(".") and ".." not in s
)
emails = st.builds(lambda a, d: f"{a}@{d}", locals_, domains)


def _iban(country: str, body: str) -> str:
    digits = "".join(str(int(c, 36)) for c in body + country + "00")
    check = 98 - int(digits) % 97
    return f"{country}{check:02d}{body}"


ibans = st.sampled_from(sorted(IBAN_LENGTHS)).flatmap(
    lambda cc: st.text(
        string.digits + string.ascii_uppercase,
        min_size=IBAN_LENGTHS[cc] - 4,
        max_size=IBAN_LENGTHS[cc] - 4,
    ).map(lambda body: _iban(cc, body))
)
phones = st.builds(
    lambda plus, cc, rest: f"{'+' if plus else ''}{cc}{rest}",
    st.booleans(),
    st.sampled_from(["1", "33", "49", "351"]),
    st.text(string.digits, min_size=6, max_size=10),
)
filler = st.text(string.ascii_letters + " ,;\n", max_size=80).map(lambda s: f" {s} ")


def _spaced(value: str, data: st.DataObject) -> str:
    """``value`` re-spelled: random case and spaces every four characters."""
    flips = data.draw(st.lists(st.booleans(), min_size=len(value), max_size=len(value)))
    cased = "".join(c.lower() if f else c.upper() for c, f in zip(value, flips, strict=True))
    return " ".join(cased[i : i + 4] for i in range(0, len(cased), 4))


# -- normal forms ---------------------------------------------------------------------


@given(emails)
def test_email_normal_form_is_idempotent_and_case_free(address: str) -> None:
    norm = normalise_email(address)
    assert norm is not None
    assert normalise_email(norm) == norm
    assert normalise_email(address.upper()) == norm
    assert normalise_email(f"  {address}. ".replace(". ", " ")) == norm


def test_email_fullwidth_and_invisible_characters_fold_to_one_form() -> None:
    assert normalise_email("Bob@Ｅxample.COM.") == "bob@example.com"
    assert normalise_email("bo\u200bb@example.com") == "bob@example.com"
    assert normalise_email("bob@bücher.example") == "bob@xn--bcher-kva.example"


@pytest.mark.parametrize(
    "bad", ["", "bob", "@example.com", "bob@", "bob@localhost", "a b@example.com", ".bob@x.com"]
)
def test_not_an_email_is_none(bad: str) -> None:
    assert normalise_email(bad) is None


@given(ibans, st.data())
def test_iban_spacing_and_case_do_not_matter(iban: str, data: st.DataObject) -> None:
    assert normalise_iban(iban) == iban
    assert normalise_iban(_spaced(iban, data)) == iban
    assert normalise_iban(f"IBAN {iban}") == iban


@given(ibans, st.data())
def test_iban_with_one_digit_changed_fails_its_checksum(iban: str, data: st.DataObject) -> None:
    # Every IBAN has digits (its check digits at least); MOD 97-10 catches any one changed.
    at = data.draw(st.sampled_from([i for i, c in enumerate(iban) if c.isdigit()]))
    digit = data.draw(st.sampled_from([d for d in string.digits if d != iban[at]]))
    assert normalise_iban(iban[:at] + digit + iban[at + 1 :]) is None


def test_iban_of_wrong_length_for_its_country_is_refused() -> None:
    assert normalise_iban("DE89 3704 0044 0532 0130 00") == "DE89370400440532013000"
    assert normalise_iban("DE89 3704 0044 0532 0130 000") is None


@given(phones, st.data())
def test_phone_separators_do_not_matter(phone: str, data: st.DataObject) -> None:
    norm = normalise_phone(phone)
    assert norm is not None
    sep = data.draw(st.sampled_from([" ", "-", ".", " "]))
    spelled = sep.join(phone[i : i + 3] for i in range(0, len(phone), 3))
    assert normalise_phone(spelled) == norm
    if phone.startswith("+"):
        assert normalise_phone("00" + phone[1:]) == norm


@pytest.mark.parametrize("bad", ["12345", "phone", "+12345678901234567", "+1 (555) abc-1234"])
def test_not_a_phone_is_none(bad: str) -> None:
    assert normalise_phone(bad) is None


def test_url_normal_form() -> None:
    assert normalise_url("HTTPS://Example.COM:443/a?b=1#frag") == "https://example.com/a?b=1"
    assert normalise_url("example.com/news") == "https://example.com/news"
    assert normalise_url("http://example.com") == "http://example.com/"
    assert split_url("https://good.example@evil.example/x") == (
        "https",
        "evil.example",
        "https://evil.example/x",
    )
    assert normalise_url("javascript:alert(1)") is None
    assert normalise_url("mailto:bob@example.com") is None
    assert normalise_url("https://exa mple.com") is None


@given(domains, st.text(string.ascii_letters + string.digits + "/-_", max_size=20))
def test_url_normal_form_is_idempotent(domain: str, path: str) -> None:
    norm = normalise_url(f"https://{domain.upper()}/{path}")
    assert norm is not None
    assert normalise_url(norm) == norm
    assert split_url(norm)[1] == domain  # type: ignore[index]


@given(st.text(max_size=60))
def test_text_normal_form_is_idempotent(text: str) -> None:
    norm = normalise_text(text)
    assert normalise_text(norm) == norm
    assert "  " not in norm and norm == norm.strip()


def test_host_matching_is_by_whole_labels() -> None:
    allowed = frozenset({"example.com"})
    assert host_matches("example.com", allowed)
    assert host_matches("mail.example.com", allowed)
    assert not host_matches("badexample.com", allowed)
    assert not host_matches("example.com.evil.net", allowed)
    assert normalise_host("EXAMPLE.com.") == "example.com"


# -- values inside longer text ----------------------------------------------------------


@given(emails, filler, filler)
def test_an_email_inside_text_is_found_in_its_normal_form(address: str, a: str, b: str) -> None:
    found = extract(f"{a}{address.upper()}{b}")
    assert key(Kind.EMAIL, normalise_email(address)) in found


@given(ibans, filler, filler, st.data())
def test_an_iban_inside_text_is_found_however_spaced(
    iban: str, a: str, b: str, data: st.DataObject
) -> None:
    found = extract(f"{a}{_spaced(iban, data)}{b}")
    assert key(Kind.IBAN, iban) in found


@given(domains, st.text(string.ascii_letters + string.digits + "/=?&", max_size=20), filler, filler)
def test_a_url_inside_text_is_found_with_its_host(domain: str, path: str, a: str, b: str) -> None:
    url = f"https://{domain}/{path}"
    found = extract(f"{a}{url}{b}")
    assert key(Kind.URL, normalise_url(url)) in found
    assert key(Kind.HOST, domain) in found


@given(phones, filler, filler)
def test_a_phone_inside_text_is_found(phone: str, a: str, b: str) -> None:
    found = extract(f"{a}{phone}{b}")
    assert key(Kind.PHONE, normalise_phone(phone)) in found


def test_addresses_inside_urls_and_hosts_inside_addresses_are_not_invented() -> None:
    found = extract("write to bob@mail.example.com or see https://x.example/p?to=a@b.example")
    assert key(Kind.URL, "https://mail.example.com/") not in found
    assert key(Kind.EMAIL, "bob@mail.example.com") in found
    assert key(Kind.HOST, "x.example") in found


def test_a_bare_host_with_a_path_is_read_as_a_url() -> None:
    found = extract("please open news.example/today, thanks")
    assert key(Kind.URL, "https://news.example/today") in found


def test_words_and_numbers_of_trusted_text() -> None:
    found = extract_tokens("Pay 1,250.00 EUR to Tr0ub4dor&3 now")
    assert key(Kind.TEXT, "1250") in found
    assert key(Kind.TEXT, "tr0ub4dor&3") in found
    assert number_text(1250.0) == number_text(1250) == "1250"
    assert number_text(True) is None and number_text(float("nan")) is None


def test_values_inside_structured_results_are_found_at_any_depth() -> None:
    value = {"items": [{"contact": {"mail": "Alice@Friends.example"}}], "total": 2.0}
    found = extract_value(value)
    assert key(Kind.EMAIL, "alice@friends.example") in found
    assert key(Kind.TEXT, "2") in found


_fragments = st.one_of(
    emails,
    ibans,
    phones,
    domains.map(lambda d: f"https://{d}/x"),
    domains,
    st.text(max_size=20),
    st.sampled_from(["@", "://", ".", "\n", "  ", "/", "+", "00", "(", "ＡＢ", "\u200b"]),
)


@given(st.lists(_fragments, max_size=12).map(" ".join))
@example("0@0.com \u00b4/")  # NFKC makes a space inside a slashed word
def test_every_value_extracted_is_in_the_normal_form_an_argument_would_have(text: str) -> None:
    found = extract(text)
    normalisers = {
        "email": normalise_email,
        "url": normalise_url,
        "host": normalise_host,
        "iban": normalise_iban,
        "phone": normalise_phone,
    }
    for kind, value in iter_keys(found):
        if kind in normalisers:
            event(f"found {kind}")
            assert normalisers[kind](value) == value, (kind, value)
        else:
            assert kind == "text"
            assert normalise_text(value) == value, value


def test_the_property_above_reaches_every_kind() -> None:
    text = "a@b.example https://c.example/x d.example/y GB33BUKB20201555555555 +49 30 1234567\nz"
    kinds = {kind for kind, _ in iter_keys(extract(text))}
    assert kinds == {"email", "url", "host", "iban", "phone", "text"}


# -- countries outside the registry: the checksum and the generic shape -----------------

unregistered = st.sampled_from(["DZ", "AO", "CM", "MA", "SN", "ZZ"]).filter(
    lambda cc: cc not in IBAN_LENGTHS
)
generic_ibans = st.builds(
    _iban, unregistered, st.text(string.digits + string.ascii_uppercase, min_size=11, max_size=30)
)


@given(generic_ibans, st.data())
def test_an_iban_outside_the_registry_is_valid_by_its_checksum_and_shape(
    iban: str, data: st.DataObject
) -> None:
    assert normalise_iban(iban) == iban
    assert normalise_iban(_spaced(iban, data)) == iban
    at = data.draw(st.sampled_from([i for i, c in enumerate(iban) if c.isdigit()]))
    digit = data.draw(st.sampled_from([d for d in string.digits if d != iban[at]]))
    assert normalise_iban(iban[:at] + digit + iban[at + 1 :]) is None


def test_an_iban_outside_the_registry_near_misses() -> None:
    valid = _iban("DZ", "0123456789ABCDEFGHIJ")
    assert normalise_iban(valid) == valid
    assert normalise_iban(_iban("DZ", "0123456789")) is None  # 14 characters: under the shape
    assert normalise_iban(_iban("DZ", "0" * 30)) is not None  # 34: the longest shape
    assert normalise_iban(_iban("DZ", "0" * 31)) is None  # 35
    # Check digits 00, 01 and 99 are never computed by MOD 97-10 (00 and 97 give
    # the same remainder), so a string holding them is not an IBAN.
    for computed, spelled in ((97, "00"), (98, "01"), (2, "99")):
        body = next(
            b
            for b in (f"{n:018d}" for n in range(100_000))
            if _iban("DZ", b)[2:4] == f"{computed:02d}"
        )
        candidate = f"DZ{spelled}{body}"
        assert iban_checksum_ok(candidate)  # the checksum alone would take it
        assert normalise_iban(candidate) is None
    # A registered country keeps its length: the generic shape does not apply to it.
    assert normalise_iban(_iban("DE", "37040044053201300")) is None
    assert normalise_iban(_iban("DE", "370400440532013000")) == "DE89370400440532013000"


def test_countries_limit_an_iban_outside_the_registry_too() -> None:
    from guardrails.policy import Check, Param

    valid = _iban("DZ", "0123456789ABCDEFGHIJ")
    assert Param("pay", "iban", kind="iban").check(valid, None, None) == []
    rule = Param("pay", "iban", kind="iban", countries=["DE"])
    assert rule.check(valid, None, None) == [Check.COUNTRY]
    assert Param("pay", "iban", kind="iban", countries=["dz"]).check(valid, None, None) == []


@given(generic_ibans, filler, filler)
def test_an_iban_outside_the_registry_written_as_one_run_is_found_in_text(
    iban: str, a: str, b: str
) -> None:
    # The same normal form as the argument's: the user's own IBAN grounds it.
    found = extract(f"{a}{iban.lower()}{b}")
    assert key(Kind.IBAN, normalise_iban(iban)) in found


def test_an_iban_outside_the_registry_is_not_read_out_of_a_longer_token_or_spacing() -> None:
    iban = _iban("DZ", "0123456789ABCDEFGHIJ")
    assert key(Kind.IBAN, iban) in extract(f"pay to {iban}, thanks")
    assert key(Kind.IBAN, iban) not in extract(f"ref:{iban}XY77")
    assert key(Kind.IBAN, iban) not in extract(f"X{iban} and more")
    bad = iban[:-1] + ("0" if iban[-1] != "0" else "1")  # one character changed
    assert not [k for k in iter_keys(extract(f"pay {bad}")) if k[0] == Kind.IBAN]


def test_a_grounded_iban_outside_the_registry_passes_only_when_the_user_gave_it() -> None:
    from guardrails import Guardrails, Outcome, tool
    from guardrails.policy import Param, Policy

    @tool
    def pay(iban: str) -> str:
        """Pay."""
        return "paid"

    mine, other = _iban("DZ", "0123456789ABCDEFGHIJ"), _iban("DZ", "9876543210ABCDEFGHIJ")
    rails = Guardrails(
        [pay], policy=Policy(params=(Param("pay", "iban", kind="iban", grounded_in=["user"]),))
    )
    turn = rails.turn(session="s")
    turn.pre_turn(f"please pay {mine.lower()} today")
    assert turn.call("pay", {"iban": mine}).outcome is Outcome.OK
    assert turn.call("pay", {"iban": other}).outcome is Outcome.INVALID_ARGS
