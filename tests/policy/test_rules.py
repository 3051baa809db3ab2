"""Parameter rules: each check on its own, and the algebra (deny wins, order does not matter)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, TurnContext, Verdict, tool
from guardrails.errors import ConfigurationError
from guardrails.policy import Check, Param, Policy
from guardrails.policy.kinds import Kind


class Seen:
    """A provenance record with fixed answers: value -> mask."""

    def __init__(
        self, masks: dict[tuple[str, str], int], trusted: int = 0b01, partial: int = 0
    ) -> None:
        self.masks = masks
        self.trusted = trusted
        self.partial = partial

    def find(self, kind: str, value: str) -> int:
        return self.masks.get((kind, value), 0)

    def lookup(self, item: str) -> int:
        kind, _, value = item.partition("\x00")
        return self.find(kind, value)

    def mask_of(self, names: frozenset[str]) -> int:
        bits = {"user": 0b01, "inbox": 0b10}
        return sum(bits[n] for n in names)


CTX = TurnContext(values={"limit": 100, "payees": ["DE89 3704 0044 0532 0130 00"]})
IBAN = "DE89370400440532013000"


@pytest.mark.parametrize(
    ("options", "value", "failed"),
    [
        ({"values": ["a", "b"]}, "a", []),
        ({"values": ["a", "b"]}, "c", [Check.VALUES]),
        ({"values": [1, 2]}, 1.0, []),
        ({"values": [1, 2]}, True, [Check.VALUES]),
        ({"deny_values": ["root"]}, "root", [Check.DENIED]),
        ({"values_from": "payees", "kind": "iban"}, IBAN.lower(), []),
        ({"values_from": "payees", "kind": "iban"}, "GB33BUKB20201555555555", [Check.VALUES]),
        ({"values_from": "missing"}, "x", [Check.VALUES]),
        ({"pattern": r"[A-Z]{3}"}, "EUR", []),
        ({"pattern": r"[A-Z]{3}"}, "EURO", [Check.PATTERN]),
        ({"pattern": r"[A-Z]{3}"}, 3, [Check.TYPE]),
        ({"min": 1, "max": 10}, 10, []),
        ({"min": 1, "max": 10}, 0.5, [Check.MIN]),
        ({"min": 1, "max": 10}, 11, [Check.MAX]),
        ({"max": 10}, "5", [Check.TYPE]),
        ({"max": 10}, True, [Check.TYPE]),
        ({"max_from": "limit"}, 100, []),
        ({"max_from": "limit"}, 101, [Check.MAX]),
        ({"max_from": "missing"}, 1, [Check.MAX]),
        ({"max": 50, "max_from": "limit"}, 60, [Check.MAX]),
        ({"kind": "email"}, "not an address", [Check.KIND]),
        ({"kind": "email"}, 42, [Check.TYPE]),
        ({"kind": "email", "domains": ["example.com"]}, "A@Mail.Example.com", []),
        ({"kind": "email", "domains": ["example.com"]}, "a@evil.net", [Check.DOMAIN]),
        ({"kind": "email", "deny_domains": ["evil.net"]}, "a@x.evil.net", [Check.DOMAIN]),
        ({"kind": "url", "domains": ["docs.example"]}, "https://docs.example/a", []),
        (
            {"kind": "url", "domains": ["docs.example"]},
            "https://docs.example@evil.net/",
            [Check.DOMAIN],
        ),
        ({"kind": "url"}, "ftp://docs.example/a", [Check.SCHEME]),
        ({"kind": "url", "schemes": ["https"]}, "http://docs.example/a", [Check.SCHEME]),
        ({"kind": "host", "deny_domains": ["evil.net"]}, "EVIL.net.", [Check.DOMAIN]),
        ({"kind": "iban", "countries": ["DE"]}, IBAN, []),
        ({"kind": "iban", "countries": ["FR"]}, IBAN, [Check.COUNTRY]),
        ({"kind": "phone", "prefixes": ["+49"]}, "+49 30 1234567", []),
        ({"kind": "phone", "prefixes": ["+49"]}, "+33 1 23 45 67 89", [Check.PREFIX]),
        ({"kind": "text", "values": ["Lunch  Tomorrow"]}, "lunch tomorrow", []),
    ],
)
def test_each_check_on_its_own(options: dict[str, Any], value: Any, failed: list[Check]) -> None:
    rule = Param("t", "p", **options)
    assert sorted(rule.check(value, CTX, None)) == sorted(failed)


@pytest.mark.parametrize(
    ("options", "masks", "failed"),
    [
        ({"grounded_in": ["user"]}, {("email", "a@x.com"): 0b01}, []),
        ({"grounded_in": ["user"]}, {("email", "a@x.com"): 0b10}, [Check.GROUNDED]),
        ({"grounded_in": ["user"]}, {}, [Check.GROUNDED]),
        ({"grounded_in": ["inbox"]}, {("email", "a@x.com"): 0b10}, []),
        ({"not_only_untrusted": True}, {("email", "a@x.com"): 0b10}, [Check.UNTRUSTED]),
        ({"not_only_untrusted": True}, {("email", "a@x.com"): 0b11}, []),
        ({"not_only_untrusted": True}, {}, []),
    ],
)
def test_provenance_checks_on_their_own(
    options: dict[str, Any], masks: dict[tuple[str, str], int], failed: list[Check]
) -> None:
    rule = Param("t", "p", kind="email", **options)
    assert rule.check("A@X.com", CTX, Seen(masks)) == failed


USER_PARTIAL, INBOX_PARTIAL = 0b01, 0b10  # the trusted or the untrusted labels may miss some
A = ("email", "a@x.com")


@pytest.mark.parametrize(
    ("options", "masks", "partial", "failed"),
    [
        # Found where it must be: a pass whatever the record missed.
        ({"grounded_in": ["user"]}, {A: 0b01}, USER_PARTIAL | INBOX_PARTIAL, []),
        # Not found, and the trusted labels are whole: plainly not grounded.
        ({"grounded_in": ["user"]}, {}, INBOX_PARTIAL, [Check.GROUNDED]),
        ({"grounded_in": ["user"]}, {A: 0b10}, INBOX_PARTIAL, [Check.GROUNDED]),
        # Not found where the labels may be missing: refused, unknown.
        ({"grounded_in": ["user"]}, {}, USER_PARTIAL, [Check.UNKNOWN]),
        ({"grounded_in": ["inbox"]}, {}, INBOX_PARTIAL, [Check.UNKNOWN]),
        ({"grounded_in": ["inbox"]}, {}, USER_PARTIAL, [Check.GROUNDED]),
        # Unseen while the untrusted labels may be missing: perhaps seen there.
        ({"not_only_untrusted": True}, {}, INBOX_PARTIAL, [Check.UNKNOWN]),
        ({"not_only_untrusted": True}, {}, USER_PARTIAL, []),
        # Seen untrusted only: untrusted, or unknown when a trusted label may be missing.
        ({"not_only_untrusted": True}, {A: 0b10}, INBOX_PARTIAL, [Check.UNTRUSTED]),
        ({"not_only_untrusted": True}, {A: 0b10}, USER_PARTIAL, [Check.UNKNOWN]),
        ({"not_only_untrusted": True}, {A: 0b11}, USER_PARTIAL | INBOX_PARTIAL, []),
    ],
)
def test_a_partial_record_never_passes_what_it_may_have_refused(
    options: dict[str, Any], masks: dict[tuple[str, str], int], partial: int, failed: list[Check]
) -> None:
    rule = Param("t", "p", kind="email", **options)
    assert rule.check("a@x.com", CTX, Seen(masks, partial=partial)) == failed


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "postcode"}, "kind must be one of"),
        ({"domains": ["x.com"]}, "domains needs kind"),
        ({"kind": "iban", "schemes": ["https"]}, "schemes needs kind url"),
        ({"pattern": "("}, "does not compile"),
        ({"min": 5, "max": 1}, "min is greater than max"),
        ({"min": float("nan")}, "min must be a finite number"),
        ({"kind": "email", "values": ["nope"]}, "is not a valid email"),
        ({"kind": "phone", "prefixes": ["49"]}, r"must be \+ and digits"),
        ({"grounded_in": []}, "at least one source"),
        ({"grounded_in": "user"}, "list of strings"),
        ({"outcome": "ok"}, "outcome must be"),
        ({"values": "abc"}, "values must be a list"),
    ],
)
def test_a_rule_that_contradicts_itself_fails_when_built(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        Param("pay", "iban", **options)
    assert "policy:pay.iban" in str(info.value)


# -- the algebra, at the tool_call choke-point -----------------------------------------------


@tool
def pay(iban: str, amount: float, note: str = "") -> str:
    """Pay."""
    return "paid"


CALL = {"iban": IBAN, "amount": 50.0, "note": "rent"}
PASSING = [
    Param("pay", "iban", kind="iban", countries=["DE"], name="p1"),
    Param("pay", "amount", max=100, name="p2"),
    Param("pay", "note", pattern="[a-z]+", name="p3"),
    Param("pay", "amount", min=1, outcome="limit", name="p4"),
]
REJECTING = [
    Param("pay", "iban", kind="iban", countries=["FR"], name="r1"),
    Param("pay", "amount", max=10, outcome="limit", name="r2"),
    Param("pay", "note", values=["gift"], outcome="unavailable", name="r3"),
    Param("pay", "iban", deny_values=[IBAN], name="r4"),
]
_SEVERITY = {Outcome.INVALID_ARGS: 0, Outcome.LIMIT: 1, Outcome.UNAVAILABLE: 2}


@given(st.lists(st.sampled_from(PASSING + REJECTING), unique=True, min_size=1), st.randoms())
def test_deny_wins_and_order_does_not_matter(rules: list[Param], rnd: Any) -> None:
    shuffled = list(rules)
    rnd.shuffle(shuffled)
    results = []
    for order in (rules, shuffled):
        rails = Guardrails([pay], policy=Policy(params=tuple(order)))
        results.append(rails.call("pay", CALL))
    first, second = results
    assert (first.outcome, first.verdict, first.params) == (
        second.outcome,
        second.verdict,
        second.params,
    )
    rejecting = [r for r in rules if r in REJECTING]
    if rejecting:
        assert first.verdict is Verdict.REJECT
        assert first.outcome is max((Outcome(r.outcome) for r in rejecting), key=_SEVERITY.get)
        assert {v.guard for v in first.verdicts if v.verdict is Verdict.REJECT} == {
            r.rule_name for r in rejecting
        }
    else:
        assert first.outcome is Outcome.OK and first.verdict is Verdict.PASS


def test_a_rejection_names_the_parameter_never_the_value() -> None:
    rails = Guardrails([pay], policy=Policy(params=(REJECTING[0],)))
    result = rails.call("pay", CALL)
    assert result.outcome is Outcome.INVALID_ARGS and result.params == ("iban",)
    assert IBAN not in result.content and "DE89" not in result.content
    record = next(v for v in result.verdicts if v.guard == "r1")
    assert record.reason == "country_not_allowed"
    assert record.evidence == {"rule": "r1", "param": "iban", "checks": ["country_not_allowed"]}


def test_nested_paths_and_every_item_of_a_list_are_checked() -> None:
    @tool
    def invite(event: dict[str, Any], attendees: list[str]) -> str:
        """Invite."""
        return "ok"

    policy = Policy(
        params=(
            Param("invite", "attendees.*", kind="email", domains=["corp.example"]),
            Param("invite", "event.room", values=["blue", "red"]),
        )
    )
    rails = Guardrails([invite], policy=policy)
    ok = {"event": {"room": "blue"}, "attendees": ["a@corp.example", "B@CORP.example"]}
    assert rails.call("invite", ok).outcome is Outcome.OK
    bad_item = {"event": {"room": "blue"}, "attendees": ["a@corp.example", "x@evil.net"]}
    assert rails.call("invite", bad_item).params == ("attendees",)
    bad_room = {"event": {"room": "green"}, "attendees": []}
    assert rails.call("invite", bad_room).params == ("event",)
    assert rails.call("invite", {"event": {}, "attendees": []}).outcome is Outcome.OK


def test_kinds_enum_holds_the_policy_file_strings() -> None:
    assert [k.value for k in Kind] == ["email", "url", "host", "iban", "phone", "text"]
    assert {c.value for c in Check} == {
        "wrong_type", "not_a_valid_value", "not_allowed", "denied", "pattern",
        "below_minimum", "above_maximum", "domain_not_allowed", "scheme_not_allowed",
        "country_not_allowed", "prefix_not_allowed", "not_grounded", "untrusted_only",
        "provenance_unknown", "timeout", "embedded_not_grounded", "word_not_grounded",
        "template_not_matched",
    }  # fmt: skip


# -- hostile values ------------------------------------------------------------------------


class _HostileStr(str):
    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")


class _HostileInt(int):
    def __ge__(self, other: object) -> bool:
        raise RuntimeError("ge")

    def __le__(self, other: object) -> bool:
        raise RuntimeError("le")


@pytest.mark.parametrize(
    ("options", "value"),
    [
        ({"values": ["a"]}, _HostileStr("a")),
        ({"deny_values": ["root"]}, _HostileStr("x")),
        ({"kind": "email"}, _HostileStr("a@b.example")),
        ({"pattern": "a"}, _HostileStr("a")),
        ({"min": 0, "max": 10}, _HostileInt(5)),
        ({"values": [1]}, [1]),
        ({"values": [1]}, {"a": 1}),
        ({"grounded_in": ["user"]}, _HostileStr("a")),
        ({"max": 10}, float("inf")),
        ({"min": 0}, float("nan")),
    ],
)
def test_hostile_or_odd_values_are_refused_never_raise(options: dict[str, Any], value: Any) -> None:
    rule = Param("t", "p", **options)
    failed = rule.check(value, CTX, Seen({}))
    assert failed and set(failed) <= {Check.TYPE, Check.MIN, Check.MAX, Check.KIND}


def test_every_subset_of_rules_in_two_orders_agrees() -> None:
    """The algebra exhaustively: all 256 subsets of the eight rules, forwards and backwards."""
    from itertools import combinations

    everything = PASSING + REJECTING
    seen_outcomes = set()
    for size in range(1, len(everything) + 1):
        for subset in combinations(everything, size):
            results = [
                Guardrails([pay], policy=Policy(params=order)).call("pay", CALL)
                for order in (subset, subset[::-1])
            ]
            assert results[0][2:4] == results[1][2:4]  # outcome and content
            rejecting = [r for r in subset if r in REJECTING]
            assert (results[0].verdict is Verdict.REJECT) == bool(rejecting)
            seen_outcomes.add(results[0].outcome)
    assert seen_outcomes == {Outcome.OK, Outcome.INVALID_ARGS, Outcome.LIMIT, Outcome.UNAVAILABLE}
