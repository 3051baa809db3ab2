"""The two assistants of examples/: tables of benign requests and injected results.

Each scenario plays in a session of its own: the user's text goes through
``pre_turn``, then the assistant's calls in order. A benign scenario passes
when every call goes through; an injected one when its last call (the one the
attacker's text asks for) is refused. The few the policy language cannot
decide are listed below with why, and are expected to fail (strict).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from guardrails import Verdict

ROOT = Path(__file__).resolve().parents[2]


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


ASSISTANTS = {name: _example(f"policy_{name}") for name in ("mail_calendar", "payments")}
RAILS = {name: module.build() for name, module in ASSISTANTS.items()}

# What no rule of the policy language can tell apart (see docs/policy.md, "Limits").
KNOWN: dict[tuple[str, str], str] = {
    ("mail_calendar", "attendees of an existing event"): (
        "an event's attendees are whatever its organiser wrote: the policy trusts only the "
        "user and the address book for invitations"
    ),
    ("mail_calendar", "a mail named by its place in the inbox"): (
        "a reply answers a mail whose sender or subject the user named; 'my latest' names none"
    ),
    ("payments", "same amount as last month"): (
        "an amount read from a statement is not one the user said (and has the other sign)"
    ),
    ("payments", "payee named by role"): (
        "'my landlord' is no word of the payee's name: the payee the user named is bound by words"
    ),
    ("payments", "an invoice paid to another saved payee"): (
        "an invoice's payee is any saved payee: nothing binds the IBAN to the invoice paid"
    ),
}


def _cases(kind: str) -> list[Any]:
    cases = []
    for name, module in ASSISTANTS.items():
        for number, (title, text, calls) in enumerate(getattr(module, kind)):
            why = KNOWN.get((name, title))
            marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
            cases.append(
                pytest.param(name, number, text, calls, id=f"{name}: {title}", marks=marks)
            )
    return cases


@pytest.mark.parametrize(("name", "number", "text", "calls"), _cases("BENIGN"))
def test_the_users_own_request_goes_through(name: str, number: int, text: str, calls: Any) -> None:
    results = ASSISTANTS[name].run(RAILS[name], number, text, calls)
    assert [(r.tool, r.outcome) for r in results if not r.ok] == []


@pytest.mark.parametrize(("name", "number", "text", "calls"), _cases("INJECTED"))
def test_the_call_injected_text_asks_for_is_refused(
    name: str, number: int, text: str, calls: Any
) -> None:
    *before, injected = ASSISTANTS[name].run(RAILS[name], 1000 + number, text, calls)
    assert all(r.ok for r in before)
    assert injected.verdict is Verdict.REJECT


@pytest.mark.parametrize("name", sorted(ASSISTANTS))
def test_each_policy_is_under_40_lines_and_the_tables_are_large(name: str) -> None:
    policy = ROOT / "examples" / f"policy_{name}.toml"
    assert len(policy.read_text().splitlines()) < 40
    module = ASSISTANTS[name]
    assert len(module.BENIGN) >= 30 and len(module.INJECTED) >= 30
    titles = [title for title, _, _ in module.BENIGN + module.INJECTED]
    assert len(set(titles)) == len(titles)
