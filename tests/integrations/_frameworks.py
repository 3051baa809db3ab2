"""What the framework adapter tests share: one scenario, run by each framework's own agent.

The model asks, in its first step, for a valid call, calls with missing and
wrong arguments, an unknown tool, a bound parameter, a tool that raises with a
secret in its message, and an oversized result; then for two more calls, one
step each, the second of which is over the per-turn ceiling.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from guardrails import Guardrails, Outcome, Secret
from guardrails.middleware._render import TRUNCATION_MARKER
from guardrails.verdicts import model_sentence

SECRET = "token=sk-live-123"
MAX_RESULT = 1000
CEILING = 4
BIND = {"get_orders": {"bind": {"account_id": "account_id"}}}
ACCOUNT = "acc-7"


def need(module: str) -> ModuleType:
    """Import a framework; skip when it is missing, unless CI makes frameworks mandatory."""
    if os.environ.get("GUARDRAILS_REQUIRE_FRAMEWORKS") == "1":
        return importlib.import_module(module)
    try:
        return importlib.import_module(module)
    except ImportError:
        pytest.skip(
            f"{module} is not installed (pip install -e '.[frameworks]')", allow_module_level=True
        )


@contextlib.contextmanager
def default_loop_closed() -> Iterator[None]:
    """Close the thread's default event loop that a framework's ``run_sync`` leaves open."""
    try:
        yield
    finally:
        policy = asyncio.get_event_loop_policy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                loop = policy.get_event_loop()
            except RuntimeError:  # none set: nothing to close
                return
        if not loop.is_running():
            loop.close()
            policy.set_event_loop(None)


# -- the tools, as plain functions each framework wraps its own way ----------------


def lookup(order_id: str, verbose: bool = False) -> str:
    """Look an order up."""
    return f"order {order_id}" + (" (verbose)" if verbose else "")


def get_orders(account_id: str, status: str = "open") -> str:
    """The customer's orders."""
    return f"{account_id}:{status}"


def explode(x: int) -> str:
    """Always fails."""
    raise RuntimeError(SECRET)


def dump() -> str:
    """A log far larger than the context should hold."""
    return "x" * 50_000


API_KEY = "sk-test-secret"
SECRETS = {"charge": {"bind": {"api_key": Secret("payments")}, "effect": True}}


def charge(amount: float, api_key: str) -> str:
    """Charge the customer (an action: it gets the payments key)."""
    assert api_key == API_KEY
    return f"charged {amount}"


def secret_rails() -> Guardrails:
    return Guardrails(secrets={"payments": API_KEY}.__getitem__)


def rails() -> Guardrails:
    return Guardrails(max_calls_per_turn=CEILING, max_result_chars=MAX_RESULT)


# -- what the model asks for, and what it must be sent next ----------------------------

FIRST: list[tuple[str, str, dict[str, Any]]] = [
    ("c1", "lookup", {"order_id": "o-1"}),
    ("c2", "lookup", {}),
    ("c3", "lookup", {"order_id": 7}),
    ("c4", "nope", {}),
    ("c5", "get_orders", {"account_id": "acc-666", "status": "open"}),
    ("c6", "explode", {"x": 1}),
    ("c7", "dump", {}),
]
# One call per step from here: tool calls of one step may run in any order, and
# which of them the ceiling stops must not depend on it.
SECOND: list[tuple[str, str, dict[str, Any]]] = [("c8", "get_orders", {"status": "closed"})]
THIRD: list[tuple[str, str, dict[str, Any]]] = [("c9", "lookup", {"order_id": "o-2"})]
STEPS = (FIRST, SECOND, THIRD)
TRUNCATED = "x" * (MAX_RESULT - len(TRUNCATION_MARKER)) + TRUNCATION_MARKER
EXPECTED: dict[str, tuple[str, bool]] = {  # call id: (content, is an error)
    "c1": ("order o-1", False),
    "c2": (model_sentence(Outcome.INVALID_ARGS, ["order_id"]), True),
    "c3": (model_sentence(Outcome.INVALID_ARGS, ["order_id"]), True),
    "c4": (model_sentence(Outcome.UNAVAILABLE), True),
    "c5": (model_sentence(Outcome.INVALID_ARGS), True),
    "c6": (model_sentence(Outcome.ERROR), True),
    "c7": (TRUNCATED, False),
    "c8": (f"{ACCOUNT}:closed", False),
    "c9": (model_sentence(Outcome.LIMIT), True),
}
OUTCOMES = {
    "c1": Outcome.OK,
    "c2": Outcome.INVALID_ARGS,
    "c3": Outcome.INVALID_ARGS,
    "c4": Outcome.UNAVAILABLE,
    "c5": Outcome.INVALID_ARGS,
    "c6": Outcome.ERROR,
    "c7": Outcome.OK,
    "c8": Outcome.OK,
    "c9": Outcome.LIMIT,
}
FINAL = "All done."
