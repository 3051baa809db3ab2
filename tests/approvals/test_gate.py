"""The gate: a call that needs approval does not run; an approved one runs once, exactly as approved."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalError, ApprovalGate, Approvals
from guardrails.audit import AuditLog
from guardrails.errors import ConfigurationError
from guardrails.store import MemoryStore, Store, StoreUnavailable
from guardrails.verdicts import Outcome


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Bench:
    """An engine with one approval-gated tool, the calls it ran, and the people's side."""

    def __init__(self, store: Any, *, ttl: float = 60.0) -> None:
        self.clock = Clock()
        self.ran: list[dict[str, Any]] = []

        @tool(approval="amount > 500", effect=True, bind={"account": "tenant"})
        def transfer(amount: int, to: str, account: str) -> str:
            self.ran.append({"amount": amount, "to": to, "account": account})
            return "sent"

        self.engine = Guardrails([transfer], hooks=[ApprovalGate(store, ttl=ttl, clock=self.clock)])
        self.people = Approvals(store, clock=self.clock)

    def call(self, arguments: Any, tenant: str | None = "acme", session: str | None = "s1") -> Any:
        return self.engine.turn(tenant=tenant, session=session).call("transfer", arguments)

    def only_pending(self) -> str:
        [request] = self.people.list("pending")
        return request.id


@pytest.fixture
def bench(store: Store) -> Iterator[Bench]:
    yield Bench(store)


BIG = {"amount": 900, "to": "bob"}


def test_a_call_under_the_condition_runs_without_asking(bench: Bench) -> None:
    assert bench.call({"amount": 500, "to": "bob"}).outcome is Outcome.OK
    assert bench.people.list(None) == []


def test_a_call_that_needs_approval_does_not_run_and_is_stored_redacted(bench: Bench) -> None:
    result = bench.call(BIG)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "approval_pending")
    assert bench.ran == []
    request = bench.people.show(bench.only_pending())
    assert (request.tenant, request.session, request.tool) == ("acme", "s1", "transfer")
    # the bound account is shown as bound, never its value; the digest covers it
    assert json.loads(request.arguments) == {"amount": 900, "to": "bob", "account": "<bound>"}
    assert len(request.digest) == 64 and request.expires_at == request.requested_at + 60
    assert request.id not in result.content


def test_an_approved_call_runs_once_with_exactly_the_approved_arguments(bench: Bench) -> None:
    bench.call(BIG)
    approved = bench.people.approve(bench.only_pending(), by="alice", reason="invoice 7")
    assert (approved.decided_by, approved.reason) == ("alice", "invoice 7")
    assert bench.call(BIG).outcome is Outcome.OK
    assert bench.ran == [{"amount": 900, "to": "bob", "account": "acme"}]
    again = bench.call(BIG)
    assert (again.outcome, again.reason) == (Outcome.UNAVAILABLE, "approval_pending")
    assert len(bench.ran) == 1
    assert bench.people.list("used")[0].used_at == bench.clock.now


@pytest.mark.parametrize(
    "other",
    [
        {"amount": 901, "to": "bob"},
        {"amount": 900, "to": "bob "},
        {"amount": 900, "to": "Bob"},
        {"amount": 900.0, "to": "bob"},  # another JSON number is other arguments
    ],
)
def test_an_approval_never_runs_other_arguments(bench: Bench, other: dict[str, Any]) -> None:
    bench.call(BIG)
    bench.people.approve(bench.only_pending(), by="alice")
    result = bench.call(other)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "approval_pending")
    assert bench.ran == []
    assert bench.call(BIG).outcome is Outcome.OK  # the approval was left for its own call


@pytest.mark.parametrize(
    ("tenant", "session"), [("other", "s1"), (None, "s1"), ("acme", "s2"), ("acme", None)]
)
def test_an_approval_never_runs_in_another_tenant_or_session(
    bench: Bench, tenant: str | None, session: str | None
) -> None:
    bench.call(BIG)
    bench.people.approve(bench.only_pending(), by="alice")
    result = bench.call(BIG, tenant=tenant, session=session)
    # (a call without a tenant cannot even bind its account: refused before the gate)
    assert result.reason == ("binding_unresolved" if tenant is None else "approval_pending")
    assert bench.ran == []
    assert bench.call(BIG).outcome is Outcome.OK


def test_an_approval_used_after_its_expiry_never_runs_and_is_reported_expired(bench: Bench) -> None:
    bench.call(BIG)
    bench.people.approve(bench.only_pending(), by="alice")
    bench.clock.now += 60.0  # at the expiry: too late
    result = bench.call(BIG)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "approval_expired")
    assert bench.ran == []
    assert [r.status for r in bench.people.list(None)] == ["pending", "expired"]


def test_an_approval_one_tick_before_its_expiry_runs(bench: Bench) -> None:
    bench.call(BIG)
    bench.people.approve(bench.only_pending(), by="alice")
    bench.clock.now += 59.999
    assert bench.call(BIG).outcome is Outcome.OK


def test_a_denied_call_never_runs(bench: Bench) -> None:
    bench.call(BIG)
    bench.people.deny(bench.only_pending(), by="alice", reason="no")
    result = bench.call(BIG)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "approval_denied")
    assert bench.ran == []


@pytest.mark.parametrize(
    "smuggled",
    [
        {"approval_id": "x"},
        {"approval": "approved"},
        {"_approved": True},
    ],
)
def test_the_model_cannot_supply_an_approval(bench: Bench, smuggled: dict[str, Any]) -> None:
    bench.call(BIG)
    request_id = bench.only_pending()
    result = bench.call({**BIG, **smuggled, "approval_id": request_id})
    assert result.outcome is Outcome.INVALID_ARGS  # undeclared parameters are refused first
    assert bench.ran == []
    assert bench.people.show(request_id).status == "pending"


def test_a_forged_or_unknown_request_id_cannot_be_decided(bench: Bench) -> None:
    bench.call(BIG)
    real = bench.only_pending()
    for forged in (real[:-1] + ("0" if real[-1] != "0" else "1"), real.upper(), "", "x" * 129):
        with pytest.raises(ApprovalError):
            bench.people.approve(forged, by="mallory")
    assert bench.call(BIG).reason == "approval_pending"
    assert bench.ran == []


def test_a_decision_cannot_be_made_twice_or_changed(bench: Bench) -> None:
    bench.call(BIG)
    request_id = bench.only_pending()
    bench.people.deny(request_id, by="alice")
    with pytest.raises(ApprovalError, match="is denied, not pending"):
        bench.people.approve(request_id, by="mallory")
    assert bench.call(BIG).reason == "approval_denied"


@pytest.mark.parametrize("by", ["", "   ", None, 7, "x" * 257])
def test_a_decision_needs_an_identity(bench: Bench, by: Any) -> None:
    bench.call(BIG)
    with pytest.raises(Exception, match="by must be"):
        bench.people.approve(bench.only_pending(), by=by)


def test_each_decision_is_an_audit_row_in_the_chain(store: Store) -> None:
    bench = Bench(store)
    bench.call(BIG)
    request_id = bench.only_pending()
    bench.people.approve(request_id, by="alice", reason="ok")
    [row] = store.audit_rows(kind="approval")
    detail = json.loads(row.detail or "{}")
    assert (row.outcome, row.tenant, row.session, row.tool) == (
        "approved",
        "acme",
        "s1",
        "transfer",
    )
    assert (detail["request"], detail["by"], detail["reason"]) == (request_id, "alice", "ok")
    assert store.audit_chain()[-1][1]  # chained


def test_the_call_audit_row_names_the_request_it_waited_for_or_ran_under() -> None:
    store = MemoryStore()
    clock = Clock()

    @tool(approval="always", effect=True)
    def wipe(disk: str) -> str:
        return "wiped"

    engine = Guardrails([wipe], hooks=[AuditLog(store), ApprovalGate(store, clock=clock)])
    engine.turn(session="s").call("wipe", {"disk": "sda"})
    request_id = Approvals(store, clock=clock).list()[0].id
    Approvals(store, clock=clock).approve(request_id, by="alice")
    engine.turn(session="s").call("wipe", {"disk": "sda"})
    calls = store.audit_rows(kind="tool_call")
    assert [(r.outcome, r.reason) for r in calls] == [
        ("unavailable", "approval_pending"), ("ok", None),
    ]  # fmt: skip
    assert [json.loads(r.detail or "{}").get("approval_request") for r in calls] == [
        request_id, request_id,
    ]  # fmt: skip


def test_a_store_that_fails_never_runs_the_call() -> None:
    class Down(MemoryStore):
        def approval_admit(self, *args: Any) -> Any:
            raise StoreUnavailable("down")

    bench = Bench(Down())
    result = bench.call(BIG)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "store_unavailable")
    assert bench.ran == []


def test_a_store_without_approval_tables_is_refused_at_construction() -> None:
    class Plain:
        def append(self, row: Any) -> int:
            return 1

    with pytest.raises(ConfigurationError, match="keeps no approval requests"):
        ApprovalGate(Plain())
    with pytest.raises(ConfigurationError, match="keeps no approval requests"):
        Approvals(Plain())


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), "60", True])
def test_a_bad_ttl_is_refused(ttl: Any) -> None:
    with pytest.raises(ConfigurationError, match="ttl"):
        ApprovalGate(MemoryStore(), ttl=ttl)


def test_sync_and_async_calls_decide_the_same(store: Store) -> None:
    bench = Bench(store)

    async def acall(arguments: dict[str, Any]) -> Any:
        return await bench.engine.turn(tenant="acme", session="s1").acall("transfer", arguments)

    first = asyncio.run(acall(BIG))
    assert (first.outcome, first.reason, first.content) == (
        Outcome.UNAVAILABLE, "approval_pending", bench.call(BIG).content,
    )  # fmt: skip
    bench.people.approve(bench.only_pending(), by="alice")
    assert asyncio.run(acall(BIG)).outcome is Outcome.OK
    assert asyncio.run(acall(BIG)).reason == "approval_pending"
    assert len(bench.ran) == 1


def test_a_tenant_whose_string_methods_raise_is_scoped_by_its_characters(bench: Bench) -> None:
    class Hostile(str):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("compared")

        def __hash__(self) -> int:
            raise AssertionError("hashed")

        def encode(self, *args: Any, **kwargs: Any) -> bytes:
            raise AssertionError("encoded")

    held = bench.call(BIG, tenant=Hostile("acme"))
    assert held.reason == "approval_pending"
    bench.people.approve(bench.only_pending(), by="alice")
    assert bench.call(BIG, tenant="acme").outcome is Outcome.OK  # the same characters: one scope
    assert bench.ran == [{"amount": 900, "to": "bob", "account": "acme"}]


def test_approvals_of_one_tenant_neither_see_nor_decide_another_s() -> None:
    store = MemoryStore()

    @tool(approval="always", effect=True)
    def wipe(disk: str) -> str:
        return "wiped"

    engine = Guardrails([wipe], hooks=[ApprovalGate(store)])
    engine.turn(tenant="acme", session="s").call("wipe", {"disk": "a"})
    engine.turn(tenant="globex", session="s").call("wipe", {"disk": "a"})
    acme = Approvals(store, tenant="acme")
    [mine] = acme.list()
    [theirs] = [r for r in Approvals(store).list() if r.tenant == "globex"]
    for act in (
        lambda: acme.show(theirs.id),
        lambda: acme.approve(theirs.id, by="alice"),
        lambda: acme.deny(theirs.id, by="alice"),
    ):
        with pytest.raises(ApprovalError, match="no approval request"):
            act()
    assert Approvals(store).show(theirs.id).status == "pending"
    assert acme.approve(mine.id, by="alice").decided_by == "alice"
