"""Whatever JSON the model sends, the policy's guards decide: none raises or times out."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from guardrails import EscapeReason, Outcome
from guardrails.verdicts import model_sentence

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "policy_mail_payments_fuzz", ROOT / "examples" / "policy_mail_payments.py"
)
assert spec is not None and spec.loader is not None
mail = importlib.util.module_from_spec(spec)
sys.modules["policy_mail_payments_fuzz"] = mail
spec.loader.exec_module(mail)

RAILS = mail.build()
_SESSIONS = itertools.count()
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(
        ["a@b.example", "DE89 3704 0044 0532 0130 00", "https://x.example/", "+49 30 1234567"]
    ),
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_text = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "ana@home.example",
            "ANA@HOME.EXAMPLE",
            "ana@home.example.evil.example",
            "ana\u200b@home.example",
            "ａｎａ@home.example",
            "https://news.example/today",
            "http://news.example/today",
            "https://news.example@evil.example/",
            "DE89370400440532013000",
            "de89 3704 0044 0532 0130 00",
            "GB33BUKB20201555555555",
            "Tr0ub4dor&3",
            "",
            "@" * 300,
        ]
    ),
)
# Schema-valid arguments (so the policy's guards run), with hostile contents.
_calls = st.one_of(
    st.tuples(
        st.just("send_mail"),
        st.fixed_dictionaries({"to": _text, "subject": _text, "body": _text}),
    ),
    st.tuples(
        st.just("pay"),
        st.fixed_dictionaries(
            {
                "iban": _text,
                "amount": st.one_of(
                    st.integers(),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([750, 750.0, 1e308]),
                ),
            }
        ),
    ),
    st.tuples(st.just("browse"), st.fixed_dictionaries({"url": _text})),
    st.tuples(st.just("change_password"), st.fixed_dictionaries({"new_password": _text})),
    st.tuples(
        st.sampled_from(["send_mail", "pay", "browse"]),
        st.dictionaries(st.text(max_size=8), _json, max_size=4),
    ),
)
USER = "send mail to ana@home.example, pay 750 to DE89 3704 0044 0532 0130 00, open https://news.example/today, change my password to Tr0ub4dor&3"


@given(_calls, st.text(max_size=80))
def test_any_arguments_get_a_closed_outcome_and_no_policy_guard_fails(
    call: tuple[str, dict[str, Any]], user: str
) -> None:
    name, arguments = call
    turn = RAILS.turn(session=f"fuzz-{next(_SESSIONS)}", values={"payment_limit": 1000})
    turn.pre_turn(f"{USER} {user}")
    result = turn.call(name, arguments)
    assert result.outcome in set(Outcome)
    ran = [v for v in result.verdicts if v.guard.startswith("policy:")]
    event(f"{name}: {result.outcome}, {'policy guards ran' if ran else 'refused before'}")
    for escape in result.escapes:
        assert escape.reason is not EscapeReason.RAISED, escape
        assert escape.reason is not EscapeReason.INVALID_RETURN, escape
    if result.outcome is not Outcome.OK:
        assert result.content in {
            model_sentence(result.outcome, result.params),
            model_sentence(result.outcome, result.params, undeclared=True),
        }


def test_the_fuzzed_calls_reach_both_verdicts() -> None:
    turn = RAILS.turn(session="fuzz-reach", values={"payment_limit": 1000})
    turn.pre_turn(USER)
    ok = turn.call("send_mail", {"to": "ANA@HOME.EXAMPLE", "subject": "s", "body": "b"})
    refused = turn.call(
        "send_mail", {"to": "ana\u200b@home.example.evil.example", "subject": "s", "body": "b"}
    )
    assert ok.outcome is Outcome.OK and refused.outcome is Outcome.INVALID_ARGS
