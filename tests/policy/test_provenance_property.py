"""Whatever the bounds did, a value seen only in untrusted results is never admitted
where a rule needs a trusted source.

Generated sessions interleave the user's input, trusted and untrusted results
and payments, over several tenants and sessions, with bounds small enough to be
reached in most of them. A reference remembers every label exactly; the engine
may forget, but never into a pass: a refusal of the reference is a refusal of
the engine, and where the engine's record is whole the two agree exactly.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, tool
from guardrails.policy import Param, Policy
from guardrails.policy.attach import installed
from guardrails.store import MemoryStore
from tests._examples import examples


def _iban(n: int) -> str:
    """A valid German IBAN (ISO 13616 check digits) from a number."""
    bban = f"{37040044:08d}{n:010d}"
    check = 98 - int(bban + "131400") % 97  # "DE00" moved to the end, letters as numbers
    return f"DE{check:02d}{bban}"


IBANS = [_iban(1_000 + i) for i in range(6)]
# Most steps in one session of one tenant (the victim), the rest around it.
TENANTS = ["t0", "t0", "t0", "t1", "t2"]
SESSIONS = ["s0", "s0", "s1"]


@tool
def payees(text: str) -> str:
    """The user's payees (trusted)."""
    return text


@tool
def inbox(text: str) -> str:
    """Mail anyone can write (untrusted)."""
    return text


@tool
def pay_grounded(iban: str) -> str:
    """Pay an account the user or the payee list gave."""
    return ""


@tool
def pay_not_untrusted(iban: str) -> str:
    """Pay an account not seen only in untrusted results."""
    return ""


POLICY = Policy(
    params=(
        Param("pay_grounded", "iban", kind="iban", grounded_in=["user", "payees"]),
        Param("pay_not_untrusted", "iban", kind="iban", not_only_untrusted=True),
    ),
    trusted=frozenset({"payees"}),
)

_where = st.tuples(st.sampled_from(TENANTS), st.sampled_from(SESSIONS))
_ibans = st.lists(st.sampled_from(IBANS), max_size=2)
# Filler values take room in the record: little in what the user types, much in results.
_said = st.one_of(
    st.tuples(st.just("user"), _where, _ibans, st.integers(0, 1)),
    st.tuples(st.sampled_from(["payees", "inbox", "inbox"]), _where, _ibans, st.integers(0, 8)),
)
_paid = st.tuples(st.just("pay"), _where, st.sampled_from(IBANS), st.just(0))
_session = st.fixed_dictionaries(
    {
        "steps": st.lists(st.one_of(_said, _paid), min_size=1, max_size=30),
        "max_values": st.integers(1, 6),
        "max_sessions": st.integers(1, 3),
        "max_tenants": st.integers(1, 3),
        "store": st.booleans(),
    }
)


def _text(ibans: list[str], filler: int, step: int) -> str:
    fill = " ".join(f"f{step}x{i}@fill.example" for i in range(filler))
    return f"{' '.join(ibans)} {fill}".strip() or "nothing"


def _run(session: dict[str, Any], tally: Counter[str]) -> None:
    rails = Guardrails([payees, inbox, pay_grounded, pay_not_untrusted])
    limits = {k: session[k] for k in ("max_values", "max_sessions", "max_tenants")}
    rails.load_policy(POLICY, store=MemoryStore() if session["store"] else None, **limits)
    found = installed(rails)
    assert found is not None
    trusted: dict[Any, set[str]] = defaultdict(set)  # the reference: every label, exactly
    untrusted: dict[Any, set[str]] = defaultdict(set)
    bound = False
    for n, (what, (tenant, name), value, filler) in enumerate(session["steps"]):
        turn = rails.turn(tenant=tenant, session=name)
        where = (tenant, name)
        if what == "user":
            turn.pre_turn(_text(value, filler, n))
            trusted[where].update(value)
        elif what in ("payees", "inbox"):
            assert turn.call(what, {"text": _text(value, filler, n)}).ok
            (trusted if what == "payees" else untrusted)[where].update(value)
        else:
            partial = found.ledgers.ledger(turn, turn.context).partial
            bound = bound or partial != 0
            tally[_kind_of(partial, found.ledgers.sources)] += 1
            tally["refusals the reference would admit"] += _check(
                turn, value, value in trusted[where], value in untrusted[where], partial
            )
        bound = bound or found.ledgers.ledger(turn, turn.context).partial != 0
    tally["sessions"] += 1
    tally["sessions that reached a bound"] += bound


def _kind_of(partial: int, sources: Any) -> str:
    """Which labels the record may miss: what decides how a rule must read it."""
    trusted = bool(partial & sources.trusted)
    untrusted = bool(partial & ~sources.trusted)
    return {
        (False, False): "checks on a whole record",
        (True, False): "checks missing trusted labels",
        (False, True): "checks missing untrusted labels",
        (True, True): "checks missing both (pushed out, or full on both sides)",
    }[(trusted, untrusted)]


def _check(turn: Any, iban: str, in_trusted: bool, in_untrusted: bool, partial: int) -> int:
    """Both rules on one payment; the count of refusals the reference would admit."""
    grounded = turn.call("pay_grounded", {"iban": iban}).ok
    not_untrusted = turn.call("pay_not_untrusted", {"iban": iban}).ok
    expected = (in_trusted, in_trusted or not in_untrusted)
    # Never a pass the reference refuses, whatever the bounds did.
    assert not grounded or expected[0]
    assert not not_untrusted or expected[1]
    if not partial:  # a whole record decides exactly as the reference
        assert (grounded, not_untrusted) == expected
    return (expected[0] and not grounded) + (expected[1] and not not_untrusted)


@pytest.mark.slow
def test_no_bound_ever_admits_a_value_seen_only_in_untrusted_results() -> None:
    tally: Counter[str] = Counter()

    @settings(max_examples=examples(300))
    @given(_session)
    def sessions(session: dict[str, Any]) -> None:
        _run(session, tally)

    sessions()
    share = tally["sessions that reached a bound"] / tally["sessions"]
    print(f"\nprovenance bounds: {share:.0%} of {tally['sessions']} generated sessions reached")
    print(f"a bound; checks by record: {dict(tally)}")
    # The generator attacks the bounds in most sessions, and reaches every kind of record.
    assert share >= 0.6
    for kind in ("on a whole record", "missing untrusted labels", "missing both"):
        assert sum(n for k, n in tally.items() if k.startswith(f"checks {kind}")), kind
