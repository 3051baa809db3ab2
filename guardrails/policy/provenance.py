"""Provenance labels: which sources each value of a session was seen in.

Every value that enters a session is labelled with its source: ``user`` (the
user's input, trusted), ``context`` (the turn context's values, trusted) and
each tool, whose results are untrusted unless the policy trusts the tool. A
label is a bit in a per-session map from a value's key (its kind and normal
form) to the bits of the sources it was seen in.

Memory is bounded, and no bound can be filled into a pass (``_ledger.py``):
each session keeps at most ``max_values`` trusted and ``max_values`` untrusted
keys, apart, so untrusted text never pushes out a trusted label; each tenant
keeps at most ``max_sessions`` sessions, so one tenant never pushes out
another's; at most ``max_tenants`` tenants are kept. A record that reached a
bound, or that was pushed out with no store to read it back from, knows which
sources it may be missing (``partial``): a rule that needs one of them and does
not find the value refuses. Turns without a session get a record of their own.

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
from ._ledger import FORGOTTEN_PER_KEPT, Forgotten, Ledger, Tenant
from ._phrases import phrases
from .custom_kinds import CustomKind, find_in_value

__all__ = ["Ledger", "Ledgers", "SessionView", "Sources"]

USER = "user"
CONTEXT = "context"
TRUSTED = "trusted"
_KEY_PREFIX = "guardrails:provenance:"


class Sources:
    """The sources a policy knows: a bit each; which of them are trusted."""

    __slots__ = ("all", "bits", "masks", "other", "trusted")

    def __init__(
        self,
        tools: Iterable[str],
        trusted_tools: Iterable[str],
        fields: Iterable[tuple[str, str]] = (),
    ) -> None:
        """``fields``: ``(tool, source name)`` of each field source (``fields.py``)."""
        fields = sorted(set(fields))
        names = [USER, CONTEXT, *sorted(set(tools)), *(name for _, name in fields)]
        self.bits = {name: 1 << i for i, name in enumerate(names)}
        # Labels read from the store under a name this policy does not know.
        self.other = 1 << len(names)
        self.all = (self.other << 1) - 1
        trusted = self.bits[USER] | self.bits[CONTEXT]
        trusted_tools = set(trusted_tools)
        for name in trusted_tools:
            trusted |= self.bits[name]
        for tool, name in fields:
            if tool in trusted_tools:
                trusted |= self.bits[name]  # a field of a trusted tool's results
        self.trusted = trusted
        self.masks: dict[frozenset[str], int] = {}

    def mask_of(self, names: frozenset[str]) -> int:
        mask = self.masks.get(names)
        if mask is None:
            mask = 0
            for name in names:
                bit = self.bits.get(name)
                if bit is None and name == TRUSTED:
                    bit = self.trusted  # the user, the context and every trusted tool
                mask |= bit or 0
            self.masks[names] = mask
        return mask

    def names_of(self, mask: int) -> list[str]:
        return sorted(name for name, bit in self.bits.items() if mask & bit)


class SessionView:
    """One session's labels as a rule sees them (``checks.Seen``)."""

    __slots__ = ("hashed", "ledger", "mask_of", "trusted")

    def __init__(self, ledger: Ledger, sources: Sources, hashed: bool) -> None:
        self.ledger = ledger
        self.trusted = sources.trusted
        self.mask_of = sources.mask_of
        self.hashed = hashed

    @property
    def partial(self) -> int:
        """The sources whose labels this record may be missing (0: it is complete)."""
        ledger = self.ledger
        return ledger.partial | ledger.pending

    def find(self, kind: str, value: str) -> int:
        return self.lookup(key(kind, value))

    def lookup(self, item: str) -> int:
        """The mask of the sources one key (``_extract.key``) was seen in; 0: not seen."""
        ledger, found = self.ledger, fingerprint(item) if self.hashed else item
        return ledger.trusted.get(found, 0) | ledger.untrusted.get(found, 0)  # Ledger.find


class Ledgers:
    """Every session's ledger, bounded per session and per tenant, optionally backed by a store."""

    __slots__ = (
        "forgotten",
        "kinds",
        "last",
        "lock",
        "max_sessions",
        "max_tenants",
        "max_values",
        "sources",
        "store",
        "tenants",
        "turns",
    )

    def __init__(
        self,
        sources: Sources,
        *,
        store: Any = None,
        max_values: int = 100_000,
        max_sessions: int = 1_000,
        max_tenants: int = 1_000,
        kinds: Iterable[CustomKind] = (),
    ) -> None:
        self.sources = sources
        # User-defined kinds: every text labelled is also scanned for their values.
        self.kinds = tuple(kinds)
        self.store = store
        self.max_values = max_values
        self.max_sessions = max_sessions
        self.max_tenants = max_tenants
        self.tenants: OrderedDict[Any, Tenant] = OrderedDict()
        self.turns: weakref.WeakKeyDictionary[Any, Ledger] = weakref.WeakKeyDictionary()
        # Tenants pushed out of memory with no store to reload their sessions from.
        self.forgotten = Forgotten(FORGOTTEN_PER_KEPT * max_tenants)
        self.lock = threading.Lock()
        # The ledger of the last (turn, context) asked for: consecutive calls
        # of one turn skip the lookup.
        self.last: tuple[Any, Any, Ledger] | None = None

    # -- finding a session's ledger ---------------------------------------------

    def ledger(self, turn: Any, context: Any, stamp: Any = None, *, sync: bool = True) -> Ledger:
        """The ledger of the turn's session. With a store, first brought up to date
        with what other processes added, once per ``stamp`` (a call id)."""
        last = self.last
        if last is not None and last[0] is turn and last[1] is context and not last[2].evicted:
            found = last[2]
        else:
            found = self._find(turn, context)
            if turn is not None:
                self.last = (turn, context, found)
        if sync and self.store is not None and (stamp is None or found.stamp != stamp):
            where = _where(context)
            if where is not None:
                self._sync(where, found)
                found.stamp = stamp
        return found

    def _new(self, *, partial: bool = False) -> Ledger:
        sources = self.sources
        return Ledger(
            self.max_values, sources.trusted, sources.all, partial=sources.all if partial else 0
        )

    def _find(self, turn: Any, context: Any) -> Ledger:
        where = _where(context)
        if where is None:
            return self._turn_ledger(turn)
        name, session = where
        with self.lock:
            tenant = self._tenant(name)
            ledger = tenant.sessions.get(session)
            if ledger is not None:
                tenant.sessions.move_to_end(session)
                return ledger
            # Without a store, a session pushed out before cannot be read back.
            ledger = self._new(partial=self.store is None and session in tenant.forgotten)
            tenant.sessions[session] = ledger
            tenant.evict(self.max_sessions, remember=self.store is None)
        return ledger

    def _tenant(self, name: Any) -> Tenant:
        """The tenant's sessions, made if needed (called under the lock)."""
        tenants = self.tenants
        tenant = tenants.get(name)
        if tenant is not None:
            tenants.move_to_end(name)
            return tenant
        lost = self.store is None and name in self.forgotten
        tenant = tenants[name] = Tenant(self.max_sessions, forgotten=lost)
        while len(tenants) > self.max_tenants:
            old, pushed = tenants.popitem(last=False)
            pushed.evict(0, remember=False)
            if self.store is None:
                self.forgotten.add(old)
        return tenant

    def _turn_ledger(self, turn: Any) -> Ledger:
        if turn is None:
            return self._new()
        with self.lock:
            ledger = self.turns.get(turn)
            if ledger is None:
                ledger = self.turns[turn] = self._new()
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
        view: SessionView | None = ledger.view
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
        if words:
            found |= phrases(text)  # quoted spans and runs of capitalised words
        for kind in self.kinds:
            kind.find(text, found)
        return self._label(turn, context, source, found)

    def label_value(self, turn: Any, context: Any, source: str, value: Any) -> int:
        """Label every value found in a JSON-like value (strings searched, numbers as text)."""
        found = find_in_value(self.kinds, value, extract_value(value))
        return self._label(turn, context, source, found)

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
        where = _where(context)
        if where is not None:
            self._write(where, source, digests)
        return len(found)

    def _label_context(self, ledger: Ledger, context: Any) -> None:
        values = dict(getattr(context, "values", {}) or {})
        found = find_in_value(self.kinds, values, extract_value(values))
        for value in _strings(getattr(context, "values", {})):
            extract_tokens(value, found)
            found |= phrases(value)
        keys: Iterable[Any] = found
        if self.store is not None:
            keys = [fingerprint(item) for item in found]
        ledger.add(keys, self.sources.bits[CONTEXT])
        ledger.contexts.append(context)
        del ledger.contexts[:-8]

    # -- the store: append-only chunks of digests ---------------------------------

    def _write(self, where: tuple[str, str], source: str, digests: list[bytes]) -> None:
        prefix = _prefix(where)
        payload = json.dumps({"source": source, "keys": [d.hex() for d in digests]})
        index = self.store.incr(prefix + "n", 1)
        self.store.compare_and_set(f"{prefix}{index}", None, payload)

    def _sync(self, where: tuple[str, str], ledger: Ledger) -> None:
        prefix = _prefix(where)
        last = self.store.incr(prefix + "n", 0)
        bits = self.sources.bits
        gap = 0
        for index in range(ledger.synced + 1, last + 1):
            raw = self.store.get(f"{prefix}{index}")
            if raw is None:
                # Counted but not written yet (its writer is between the two
                # calls, or died there): until it is, the record may miss
                # labels of any source; it is read again at the next check.
                gap = gap or index
                continue
            chunk = json.loads(raw)
            bit = bits.get(chunk.get("source"), self.sources.other)
            ledger.add((bytes.fromhex(h) for h in chunk.get("keys", ())), bit)
        ledger.pending = self.sources.all if gap else 0
        ledger.synced = max(ledger.synced, gap - 1 if gap else last)


def _where(context: Any) -> tuple[str, str] | None:
    """The context's (tenant, session) as exact text; None without a session."""
    session = getattr(context, "session", None)
    if session is None:
        return None
    tenant = getattr(context, "tenant", None)
    return ("" if tenant is None else _text(tenant)), _text(session)


def _text(value: Any) -> str:
    # A str subclass is read as the text it holds: none of its own methods
    # (hash, equality, length, format) runs, so none can raise or disagree.
    if value.__class__ is str:
        return value
    return str.__str__(value) if isinstance(value, str) else str(value)


def _prefix(where: tuple[str, str]) -> str:
    tenant, session = where
    return f"{_KEY_PREFIX}{len(tenant)}:{tenant}:{session}:"


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
