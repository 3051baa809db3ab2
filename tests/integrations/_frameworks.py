"""What the framework adapter tests share: one scenario, run by each framework's own agent.

The model asks, in its first step, for a valid call, calls with missing and
wrong arguments, an unknown tool, a bound parameter, a tool that raises with a
secret in its message, and an oversized result; then for two more calls, one
step each, the second of which is over the per-turn ceiling. Around it: any
arguments the model may send, pre_turn rules, a probe of the turn's context,
secrets for an action tool and a backstop action.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, Secret, TurnContext, Verdict, guard
from guardrails.middleware._render import TRUNCATION_MARKER
from guardrails.rules import required_action, trigger
from guardrails.verdicts import model_sentence
from tests import _examples

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


async def shout(text: str) -> str:
    """An async tool."""
    return text.upper()


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


def secret_rails(**engine: Any) -> Guardrails:
    return Guardrails(secrets={"payments": API_KEY}.__getitem__, **engine)


def rails(**engine: Any) -> Guardrails:
    """The scenario's engine (its ceiling and result size); ``engine`` adds a recorder ..."""
    return Guardrails(max_calls_per_turn=CEILING, max_result_chars=MAX_RESULT, **engine)


def context() -> TurnContext:
    """The run's context: the tenant, and the account ``get_orders`` is bound to."""
    return TurnContext(tenant="acme", values={"account_id": ACCOUNT})


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

# A call with an argument ``lookup`` does not declare: refused as in a direct call, never run.
UNDECLARED = ("u1", "lookup", {"order_id": "o-1", "from_account": "acc-666"})
# docs/tool_call.md, "Undeclared arguments".
UNDECLARED_SENTENCE = (
    "The arguments were not accepted. Send only the parameters that the tool declares."
)

# -- pre_turn, and what each call's turn knows -----------------------------------------

LOG_PROMPT = "show me the log"  # withholds ``dump``
REFUSED_PROMPT = "a chargeback please"  # refused as ``money_subject``
REFUSAL = "money_subject"


def trigger_rails() -> Guardrails:
    """pre_turn: a turn about the log is not offered ``dump``; one about a chargeback is refused."""
    return Guardrails(
        guards=[
            trigger(["log"], remove=["dump"], name="no_dumps"),
            trigger(["chargeback"], refuse=REFUSAL, name="money"),
        ]
    )


def context_probe() -> tuple[Guardrails, list[TurnContext]]:
    """An engine whose one guard keeps the context of every call it sees."""
    seen: list[TurnContext] = []

    @guard
    def look(invocation: Any) -> Verdict:
        seen.append(invocation.context)
        return Verdict.PASS

    return Guardrails(guards=[look]), seen


def backstop() -> tuple[Guardrails, Any, list[str]]:
    """An engine whose post_run calls ``notify_human`` when the answer promises to escalate.

    Returns the engine, the tool (account bound from the context: ``BACKSTOP_BIND``)
    and the notifications it made.
    """
    notified: list[str] = []

    def notify_human(reason: str, account_id: str) -> str:
        """Hand the conversation to a human."""
        notified.append(f"{account_id}: {reason}")
        return "notified"

    engine = Guardrails(
        guards=[
            required_action(
                "notify_human",
                when=lambda run: "escalate" in (run.text or ""),
                arguments={"reason": "promised"},
            )
        ]
    )
    return engine, notify_human, notified


BACKSTOP_BIND = {"notify_human": {"bind": {"account_id": "account_id"}}}
ESCALATE = "I will escalate this."
NOTIFIED = [f"{ACCOUNT}: promised"]


# -- any arguments the model may send to ``lookup`` --------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_VALID_LOOKUP = st.fixed_dictionaries(
    {"order_id": st.text(max_size=8)}, optional={"verbose": st.booleans()}
)
LOOKUP_ARGUMENTS = st.one_of(
    st.just({"order_id": "o-1"}),
    # Valid arguments and one ``lookup`` does not declare: refused, as by a direct call.
    st.builds(lambda valid, x: {**valid, "x": x}, _VALID_LOOKUP, JSON_VALUES),
    st.dictionaries(st.sampled_from(["order_id", "verbose", "x"]), JSON_VALUES, max_size=3),
)
# Where arguments travel as JSON text, the model may also send text that is not JSON.
LOOKUP_ARGUMENTS_OR_TEXT = st.one_of(LOOKUP_ARGUMENTS, st.text(max_size=12))
_LOOKUP = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "verbose": {"type": "boolean"}},
    "required": ["order_id"],
}
_CLOSED = jsonschema_rs.validator_for({**_LOOKUP, "additionalProperties": False})
_OPEN = jsonschema_rs.validator_for(_LOOKUP)
_INVALID = model_sentence(Outcome.INVALID_ARGS).split(" Check")[0]


def check_lookup_answer(
    arguments: Any, content: str, is_error: bool | None = None, *, closed: bool = True
) -> bool:
    """The model read ``lookup``'s result for valid arguments, else the invalid-arguments sentence.

    ``closed``: undeclared keys are refused (every adapter's default).
    ``is_error`` is the framework's error flag, where it
    has one. Returns whether the arguments were valid.
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            arguments = None
    valid = isinstance(arguments, dict) and (_CLOSED if closed else _OPEN).is_valid(arguments)
    if is_error is not None:
        assert is_error is not valid
    if valid:
        assert content == lookup(**{k: v for k, v in arguments.items() if k != "x"})
    else:
        assert content.startswith(_INVALID)
    return valid


def answers_to_any_lookup_arguments(
    answer: Callable[[Any], tuple[str, bool | None]],
    *,
    text: bool = True,
    closed: bool = True,
    examples: int = 40,
) -> None:
    """``answer(arguments)`` runs one call of ``lookup`` through the framework: any
    arguments (JSON text too, with ``text``) get ``check_lookup_answer``'s closed answer.

    ``answer`` returns what the model read and the framework's error flag (None
    where it has none). Both answers, a result and the sentence, must be reached.
    """
    valid: set[bool] = set()

    @settings(
        max_examples=_examples.examples(examples),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(arguments=LOOKUP_ARGUMENTS_OR_TEXT if text else LOOKUP_ARGUMENTS)
    def check(arguments: Any) -> None:
        content, is_error = answer(arguments)
        valid.add(check_lookup_answer(arguments, content, is_error, closed=closed))

    check()
    assert valid == {True, False}
