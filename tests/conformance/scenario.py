"""The conformance scenario: one agent, its tools and guards, and what the model asks in each row.

The agent's three tools are ``balance`` (its ``account_id`` bound from the
session), ``transfer`` (a ``limit`` guard, a fail-open guard that raises for
one payee) and ``search`` (a fail-closed guard that raises for one query).
Two more tools carry the result shapes: ``history`` answers far more than
``MAX_RESULT`` and ``chart`` answers an image. ``close_account`` is
registered but never offered to the tenant.

Every entry point builds the same engine (``rails``) or, where the tools live
in another process (the gateway), the same tools and rules in its own form
(``servers/bank.py`` and the gateway's configuration). Each body records its
own run in ``ran``, so a driver can tell whether it ran.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Any

from guardrails import Guardrails, Outcome, TurnContext, Verdict, guard, tool
from guardrails.rules import allow_list
from guardrails.tools import Tool

TENANT = "acme"
SESSION = "s-1"
ACCOUNT = "acc-7"
LIMIT = 100  # the most one transfer may move
SHAKY_PAYEE = "carol"  # the fraud service fails for her: a fail-open guard raises
SHAKY_QUERY = "crash"  # the query filter fails on it: a fail-closed guard raises
MAX_RESULT = 2000
HISTORY_LINES = 500
# A 1x1 transparent PNG: what ``chart`` draws.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()
FINAL = "Done."
HELD_PAYEE = "dave"  # a transfer to him needs a person's approval
# The approval gate's rules (``ApprovalGate(rules=...)``, the gateway's ``approval``).
APPROVALS = {"transfer": f"to == '{HELD_PAYEE}'"}


def context() -> TurnContext:
    """The run's closure: the tenant, the session, and the account ``balance`` is bound to."""
    return TurnContext(tenant=TENANT, session=SESSION, values={"account_id": ACCOUNT})


# -- the bodies: plain functions, each entry point wraps them its own way -----------------


def balance_of(account_id: str) -> str:
    return f"{account_id}: 120.00 EUR"


def transfer_of(to: str, amount: float) -> str:
    return f"sent {amount:.2f} EUR to {to}"


def hits_of(query: str) -> dict[str, Any]:
    return {"query": query, "hits": [{"title": "Fees", "score": 0.9}]}


def history_text() -> str:
    return "\n".join(f"2026-01-{1 + i % 28:02d} card payment {i}" for i in range(HISTORY_LINES))


# -- the guards ---------------------------------------------------------------------------


class FraudServiceDown(RuntimeError):
    """What the fraud check's backend raises (its text must never reach the model)."""


class FilterDown(RuntimeError):
    """What the query filter's backend raises."""


@guard(name="over_limit", outcome=Outcome.LIMIT, tools=["transfer"])
def over_limit(call: Any) -> Verdict:
    """A transfer above ``LIMIT`` is a usage limit."""
    return Verdict.REJECT if call.arguments["amount"] > LIMIT else Verdict.PASS


@guard(name="fraud_check", tools=["transfer"])
def fraud_check(call: Any) -> Verdict:
    """Fail-open: when the fraud service is down the transfer goes on, counted as an escape."""
    if call.arguments["to"] == SHAKY_PAYEE:
        raise FraudServiceDown("fraud-svc 10.0.0.9 refused: token=sk-live-1")
    return Verdict.PASS


@guard(name="query_filter", fail_closed=True, tools=["search"])
def query_filter(call: Any) -> Verdict:
    """Fail-closed: when the filter cannot decide, the search does not run."""
    if call.arguments["query"] == SHAKY_QUERY:
        raise FilterDown("filter at 10.0.0.8 crashed")
    return Verdict.PASS


OFFERED = ("balance", "transfer", "search", "history", "chart")
TOOL_NAMES = (*OFFERED, "close_account")


def offered_only() -> Any:
    """pre_turn: the tenant is offered every tool but ``close_account``."""
    return allow_list(by_tenant={TENANT: list(OFFERED)}, name="tenant_tools")


def guards() -> list[Any]:
    return [offered_only(), over_limit, fraud_check, query_filter]


def tools(ran: list[str], image: Callable[[], Any] = lambda: PNG) -> list[Tool]:
    """The scenario's tools as plain ``@tool`` functions; each body appends its name to ``ran``.

    ``image`` makes ``chart``'s result: an entry point passes its own image type.
    """

    @tool(bind={"account_id": "account_id"})
    def balance(account_id: str) -> str:
        """The customer's balance."""
        ran.append("balance")
        return balance_of(account_id)

    @tool
    def transfer(to: str, amount: float) -> str:
        """Move money from the customer's account to a payee."""
        ran.append("transfer")
        return transfer_of(to, amount)

    @tool
    def search(query: str) -> dict[str, Any]:
        """Search the help centre."""
        ran.append("search")
        return hits_of(query)

    @tool
    def history() -> str:
        """Every card payment of the account."""
        ran.append("history")
        return history_text()

    @tool
    def chart() -> Any:
        """The month's spending as a chart."""
        ran.append("chart")
        return image()

    @tool
    def close_account() -> str:
        """Close the account (never offered to the tenant)."""
        ran.append("close_account")
        return "closed"

    return [balance, transfer, search, history, chart, close_account]


# What a framework adapter is given: it registers the framework's own tools, so the
# binding travels in its tool options (the tool-scoped guards wait for their tools).
BIND = {"balance": {"bind": {"account_id": "account_id"}}}


def functions(ran: list[str], image: Callable[[], Any]) -> dict[str, Callable[..., Any]]:
    """The scenario's tools as plain, annotated functions a framework wraps its own way,
    by name; each body appends its name to ``ran``, and ``chart`` answers ``image()``."""

    def balance(account_id: str) -> str:
        """The customer's balance."""
        ran.append("balance")
        return balance_of(account_id)

    def transfer(to: str, amount: float) -> str:
        """Move money from the customer's account to a payee."""
        ran.append("transfer")
        return transfer_of(to, amount)

    def search(query: str) -> dict[str, Any]:
        """Search the help centre."""
        ran.append("search")
        return hits_of(query)

    def history() -> str:
        """Every card payment of the account."""
        ran.append("history")
        return history_text()

    def chart() -> Any:
        """The month's spending as a chart."""
        ran.append("chart")
        return image()

    def close_account() -> str:
        """Close the account (never offered to the tenant)."""
        ran.append("close_account")
        return "closed"

    made = [balance, transfer, search, history, chart, close_account]
    return {fn.__name__: fn for fn in made}


def rails(
    ran: list[str],
    *,
    image: Callable[[], Any] = lambda: PNG,
    hooks: Iterable[Any] = (),
    recorder: Iterable[Any] = (),
) -> Guardrails:
    """The scenario's engine, with the caller's hooks (audit, spans) and recorders."""
    return Guardrails(
        tools(ran, image),
        guards(),
        hooks=list(hooks),
        recorder=list(recorder),
        max_result_chars=MAX_RESULT,
    )
