"""Argument policies: what parameter rules, provenance checks and labelling cost.

- ``policy: parameter rules``: the valid transfer call (``_transfer.py``) with
  no policy (the floor) and with five parameter rules (a pattern on the
  account, bounds on the amount, the currency from a set, a bound from the
  turn context, a pattern on the memo); ``added µs`` is what the five rules add.
- ``policy: provenance check``: a valid ``send_mail`` call whose ``to`` has
  an email-kind rule (the floor), and the same rule that also requires the
  address to be grounded in the user's input and not to come only from
  untrusted results, in a session that has already seen 10,000 untrusted
  values; ``added µs`` is the provenance check of one argument (both engines
  label every result, so labelling the tool's small result is in the floor).
- ``policy: safe default and embedded values``: a ``post`` call of a tool
  with an effect (a recipient, a subject, a 16,000-character body of
  mail-like text holding two links and two addresses the user gave) with no
  policy (the floor), with ``[defaults] grounded_in`` (the body free), and
  with the body's links, addresses, IBANs and phone numbers required to be
  grounded (``embedded``), and with a kind of the policy's own added to them.
- ``policy: labelling``: labelling a 1 MB untrusted tool result (mail-like
  text with addresses, links and numbers) into a new session record, and the
  value extraction alone, and the scan of one kind of the policy's own
  (``[kinds.NAME]``); ``MB/s`` over the text's size. Floor: one
  ``str.lower()`` pass. The labelling is timed again with the garbage
  collector on.

Run: ``python benchmarks/run.py --only bench_policy`` (add ``--quick``).
"""

from __future__ import annotations

import random
import statistics
import string
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Budget, budget, compare, per_op_ns, row
from _transfer import SCHEMA, VALID, transfer

from guardrails import Guard, Guardrails, Tool, Verdict, tool
from guardrails.policy import CustomKind, Param, Policy
from guardrails.policy._extract import extract
from guardrails.policy.attach import installed
from guardrails.policy.provenance import Ledgers, Sources

FIVE_RULES = Policy(
    params=(
        Param("transfer", "account_id", pattern=r"acc-[0-9]{1,8}"),
        Param("transfer", "amount", min=0.01, max=10_000),
        Param("transfer", "currency", values=["USD", "EUR", "GBP"]),
        Param("transfer", "amount", max_from="daily_limit", name="policy:transfer.daily"),
        Param("transfer", "memo", pattern=r"[^<>]{0,140}"),
    )
)


def mail_text(rng: random.Random, size: int) -> str:
    """Mail-like text: words, sentences, lines, some addresses, links and numbers."""
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(2000)]
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(words)
        roll = rng.random()
        if roll < 0.002:
            word = f"user{rng.randint(0, 99_999)}@mail{rng.randint(0, 99)}.example"
        elif roll < 0.003:
            word = f"https://site{rng.randint(0, 999)}.example/p/{rng.randint(0, 9999)}"
        elif roll < 0.013:
            word = str(rng.randint(0, 10**9))
        elif roll < 0.063:
            word += ".\n"
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


def _rules(quick: bool) -> list[dict[str, Any]]:
    bare = Guardrails([Tool("transfer", transfer, SCHEMA)])
    ruled = Guardrails([Tool("transfer", transfer, SCHEMA)], policy=FIVE_RULES)
    # The guard boundary alone: five guards that return pass and look at nothing.
    trivial = Guardrails(
        [Tool("transfer", transfer, SCHEMA)],
        [Guard(lambda inv: Verdict.PASS, name=f"trivial_{i}") for i in range(5)],
    )
    plain_turn = bare.turn(values={"daily_limit": 1_000})
    ruled_turn = ruled.turn(values={"daily_limit": 1_000})
    trivial_turn = trivial.turn(values={"daily_limit": 1_000})
    args = {**VALID, "memo": "rent for march"}
    assert ruled_turn.call("transfer", args).ok
    return compare(
        "policy: parameter rules",
        {
            "valid call, no policy": lambda: plain_turn.call("transfer", args),
            "valid call, five parameter rules": lambda: ruled_turn.call("transfer", args),
            "valid call, five trivial guards (the boundary alone)": lambda: trivial_turn.call(
                "transfer", args
            ),
        },
        floor="valid call, no policy",
        quick=quick,
        # Keep the per-turn result list from growing across rounds.
        between_rounds=lambda: [t.results.clear() for t in (plain_turn, ruled_turn, trivial_turn)],
    )


@tool
def send_mail(to: str, subject: str) -> str:
    """Send a mail."""
    return "sent"


@tool
def read_mail() -> str:
    """Mail (untrusted)."""
    return ""


@tool
def lookup(q: str) -> str:
    """Look something up (never called: its rule switches labelling on)."""
    return ""


def _provenance(quick: bool) -> list[dict[str, Any]]:
    # Both engines label every result (a provenance rule on another tool
    # switches labelling on): the difference is the check of one argument.
    labelling = Param("lookup", "q", grounded_in=["user"])
    kind_only = Policy(params=(Param("send_mail", "to", kind="email"), labelling))
    checked = Policy(
        params=(
            Param("send_mail", "to", kind="email", grounded_in=["user"], not_only_untrusted=True),
            labelling,
        )
    )
    engines = {}
    for label, policy in (("kind rule", kind_only), ("kind rule + provenance", checked)):
        rails = Guardrails([send_mail, read_mail, lookup], policy=policy)
        turn = rails.turn(session="bench")
        turn.pre_turn("send the report to ana@home.example")
        seen = installed(rails)
        assert seen is not None
        untrusted = "\n".join(f"from: person{i}@corp{i % 97}.example" for i in range(10_000))
        seen.ledgers.label_text(turn, turn.context, "read_mail", untrusted)
        assert turn.call("send_mail", {"to": "ana@home.example", "subject": "r"}).ok
        assert (
            label == "kind rule"
            or not turn.call("send_mail", {"to": "person7@corp7.example", "subject": "r"}).ok
        )
        engines[label] = turn
    args = {"to": "ana@home.example", "subject": "report"}
    return compare(
        "policy: provenance check (10,000 untrusted values seen)",
        {
            "send_mail, email-kind rule": lambda: engines["kind rule"].call("send_mail", args),
            "send_mail, email-kind rule + grounded_in + not_only_untrusted": lambda: engines[
                "kind rule + provenance"
            ].call("send_mail", args),
        },
        floor="send_mail, email-kind rule",
        quick=quick,
        between_rounds=lambda: [t.results.clear() for t in engines.values()],
    )


@tool(effect=True)
def post(to: str, subject: str, body: str) -> str:
    """Send a message (an effect)."""
    return "sent"


SAFE_DEFAULT = """
[defaults]
grounded_in = ["user", "trusted"]
[tools.post.params.body]
free = true
"""
EMBEDDED = """
[defaults]
grounded_in = ["user", "trusted"]
[tools.post.params.body]
embedded = ["url", "email", "iban", "phone"]
grounded_in = ["user", "trusted"]
"""

OWN_KIND = (
    EMBEDDED.replace('embedded = ["url"', 'embedded = ["nz_account", "url"')
    + """
[kinds.nz_account]
pattern = "[0-9]{2}[- ]?[0-9]{4}[- ]?[0-9]{7}[- ]?[0-9]{2,3}"
separators = "- "
"""
)


def _safe_default(quick: bool) -> list[dict[str, Any]]:
    from guardrails.policy import loads

    links = "https://docs.example/plan bob@work.example https://wiki.example/q3 ana@home.example"
    text = mail_text(random.Random(20_261_207), 16_000 - len(links) - 2)
    # mail_text's addresses, links and numbers are not the user's: keep its words only
    words = " ".join(w for w in text.split(" ") if w.replace(".", "").replace("\n", "").isalpha())
    body = f"{words[: 16_000 - len(links) - 1]} {links}"
    args = {"to": "bob@work.example", "subject": "plan", "body": body}
    turns = {}
    policies = (
        ("none", None),
        ("default", SAFE_DEFAULT),
        ("embedded", EMBEDDED),
        ("own kind", OWN_KIND),
    )
    for label, policy in policies:
        rails = Guardrails([post], policy=loads(policy) if policy else None)
        turn = rails.turn(session="bench")
        turn.pre_turn(f"post the plan to bob@work.example, {links}")
        assert turn.call("post", args).ok, label
        turns[label] = turn
    return compare(
        "policy: safe default and embedded values (16,000-character body)",
        {
            "post, no policy": lambda: turns["none"].call("post", args),
            "post, safe default (body free)": lambda: turns["default"].call("post", args),
            "post, safe default + embedded values in the body": lambda: turns["embedded"].call(
                "post", args
            ),
            "post, as above + a kind of the policy's own": lambda: turns["own kind"].call(
                "post", args
            ),
        },
        floor="post, no policy",
        quick=quick,
        between_rounds=lambda: [t.results.clear() for t in turns.values()],
    )


LABEL = "label an untrusted result, 1MB (new session record)"


def _labelling(quick: bool) -> list[dict[str, Any]]:
    text = mail_text(random.Random(20_261_201), 1_000_000)
    size = len(text)
    ledgers = Ledgers(Sources(["fetch"], []))
    account = CustomKind(
        "nz_account", r"[0-9]{2}[- ]?[0-9]{4}[- ]?[0-9]{7}[- ]?[0-9]{2,3}", separators="- "
    )
    cases = {
        "floor: str.lower() 1MB": lambda: text.lower(),
        "extract values, 1MB": lambda: extract(text),
        LABEL: lambda: ledgers.label_text(None, None, "fetch", text),
        "find the values of a kind of the policy's own, 1MB": lambda: account.find(text, set()),
    }
    # Each operation takes milliseconds: few rounds of one operation each.
    spec = budget(quick)
    rounds = Budget(rounds=max(5, spec.rounds // 10), round_s=0.0, max_n=1)
    samples = per_op_ns(cases, rounds)
    # The same labelling with the garbage collector on, as in an application.
    with_gc = per_op_ns({"label": cases[LABEL]}, rounds, collect_garbage=True)
    samples[f"{LABEL}, garbage collector on"] = with_gc["label"]
    floor = statistics.median(samples["floor: str.lower() 1MB"])
    rows = []
    for name, values in samples.items():
        median_ns = statistics.median(values)
        rows.append(
            row(
                "policy: labelling",
                name,
                median_ns / 1e3,
                best_us=round(min(values) / 1e3, 1),
                mb_per_s=round(size / 1e6 / (median_ns / 1e9), 1),
                ratio=round(median_ns / floor, 1),
                rounds=len(values),
            )
        )
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    return [*_rules(quick), *_provenance(quick), *_safe_default(quick), *_labelling(quick)]


if __name__ == "__main__":  # pragma: no cover
    for r in run(quick="--quick" in sys.argv):
        print(r)
