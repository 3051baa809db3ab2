"""Intent gates and per-tool ceilings, as guards.

- ``Intents`` keeps the user's input of each live turn; the pre_turn guard
  ``policy:intent`` labels it and takes every gated tool it does not mention
  out of the offer; ``policy:<tool>.intent`` refuses a call of a gated tool
  that the turn's input did not mention (or when no input was seen);
- ``Counts`` counts the calls of each ceiling-bound tool per turn (on the
  turn) and per session (in the store, or in memory); ``policy:<tool>.ceiling``
  reads them, and the policy's hook counts each call that reaches the tool.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

from ..context import GuardResult, Invocation
from ..rules.effects import Restrict
from ..rules.triggers import TermSet
from ..verdicts import EscapeReason, Verdict
from .inflect import inflected
from .policy import Ceiling
from .provenance import USER, Ledgers

__all__ = ["CeilingCheck", "Counts", "IntentCheck", "Intents", "PreTurnCheck"]

_PASS = Verdict.PASS


# -- intent gates ------------------------------------------------------------------


class Intents:
    """The user's input of each turn, and which gated tools it mentions."""

    __slots__ = ("gates", "lock", "mentions", "turns")

    def __init__(self, intents: Any) -> None:
        # Each term also matches its regular English forms (``inflect.py``).
        self.gates = {tool: TermSet(inflected(terms)) for tool, terms in intents.items()}
        self.turns: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
        # turn -> (how many inputs it had, the gated tools they mention)
        self.mentions: weakref.WeakKeyDictionary[Any, tuple[int, frozenset[str]]] = (
            weakref.WeakKeyDictionary()
        )
        self.lock = threading.Lock()

    def seen(self, turn: Any, text: Any) -> frozenset[str]:
        """Record the user's input of ``turn``; the gated tools it mentions."""
        mentioned = frozenset(t for t, terms in self.gates.items() if terms.find(text))
        if turn is not None:
            with self.lock:
                self.turns.setdefault(turn, []).append(text)
        return mentioned

    def mentioned(self, turn: Any) -> frozenset[str] | None:
        """The gated tools the user's input of ``turn`` mentions; None if none was seen."""
        texts = self.turns.get(turn) if turn is not None else None
        if not texts:
            return None
        cached = self.mentions.get(turn)
        if cached is not None and cached[0] == len(texts):
            return cached[1]
        found = frozenset(
            t for t, terms in self.gates.items() if any(terms.find(x) for x in list(texts))
        )
        self.mentions[turn] = (len(texts), found)
        return found


class PreTurnCheck:
    __slots__ = ("__name__", "intents", "ledgers", "reads_store")

    def __init__(self, intents: Intents, ledgers: Ledgers) -> None:
        self.__name__ = "policy:intent"
        self.intents = intents
        self.ledgers = ledgers
        self.reads_store = ledgers.store  # labels written off the event loop under apre_turn

    def __call__(self, request: Any) -> Verdict | GuardResult:
        text = request.text
        self.ledgers.label_text(request.turn, request.context, USER, text.raw, words=True)
        mentioned = self.intents.seen(request.turn, text)
        closed = frozenset(t for t in self.intents.gates if t not in mentioned)
        withheld = closed.intersection(request.tools)
        if not withheld:
            return _PASS
        # A call of a withheld tool carries its gate's reject (``policy:TOOL.intent``).
        gates = {tool: f"policy:{tool}.intent" for tool in withheld}
        return GuardResult.rejected(
            "intent_not_mentioned",
            evidence=Restrict(remove=withheld, detail=sorted(withheld), gates=gates),
        )


class IntentCheck:
    __slots__ = ("__name__", "intents", "tool")

    def __init__(self, tool: str, intents: Intents) -> None:
        self.__name__ = f"policy:{tool}.intent"
        self.tool = tool
        self.intents = intents

    def __call__(self, inv: Invocation) -> Verdict | GuardResult:
        mentioned = self.intents.mentioned(inv.turn)
        if mentioned is None:
            # No user input was seen for this turn: the gate cannot say (the
            # guard is fail-closed, so this refuses, and the escape is counted).
            return GuardResult.not_evaluated("no_user_input", escape=EscapeReason.NOT_CONFIGURED)
        if self.tool in mentioned:
            return _PASS
        return GuardResult.rejected("intent_not_mentioned")


# -- ceilings ------------------------------------------------------------------------


class Counts:
    """Calls per tool per turn (on the turn) and per session (store or memory)."""

    __slots__ = ("ceilings", "lock", "memory", "store")

    def __init__(self, store: Any, ceilings: dict[str, Ceiling]) -> None:
        self.store = store
        self.ceilings = ceilings
        self.memory: OrderedDict[str, int] = OrderedDict()
        self.lock = threading.Lock()

    @staticmethod
    def session_key(tool: str, context: Any) -> str | None:
        session = getattr(context, "session", None)
        if session is None:
            return None
        tenant = getattr(context, "tenant", None) or ""
        return f"guardrails:policy:calls:{len(tenant)}:{tenant}:{session}:{tool}"

    def session_count(self, key: str, by: int) -> int:
        if self.store is not None:
            return int(self.store.incr(key, by))
        with self.lock:
            count = self.memory.get(key, 0) + by
            self.memory[key] = count
            self.memory.move_to_end(key)
            if len(self.memory) > 100_000:
                self.memory.popitem(last=False)
            return count

    def exceeded(self, inv: Invocation, by: int) -> bool:
        """Add ``by`` to the counts of ``inv``'s tool; whether a ceiling is passed."""
        ceiling = self.ceilings[inv.name]
        over = False
        if ceiling.per_turn is not None and inv.turn is not None:
            counters = inv.turn.counters
            key = f"policy:{inv.name}"
            counters[key] = count = counters.get(key, 0) + by
            over = count > ceiling.per_turn if by else count >= ceiling.per_turn
        if ceiling.per_session is not None:
            session = self.session_key(inv.name, inv.context)
            if session is None:
                raise LookupError("no session")
            count = self.session_count(session, by)
            over = over or (count > ceiling.per_session if by else count >= ceiling.per_session)
        return over


class CeilingCheck:
    __slots__ = ("__name__", "ceiling", "counts", "reads_store", "tool")

    def __init__(self, tool: str, ceiling: Ceiling, counts: Counts) -> None:
        self.__name__ = f"policy:{tool}.ceiling"
        self.tool, self.ceiling, self.counts = tool, ceiling, counts
        # A per-session count lives in the store: read off the event loop under acall.
        self.reads_store = counts.store if ceiling.per_session is not None else None

    def __call__(self, inv: Invocation) -> Verdict | GuardResult:
        try:
            over = self.counts.exceeded(inv, 0)
        except LookupError:
            return GuardResult.not_evaluated("no_session", escape=EscapeReason.NOT_CONFIGURED)
        return GuardResult.rejected("ceiling_reached") if over else _PASS
