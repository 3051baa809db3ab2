"""A guarded tool in a dozen lines: run ``guardrails example``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from guardrails import Guardrails, GuardResult, Invocation, Verdict, guard, tool


@tool(bind={"account_id": "account_id"}, effect=True)
def transfer(
    account_id: str,
    amount: Annotated[float, Field(gt=0, description="Amount to move")],
    currency: Literal["USD", "EUR"],
    memo: str = "",
) -> dict[str, object]:
    """Move money out of the customer's account."""
    return {"status": "sent", "account": account_id, "amount": amount, "currency": currency}


@guard(outcome="limit")
def under_daily_limit(call: Invocation) -> GuardResult | Verdict:
    if call.arguments["amount"] > 1_000:
        return GuardResult.rejected("over_daily_limit", params=("amount",))
    return Verdict.PASS


@guard
def flaky_fraud_check(call: Invocation) -> Verdict:
    raise ConnectionError("fraud service at 10.0.0.7 timed out, token=sk-live-123")


def main() -> None:
    rails = Guardrails([transfer], [under_daily_limit, flaky_fraud_check])
    turn = rails.turn(tenant="acme", values={"account_id": "acc-42"})
    attempts = [
        ("transfer", {"amount": 25, "currency": "EUR"}),
        ("transfer", {"currency": "EUR"}),
        ("transfer", {"amount": 5_000, "currency": "USD"}),
        ("transfer", {"account_id": "acc-666", "amount": 1, "currency": "USD"}),
        ("delete_database", {}),
    ]
    for name, arguments in attempts:
        result = turn.call(name, arguments)
        print(f"{name}({arguments})")
        print(f"  outcome={result.outcome}  verdict={result.verdict}  reason={result.reason}")
        print(f"  the model sees: {result.content}")
        for escape in result.escapes:
            print(f"  fail-open escape: guard={escape.guard} reason={escape.reason}")


if __name__ == "__main__":
    main()
