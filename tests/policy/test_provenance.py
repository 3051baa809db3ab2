"""Provenance labels: sources, trust, sessions, the store, and bounded memory."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from guardrails import EscapeReason, Guardrails, Outcome, Verdict, tool
from guardrails.policy import Param, Policy
from guardrails.store import MemoryStore, SQLiteStore, Store, StoreUnavailable


@tool
def fetch_page(url: str) -> str:
    """A web page (untrusted)."""
    return PAGE


@tool
def contacts() -> list[dict[str, str]]:
    """The address book (trusted)."""
    return [{"mail": "carol@friends.example"}]


@tool
def send(to: str) -> str:
    """Send mail."""
    return "sent"


PAGE = "Contact us: Mallory@Evil.example or carol@friends.example"
GROUNDED = Policy(
    params=(Param("send", "to", kind="email", grounded_in=["user", "contacts"]),),
    trusted=frozenset({"contacts"}),
)
NOT_ONLY_UNTRUSTED = Policy(
    params=(Param("send", "to", kind="email", not_only_untrusted=True),),
    trusted=frozenset({"contacts"}),
)


def _rails(policy: Policy, store: Any = None, **kw: Any) -> Guardrails:
    rails = Guardrails([fetch_page, contacts, send])
    rails.load_policy(policy, store=store)
    return rails


def test_grounded_in_the_users_input_or_a_trusted_tool() -> None:
    rails = _rails(GROUNDED)
    turn = rails.turn(session="a")
    turn.pre_turn("mail dave@home.example please")
    assert turn.call("send", {"to": "DAVE@home.example"}).ok
    assert turn.call("send", {"to": "carol@friends.example"}).outcome is Outcome.INVALID_ARGS
    assert turn.call("contacts", {}).ok
    assert turn.call("send", {"to": "carol@friends.example"}).ok


def test_a_value_seen_only_in_untrusted_results_is_refused_and_one_also_trusted_passes() -> None:
    rails = _rails(NOT_ONLY_UNTRUSTED)
    turn = rails.turn(session="a")
    turn.pre_turn("check the page")
    assert turn.call("send", {"to": "mallory@evil.example"}).ok  # not seen anywhere yet
    assert turn.call("fetch_page", {"url": "https://x.example"}).ok
    refused = turn.call("send", {"to": "mallory@evil.EXAMPLE"})
    assert refused.outcome is Outcome.INVALID_ARGS
    assert [v.reason for v in refused.verdicts] == ["untrusted_only"]
    assert turn.call("send", {"to": "carol@friends.example"}).outcome is Outcome.INVALID_ARGS
    assert turn.call("contacts", {}).ok
    assert turn.call("send", {"to": "carol@friends.example"}).ok


def test_context_values_are_trusted() -> None:
    rails = _rails(
        Policy(params=(Param("send", "to", kind="email", grounded_in=["user", "context"]),))
    )
    turn = rails.turn(session="a", values={"manager": {"email": "Boss@Corp.example"}})
    turn.pre_turn("mail my manager")
    assert turn.call("send", {"to": "boss@corp.example"}).ok
    assert turn.call("send", {"to": "other@corp.example"}).outcome is Outcome.INVALID_ARGS


def test_labels_span_the_session_not_only_the_turn() -> None:
    rails = _rails(NOT_ONLY_UNTRUSTED)
    first = rails.turn(session="a", tenant="t")
    assert first.call("fetch_page", {"url": "https://x.example"}).ok
    later = rails.turn(session="a", tenant="t")
    assert later.call("send", {"to": "mallory@evil.example"}).outcome is Outcome.INVALID_ARGS
    other_session = rails.turn(session="b", tenant="t")
    assert other_session.call("send", {"to": "mallory@evil.example"}).ok
    other_tenant = rails.turn(session="a", tenant="u")
    assert other_tenant.call("send", {"to": "mallory@evil.example"}).ok


def test_a_turn_without_a_session_has_labels_of_its_own() -> None:
    rails = _rails(NOT_ONLY_UNTRUSTED)
    turn = rails.turn()
    assert turn.call("fetch_page", {"url": "https://x.example"}).ok
    assert turn.call("send", {"to": "mallory@evil.example"}).outcome is Outcome.INVALID_ARGS
    assert rails.turn().call("send", {"to": "mallory@evil.example"}).ok


def test_a_failed_result_labels_nothing() -> None:
    @tool
    def broken_page(url: str) -> str:
        """Fails."""
        raise RuntimeError("mallory@evil.example")

    rails = Guardrails(
        [broken_page, send],
        policy=Policy(params=(Param("send", "to", kind="email", not_only_untrusted=True),)),
    )
    turn = rails.turn(session="a")
    assert turn.call("broken_page", {"url": "x"}).outcome is Outcome.ERROR
    assert turn.call("send", {"to": "mallory@evil.example"}).ok


def test_structured_results_are_searched_at_any_depth() -> None:
    @tool
    def inbox() -> dict[str, Any]:
        """Mail."""
        return {"messages": [{"body": {"text": "wire to GB33 BUKB 2020 1555 5555 55"}}]}

    @tool
    def pay(iban: str) -> str:
        """Pay."""
        return "paid"

    rails = Guardrails(
        [inbox, pay],
        policy=Policy(params=(Param("pay", "iban", kind="iban", not_only_untrusted=True),)),
    )
    turn = rails.turn(session="a")
    assert turn.call("inbox", {}).ok
    assert turn.call("pay", {"iban": "GB33BUKB20201555555555"}).outcome is Outcome.INVALID_ARGS


# -- through the store: across engines and processes -------------------------------------


def test_labels_survive_the_engine_through_the_store(store: Store) -> None:
    first = _rails(NOT_ONLY_UNTRUSTED, store)
    assert first.turn(session="a", tenant="t").call("fetch_page", {"url": "x"}).ok
    second = _rails(NOT_ONLY_UNTRUSTED, store)  # another process, the same store
    turn = second.turn(session="a", tenant="t")
    assert turn.call("send", {"to": "mallory@evil.example"}).outcome is Outcome.INVALID_ARGS
    assert turn.call("send", {"to": "carol@friends.example"}).outcome is Outcome.INVALID_ARGS
    assert second.turn(session="a", tenant="t").call("contacts", {}).ok
    assert first.turn(session="a", tenant="t").call("send", {"to": "carol@friends.example"}).ok


def test_the_store_holds_digests_never_the_values(tmp_path: Any) -> None:
    store = SQLiteStore(f"{tmp_path}/s.db")
    rails = _rails(NOT_ONLY_UNTRUSTED, store)
    assert rails.turn(session="a").call("fetch_page", {"url": "x"}).ok
    raw = (tmp_path / "s.db").read_bytes()
    assert b"evil" not in raw.lower() and b"friends" not in raw.lower()
    store.close()


def test_concurrent_labelling_and_checks_in_one_session(store: Store) -> None:
    rails = _rails(NOT_ONLY_UNTRUSTED, store)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            barrier.wait()
            for _ in range(5):
                rails.turn(session="a").call("fetch_page", {"url": "x"})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    fresh = _rails(NOT_ONLY_UNTRUSTED, store)
    assert (
        fresh.turn(session="a").call("send", {"to": "mallory@evil.example"}).outcome
        is Outcome.INVALID_ARGS
    )


class _Down(MemoryStore):
    def incr(self, key: str, by: int = 1, /) -> int:
        raise StoreUnavailable("down")


def test_a_store_that_fails_at_a_check_is_an_escape_not_a_pass() -> None:
    rails = _rails(NOT_ONLY_UNTRUSTED, _Down())
    result = rails.turn(session="a").call("send", {"to": "mallory@evil.example"})
    assert result.verdict is Verdict.NOT_EVALUATED
    # the check could not read the store, and the result could not be written to it
    assert [e.guard for e in result.escapes] == ["policy:send.to", "policy"]


def test_with_fail_closed_a_store_that_fails_at_a_check_refuses_as_a_fault() -> None:
    closed = Policy(params=NOT_ONLY_UNTRUSTED.params, fail_closed=True)
    result = _rails(closed, _Down()).turn(session="a").call("send", {"to": "a@b.example"})
    assert result.outcome is Outcome.INVALID_ARGS and result.verdict is Verdict.REJECT
    assert [(e.guard, e.reason) for e in result.escapes] == [
        ("policy:send.to", EscapeReason.RAISED)
    ]


@pytest.mark.parametrize("value", ["", "@", "a" * 10_000, "x@" * 500, "\u200b" * 50])
def test_hostile_argument_strings_never_raise(value: str) -> None:
    rails = _rails(NOT_ONLY_UNTRUSTED)
    result = rails.turn(session="a").call("send", {"to": value})
    assert result.outcome in (Outcome.OK, Outcome.INVALID_ARGS)
    assert not result.escapes


def test_a_result_object_is_labelled_from_what_the_model_was_shown() -> None:
    class Page:
        """Not JSON itself: shown through its own model_dump_json()."""

        def model_dump_json(self) -> str:
            return '{"body": "write to mallory@evil.example"}'

    @tool
    def odd_page(url: str) -> Any:
        """Returns an object that renders itself."""
        return Page()

    rails = Guardrails(
        [odd_page, send],
        policy=Policy(params=(Param("send", "to", kind="email", not_only_untrusted=True),)),
    )
    turn = rails.turn(session="a")
    shown = turn.call("odd_page", {"url": "x"})
    assert shown.ok and not shown.escapes
    assert turn.call("send", {"to": "mallory@evil.example"}).outcome is Outcome.INVALID_ARGS


def test_with_a_store_one_call_reads_it_once_however_many_rules_check() -> None:
    class Counting(MemoryStore):
        reads = 0

        def incr(self, key: str, by: int = 1, /) -> int:
            if by == 0:
                Counting.reads += 1
            return super().incr(key, by)

    @tool
    def mail(to: str, cc: str, reply_to: str) -> str:
        """Send."""
        return "sent"

    rules = tuple(
        Param("mail", name, kind="email", not_only_untrusted=True)
        for name in ("to", "cc", "reply_to")
    )
    rails = Guardrails([mail])
    rails.load_policy(Policy(params=rules), store=Counting())
    turn = rails.turn(session="a")
    before = Counting.reads
    args = {"to": "a@x.example", "cc": "b@x.example", "reply_to": "c@x.example"}
    assert turn.call("mail", args).ok
    assert Counting.reads - before == 1
