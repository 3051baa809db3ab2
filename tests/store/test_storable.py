"""No audit row is lost: any value in any column becomes storable, deterministically and marked."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from guardrails import Guardrails, GuardResult, Verdict, guard, tool
from guardrails.audit import AuditLog
from guardrails.store import AuditRow, Store
from guardrails.store._storable import ACTIONS, JSON_LIMIT, TEXT_LIMIT, storable
from guardrails.store.verify import verify
from tests._hostile import Masked


class Hostile(str):
    """A str whose every method raises: only built-in str code may read it."""

    def __len__(self) -> int:
        raise RuntimeError("len")

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __str__(self) -> str:
        raise RuntimeError("str")

    def isascii(self) -> bool:
        raise RuntimeError("isascii")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("encode")


class Loud:
    def __str__(self) -> str:
        raise RuntimeError("str")

    def __repr__(self) -> str:
        raise RuntimeError("repr")


def _altered(row: AuditRow) -> dict[str, list[str]]:
    return json.loads(row.altered) if row.altered else {}


def test_a_storable_row_is_returned_as_is() -> None:
    row = AuditRow("tool_call", 1.0, "c1", "acme", tool="t", duration_us=5, cost=0.5)
    assert storable(row) is row


@pytest.mark.parametrize(
    ("value", "stored", "actions"),
    [
        ("a\udc80b", "a\\udc80b", ["escaped"]),
        ("\ud800", "\\ud800", ["escaped"]),
        ("a\x00b", "a\\x00b", ["escaped"]),
        ("x" * (TEXT_LIMIT + 5), "x" * TEXT_LIMIT, ["truncated"]),
        (
            "\udc80" * TEXT_LIMIT,
            "\\udc80" * (TEXT_LIMIT // 6) + "\\udc8"[: TEXT_LIMIT % 6],
            ["escaped", "truncated"],
        ),
        (object(), "<not text: object>", ["not_text"]),
        (Loud(), "<not text: Loud>", ["not_text"]),
        pytest.param(Masked(), "<not text: Masked>", ["not_text"], id="masked"),
        (12, "<not text: int>", ["not_text"]),
        (b"bytes", "<not text: bytes>", ["not_text"]),
        ("héllo ✓ 𝄞", "héllo ✓ 𝄞", None),
    ],
)
def test_text_columns_are_escaped_truncated_or_named_and_marked(
    value: Any, stored: str, actions: list[str] | None
) -> None:
    row = storable(AuditRow("tool_call", 1.0, reason=value))
    assert row.reason == stored
    assert _altered(row).get("reason") == actions


def test_a_hostile_str_subclass_is_read_as_plain_text_without_running_its_methods() -> None:
    row = storable(AuditRow("tool_call", 1.0, Hostile("id-\udc80"), tool=Hostile("t")))
    assert type(row.call_id) is str and row.call_id == "id-\\udc80"
    assert type(row.tool) is str and row.tool == "t"
    assert _altered(row) == {"call_id": ["escaped"]}


@pytest.mark.parametrize(
    ("column", "value", "stored", "actions"),
    [
        ("duration_us", 2**63, None, ["out_of_range"]),
        ("duration_us", -(2**63), -(2**63), None),
        ("tokens_in", 1.5, None, ["not_number"]),
        ("tokens_in", True, None, ["not_number"]),
        ("tokens_out", "7", None, ["not_number"]),
        ("cost", math.nan, None, ["out_of_range"]),
        ("cost", math.inf, None, ["out_of_range"]),
        ("cost", 10**400, None, ["out_of_range"]),
        ("cost", 3, 3.0, None),
        ("at", None, 0.0, ["not_number"]),
        ("at", "yesterday", 0.0, ["not_number"]),
        pytest.param("cost", Masked(), None, ["not_number"], id="cost-masked"),
        pytest.param("tokens_in", Masked(), None, ["not_number"], id="tokens-masked"),
    ],
)
def test_number_columns_keep_numbers_that_fit(
    column: str, value: Any, stored: Any, actions: list[str] | None
) -> None:
    row = storable(AuditRow("tool_call", 1.0)._replace(**{column: value}))
    assert getattr(row, column) == stored and type(getattr(row, column)) is type(stored)
    assert _altered(row).get(column) == actions


def test_json_columns_have_the_larger_limit() -> None:
    row = storable(AuditRow("tool_call", 1.0, detail="d" * (JSON_LIMIT + 1), tool="t" * JSON_LIMIT))
    assert len(row.detail or "") == JSON_LIMIT and len(row.tool or "") == TEXT_LIMIT
    assert _altered(row) == {"detail": ["truncated"], "tool": ["truncated"]}


_ANY_CHAR = st.characters(codec=None, categories=None)  # surrogates and NUL included
TEXTS = st.one_of(
    st.text(_ANY_CHAR, max_size=40),
    st.builds(lambda a, b: a + "\udc80" + b, st.text(_ANY_CHAR, max_size=8), st.text(max_size=8)),
    st.builds(lambda a, b: a + "\x00" + b, st.text(max_size=8), st.text(_ANY_CHAR, max_size=8)),
    st.builds(
        lambda a, n: a * n, st.text(_ANY_CHAR, min_size=1, max_size=3), st.integers(300, 1100)
    ),
)


@pytest.mark.parametrize(
    "reaches",
    [
        lambda t: any("\ud800" <= c <= "\udfff" for c in t),
        lambda t: "\x00" in t,
        lambda t: len(t) > TEXT_LIMIT,
        lambda t: len(t) > 0 and t.isascii() and "\x00" not in t,
    ],
    ids=["surrogate", "nul", "too_long", "plain"],
)
def test_the_generated_texts_reach_every_branch(reaches: Any) -> None:
    assert find(TEXTS, reaches) is not None


@given(TEXTS)
def test_any_text_becomes_valid_utf8_without_nul_within_the_limit(text: str) -> None:
    row = storable(AuditRow("tool_call", 1.0, text))
    stored = row.call_id or ""
    stored.encode("utf-8")
    assert "\x00" not in stored and len(stored) <= TEXT_LIMIT
    assert storable(row) is row  # storing twice changes nothing
    assert storable(AuditRow("tool_call", 1.0, text)) == row  # deterministic
    assert (row.altered is None) == (stored == text)  # every change is marked


def test_every_action_and_limit_is_the_one_the_docs_name() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "store.md").read_text()
    for action in ACTIONS:
        assert f"| `{action}` |" in page
    assert f"longer than {TEXT_LIMIT:,} characters ({JSON_LIMIT:,} for" in page


# -- 10,000 hostile rows, every one written --------------------------------------------------


def _hostile_values() -> list[Any]:
    return [
        "\udc80", "a\ud800b", "\x00", "nul\x00in", "x" * 100_000, Hostile("h\udfff"), "", None,
        "💥" * 2000, "\u202egnp.exe", "'; DROP TABLE guardrails_audit; --", object(), Loud(),
        12, 1.5, b"\xff", ["list"], {"k": object()}, Masked(),
    ]  # fmt: skip


def _hostile_rows(n: int) -> Iterator[AuditRow]:
    values = _hostile_values()
    k = len(values)
    for i in range(n):
        yield AuditRow(
            "tool_call", 1.0 + i, values[i % k], values[(i // k) % k], values[(i // 7) % k],
            tool=values[(i // 3) % k], reason=values[(i // 11) % k], outcome="ok",
            duration_us=values[(i // 5) % k], cost=values[(i // 13) % k],
        )  # fmt: skip


@pytest.mark.slow
def test_ten_thousand_hostile_rows_are_ten_thousand_rows(store: Store) -> None:
    for row in _hostile_rows(10_000):
        store.append(row)
    rows = list(_all_rows(store))
    assert len(rows) == 10_000
    assert [r.at for r in rows] == [1.0 + i for i in range(10_000)]
    assert sum(1 for r in rows if r.altered) > 9_000
    assert verify(store).ok


def test_hostile_rows_appended_together_are_all_written(store: Store) -> None:
    store.append_many(list(_hostile_rows(500)))
    assert len(list(_all_rows(store))) == 500
    assert verify(store).ok


def _all_rows(store: Store) -> Iterator[AuditRow]:
    after = 0
    while page := store.audit_rows(after_id=after, limit=1000):
        yield from page
        after = page[-1].id or 0


# -- through the engine: hostile names, ids, tenants and reasons ------------------------------


@tool
def lookup(q: str) -> str:
    return "found"


@tool(effect=True)
def publish(q: str) -> str:
    return "published"


@guard
def odd_reason(call: Any) -> GuardResult:
    reason = _hostile_values()[len(call.call_id or "") % len(_hostile_values())]
    return GuardResult(Verdict.PASS, reason=reason)


def test_every_hostile_call_leaves_its_row_and_effects_still_run(store: Store) -> None:
    audit = AuditLog(store)
    rails = Guardrails([lookup, publish], [odd_reason], hooks=[audit], recorder=[audit])
    texts = [v for v in _hostile_values() if type(v) is str]
    calls = 0
    for i in range(300):
        tenant = texts[i % len(texts)]
        call_id = texts[(i // 3) % len(texts)] + str(i)
        name = ("lookup", "publish", texts[(i // 2) % len(texts)] + "\udc80")[i % 3]
        result = rails.turn(tenant=tenant, session="s").call(name, {"q": "x"}, call_id)
        # A reason that is not text is the guard's junk answer: counted, never lost.
        assert all(e.reason == "invalid_return" for e in result.escapes), result.escapes
        if name == "publish":
            assert result.content == "published"
        calls += 1
    rows = list(_all_rows(store))
    assert sum(1 for r in rows if r.kind == "tool_call") == calls
    assert sum(1 for r in rows if r.kind == "call_started") == 100
    assert verify(store).ok


def test_a_guard_reason_that_is_no_string_is_counted_and_does_not_lose_the_row_of_an_effect(
    store: Store,
) -> None:
    @guard
    def pass_with_object(call: Any) -> GuardResult:
        return GuardResult(Verdict.PASS, reason=object())  # type: ignore[arg-type]

    audit = AuditLog(store)
    rails = Guardrails([publish], [pass_with_object], hooks=[audit], recorder=[audit])
    result = rails.call("publish", {"q": "x"})
    assert result.content == "published"
    assert [(e.guard, e.reason) for e in result.escapes] == [("pass_with_object", "invalid_return")]
    kinds = [(r.kind, r.tool) for r in store.audit_rows()]
    assert kinds == [("call_started", "publish"), ("tool_call", "publish")]
    (verdict,) = json.loads(store.audit_rows()[-1].verdicts or "[]")
    assert (verdict["verdict"], verdict["reason"]) == ("not_evaluated", "invalid_return")


def test_a_row_that_cannot_be_built_is_written_with_what_can(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import guardrails.audit as audit_module

    def broken(records: Any) -> str:
        raise RecursionError("encoder")

    monkeypatch.setattr(audit_module, "encode_verdicts", broken)
    audit = AuditLog(store)
    rails = Guardrails([publish], [odd_reason], hooks=[audit], recorder=[audit])
    result = rails.turn(tenant="acme", session="s").call("publish", {"q": "x"}, "c-1")
    assert result.content == "published" and not result.escapes
    audit.on_event("post_run", object())  # an event whose payload has nothing to read
    rows = store.audit_rows()
    assert [(r.kind, r.call_id, r.tenant, r.tool, r.outcome) for r in rows[:2]] == [
        ("call_started", "c-1", "acme", "publish", None),
        ("tool_call", "c-1", "acme", "publish", "ok"),
    ]
    assert json.loads(rows[1].detail or "{}") == {"row": "incomplete: a value could not be encoded"}
    assert rows[2].kind == "post_run"


def test_detail_values_json_cannot_hold_are_named_not_printed(store: Store) -> None:
    audit = AuditLog(store)
    cyclic: list[Any] = []
    cyclic.append(cyclic)

    class Payload:
        context = None
        verdict = Masked()
        tool = Loud()

        @property
        def offered(self) -> dict[str, Any]:
            return {"a": Loud(), "b": [Masked(), 1.5, cyclic], Loud(): 1}

        @property
        def withheld(self) -> Any:
            raise RuntimeError("sk-live-withheld")

    audit.on_event("pre_turn", Payload())
    (row,) = store.audit_rows()
    assert row.verdict == "<not text: Masked>"
    detail = json.loads(row.detail or "{}")
    assert detail["tool"] == "Loud" and detail["withheld"] == "<unreadable>"
    assert detail["offered"]["a"] == "Loud" and detail["offered"]["b"][:2] == ["Masked", 1.5]
    assert "<not text: Loud>" in detail["offered"]
    assert "sk-live" not in (row.detail or "")
