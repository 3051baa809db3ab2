"""The tool every per-call benchmark guards: a money transfer, and its two rules.

Arguments: an account id, an amount with a minimum, a currency from an enum,
an optional memo. Rules: the amount is at most the daily limit, and the
account is not frozen. Each library under test gets the same function, the
same schema and the same two rules, written the way that library expects.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

DAILY_LIMIT = 1_000.0
FROZEN = frozenset({"acc-666", "acc-13"})

VALID: dict[str, Any] = {"account_id": "acc-42", "amount": 25.0, "currency": "EUR"}
# Fails the schema twice over: the amount is under the minimum, the currency is not in the enum.
INVALID: dict[str, Any] = {"account_id": "acc-42", "amount": 0.0, "currency": "XYZ"}
# Passes the schema, fails the daily-limit rule.
OVER_LIMIT: dict[str, Any] = {"account_id": "acc-42", "amount": 5_000.0, "currency": "USD"}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "account_id": {"type": "string", "description": "Account to debit"},
        "amount": {"type": "number", "minimum": 0.01, "description": "Amount to move"},
        "currency": {"type": "string", "enum": ["USD", "EUR", "GBP"]},
        "memo": {"type": "string", "default": ""},
    },
    "required": ["account_id", "amount", "currency"],
    "additionalProperties": False,
}


def transfer(
    account_id: str,
    amount: Annotated[float, Field(ge=0.01, description="Amount to move")],
    currency: Literal["USD", "EUR", "GBP"],
    memo: str = "",
) -> dict[str, Any]:
    """Move money out of an account."""
    return {"status": "sent", "account": account_id, "amount": amount, "currency": currency}


class RuleViolation(Exception):
    """Raised by ``transfer_with_rules`` when a rule fails."""


def transfer_with_rules(
    account_id: str,
    amount: Annotated[float, Field(ge=0.01, description="Amount to move")],
    currency: Literal["USD", "EUR", "GBP"],
    memo: str = "",
) -> dict[str, Any]:
    """Move money out of an account (the rules checked in the body, after validation)."""
    arguments = {"account_id": account_id, "amount": amount}
    if not within_limit(arguments):
        raise RuleViolation("over daily limit")
    if not account_open(arguments):
        raise RuleViolation("account frozen")
    return transfer(account_id, amount, currency, memo)


def within_limit(arguments: dict[str, Any]) -> bool:
    """Rule 1: the amount is at most the daily limit."""
    return bool(arguments["amount"] <= DAILY_LIMIT)


def account_open(arguments: dict[str, Any]) -> bool:
    """Rule 2: the account is not frozen."""
    return arguments["account_id"] not in FROZEN
