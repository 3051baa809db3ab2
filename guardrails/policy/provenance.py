"""Provenance labels: which sources each value of a session was seen in.

Every value that enters a session is labelled with its source: ``user`` (the
user's input, trusted), ``context`` (the turn context's values, trusted) and
each tool, whose results are untrusted unless the policy trusts the tool. A
label is a bit in a per-session map from a value's key (its kind and normal
form) to the bits of the sources it was seen in.

Memory is bounded: at most ``max_values`` keys per session and
``max_sessions`` sessions in memory (least recently used first out). A
session that reached ``max_values`` keeps what it has and answers ``None``
(cannot say) for a value it does not know, so a rule never passes on a record
it knows to be partial. Turns without a session get a record of their own.

With a store, labels also go to the store (append-only chunks of 12-byte
digests, never the values), and a session's record is brought up to date
from the store before each check, so it spans processes and restarts.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from ._extract import extract, extract_tokens, extract_value, fingerprint, key

__all__ = ["Ledger", "Ledgers", "SessionView", "Sources"]

USER = "user"
CONTEXT = "context"
_KEY_PREFIX = "guardrails:provenance:"


class Sources:
    """The sources a policy knows: a bit each; which of them are trusted."""

    __slots__ = ("bits", "masks", "other", "trusted")

    def __init__(self, tools: Iterable[str], trusted_tools: Iterable[str]) -> None:
        names = [USER, CONTEXT, *sorted(set(tools))]
        self.bits = {name: 1 << i for i, name in enumerate(names)}
        # Labels read from the store under a name this policy does not know.
        self.other = 1 << len(names)
        trusted = self.bits[USER] | self.bits[CONTEXT]
        for name in trusted_tools:
            trusted |= self.bits[name]
        self.trusted = trusted
        self.masks: dict[frozenset[str], int] = {}

    def mask_of(self, names: frozenset[str]) -> int:
        mask = self.masks.get(names)
        if mask is None:
            mask = 0
            for name in names:
                mask |= self.bits.get(name, 0)
            self.masks[names] = mask
        return mask

    def names_of(self, mask: int) -> list[str]:
        return sorted(name for name, bit in self.bits.items() if mask & bit)


class Ledger:
    """The labels of one session."""

    __slots__ = ("contexts", "entries", "limit", "lock", "overflowed", "stamp", "synced", "view")

    def __init__(self, limit: int, *, overflowed: bool = False) -> None:
        self.stamp: Any = None  # the call whose check last read the store
        self.view: SessionView | None = None
        self.entries: dict[Any, int] = {}
        self.limit = limit
        self.overflowed = overflowed
        self.synced = 0  # the last store chunk read
        self.contexts: list[Any] = []  # the context objects already labelled (a few)
        self.lock = threading.Lock()

    def add(self, keys: Iterable[Any], bit: int) -> None:
        entries = self.entries
        get = entries.get
        with self.lock:
            room = self.limit - len(entries)
            for key in keys:
                old = get(key)
                if old is None:
                    if room <= 0:
                        self.overflowed = True
                        continue
                    room -= 1
                    entries[key] = bit
                elif not old & bit:
                    entries[key] = old | bit

    def find(self, key: Any) -> int | None:
        mask = self.entries.get(key, 0)
        if not mask and self.overflowed:
            return None
        return mask


class SessionView:
    """One session's labels as a rule sees them (``rules.Seen``)."""

    __slots__ = ("hashed", "ledger", "mask_of", "trusted")

    def __init__(self, ledger: Ledger, sources: Sources, hashed: bool) -> None:
        self.ledger = ledger
        self.trusted = sources.trusted
        self.mask_of = sources.mask_of
        self.hashed = hashed

    def find(self, kind: str, value: str) -> int | None:
        return self.lookup(key(kind, value))

    def lookup(self, item: str) -> int | None:
        """The sources of one key (``_extract.key``): a mask, or None when it cannot say."""
        ledger = self.ledger
        mask = ledger.entries.get(fingerprint(item) if self.hashed else item, 0)
        if not mask and ledger.overflowed:
            return None
        return mask


class Ledgers:
    """Every session's ledger, bounded, optionally backed by a store."""

    __slots__ = (
        "forgotten",
        "last",
        "lock",
        "max_sessions",
        "max_values",
        "sessions",
        "sources",
        "store",
        "turns",
    )

    def __init__(
        self,
        sources: Sources,
        *,
        store: Any = None,
        max_values: int = 100_000,
        max_sessions: int = 1_000,
    ) -> None:
        self.sources = sources
        self.store = store
        self.max_values = max_values
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[tuple[str, str], Ledger] = OrderedDict()
        self.turns: weakref.WeakKeyDictionary[Any, Ledger] = weakref.WeakKeyDictionary()
        # Sessions pushed out of memory with no store to reload them from.
        self.forgotten: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.lock = threading.Lock()
        # The ledger of the last (turn, context) asked for: consecutive calls
        # of one turn skip the lookup.
        self.last: tuple[Any, Any, Ledger] | None = None

    # -- finding a session's ledger ---------------------------------------------

    def ledger(self, turn: Any, context: Any, stamp: Any = None, *, sync: bool = True) -> Ledger:
        """The ledger of the turn's session. With a store, first brought up to date
        with what other processes added, once per ``stamp`` (a call id)."""
        last = self.last
        if last is not None and last[0] is turn and last[1] is context:
            found = last[2]
        else:
            found = self._find(turn, context)
            if turn is not None:
                self.last = (turn, context, found)
        if sync and self.store is not None and (stamp is None or found.stamp != stamp):
            session = getattr(context, "session", None)
            if session is not None:
                self._sync((getattr(context, "tenant", None) or "", str(session)), found)
                found.stamp = stamp
        return found

    def _find(self, turn: Any, context: Any) -> Ledger:
        session = getattr(context, "session", None)
        if session is None:
            return self._turn_ledger(turn)
        key = (getattr(context, "tenant", None) or "", str(session))
        with self.lock:
            ledger = self.sessions.get(key)
            if ledger is not None:
                self.sessions.move_to_end(key)
            else:
                partial = self.store is None and key in self.forgotten
                ledger = self.sessions[key] = Ledger(self.max_values, overflowed=partial)
                if len(self.sessions) > self.max_sessions:
                    old, _ = self.sessions.popitem(last=False)
                    if self.store is None:
                        self.forgotten[old] = None
                        if len(self.forgotten) > 100 * self.max_sessions:
                            self.forgotten.popitem(last=False)
        return ledger

    def _turn_ledger(self, turn: Any) -> Ledger:
        if turn is None:
            return Ledger(self.max_values)
        with self.lock:
            ledger = self.turns.get(turn)
            if ledger is None:
                ledger = self.turns[turn] = Ledger(self.max_values)
        return ledger

    def view(self, turn: Any, context: Any, stamp: Any = None) -> SessionView:
        """The labels a rule checks against, with the context's values labelled."""
        ledger = self.ledger(turn, context, stamp)
        contexts = ledger.contexts
        if context is not None and not (contexts and contexts[-1] is context):
            if not any(c is context for c in contexts):
                self._label_context(ledger, context)
            else:
                contexts.remove(context)
                contexts.append(context)
        view = ledger.view
        if view is None:
            view = ledger.view = SessionView(ledger, self.sources, self.store is not None)
        return view

    # -- labelling ---------------------------------------------------------------

    def label_text(
        self, turn: Any, context: Any, source: str, text: str, *, words: bool = False
    ) -> int:
        """Label every value found in ``text`` as seen in ``source``; the count found.

        With ``words``, each word is a ``text`` value too (the user's input)."""
        found = extract_tokens(text) if words else extract(text)
        return self._label(turn, context, source, found)

    def label_value(self, turn: Any, context: Any, source: str, value: Any) -> int:
        """Label every value found in a JSON-like value (strings searched, numbers as text)."""
        return self._label(turn, context, source, extract_value(value))

    def _label(self, turn: Any, context: Any, source: str, found: set[str]) -> int:
        if not found:
            return 0
        bit = self.sources.bits.get(source, self.sources.other)
        # Writing needs no read first: the next check reads what others added.
        ledger = self.ledger(turn, context, sync=False)
        if self.store is None:
            ledger.add(found, bit)
            return len(found)
        digests = [fingerprint(item) for item in found]
        ledger.add(digests, bit)
        session = getattr(context, "session", None)
        if session is not None:
            self._write(context, source, digests)
        return len(found)

    def _label_context(self, ledger: Ledger, context: Any) -> None:
        found = extract_value(dict(getattr(context, "values", {}) or {}))
        for value in _strings(getattr(context, "values", {})):
            extract_tokens(value, found)
        keys: Iterable[Any] = found
        if self.store is not None:
            keys = [fingerprint(item) for item in found]
        ledger.add(keys, self.sources.bits[CONTEXT])
        ledger.contexts.append(context)
        del ledger.contexts[:-8]

    # -- the store: append-only chunks of digests ---------------------------------

    def _write(self, context: Any, source: str, digests: list[bytes]) -> None:
        prefix = _prefix(context)
        payload = json.dumps({"source": source, "keys": [d.hex() for d in digests]})
        index = self.store.incr(prefix + "n", 1)
        self.store.compare_and_set(f"{prefix}{index}", None, payload)

    def _sync(self, key: tuple[str, str], ledger: Ledger) -> None:
        prefix = f"{_KEY_PREFIX}{len(key[0])}:{key[0]}:{key[1]}:"
        last = self.store.incr(prefix + "n", 0)
        bits = self.sources.bits
        for index in range(ledger.synced + 1, last + 1):
            raw = self.store.get(f"{prefix}{index}")
            # A chunk counted but not written yet (its writer is between the
            # two calls) is skipped; the labels it carries also sit in the
            # writer's own process.
            if raw is not None:
                chunk = json.loads(raw)
                bit = bits.get(chunk.get("source"), self.sources.other)
                ledger.add((bytes.fromhex(h) for h in chunk.get("keys", ())), bit)
        ledger.synced = max(ledger.synced, last)


def _prefix(context: Any) -> str:
    tenant = getattr(context, "tenant", None) or ""
    return f"{_KEY_PREFIX}{len(tenant)}:{tenant}:{context.session}:"


def _strings(value: Any, depth: int = 0) -> list[str]:
    """The strings inside a context's values (bounded depth)."""
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    if depth < 16 and isinstance(value, dict | list | tuple):
        items = value.values() if isinstance(value, dict) else value
        for item in items:
            out.extend(_strings(item, depth + 1))
    elif depth < 16 and hasattr(value, "values") and callable(value.values):
        for item in value.values():
            out.extend(_strings(item, depth + 1))
    return out
