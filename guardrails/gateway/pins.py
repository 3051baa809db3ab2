"""Pinned tool definitions, kept in the store (shared by every replica of a gateway).

The first time a gateway sees an upstream tool, the fields of its definition
that a client reads (``PINNED_FIELDS``) are hashed: SHA-256 of canonical JSON
(keys sorted, no spaces, UTF-8). The hash and the definition are stored under
the upstream's and the tool's names. A later listing with another hash is a
change: under ``pin = "strict"`` the tool is withheld and the definition seen
is kept beside the pin until an operator approves it (``approve``); under
``pin = "auto"`` the pin is replaced at once.

Every function here is synchronous store work (callers on an event loop run it
through ``offloop``). Each write is a compare-and-set: two replicas that see a
tool at once store one pin, and the other's definition, if it differs, is a
change like any other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import GuardrailsError
from ..store import Store, StoreUnavailable

__all__ = [
    "PINNED_FIELDS",
    "Pin",
    "PinError",
    "Review",
    "approve",
    "definition_of",
    "fingerprint",
    "pin_of",
    "pins",
    "review",
]

PINNED_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""The fields of a tool's definition that are hashed (those absent are left out)."""

Review = Literal["pinned", "same", "updated", "withheld"]
"""What a review found: first seen (now pinned), unchanged, changed and replaced
(``auto``), changed and withheld (``strict``)."""

_INDEX = "gateway.pins"
_RETRIES = 64


class PinError(GuardrailsError):
    """An approval that cannot be made (nothing waits, or another change came meanwhile)."""


@dataclass(frozen=True, slots=True)
class Pin:
    """One tool's pin: the approved definition and, while withheld, the one seen since."""

    upstream: str
    tool: str
    hash: str
    definition: Mapping[str, Any]
    seen_hash: str | None = None
    seen: Mapping[str, Any] | None = None


def definition_of(tool: Any) -> dict[str, Any]:
    """The pinned fields of an ``mcp`` ``Tool`` (or of a definition as a mapping)."""
    listed = (
        tool if isinstance(tool, Mapping) else tool.model_dump(by_alias=True, exclude_none=True)
    )
    return {key: listed[key] for key in PINNED_FIELDS if listed.get(key) is not None}


def fingerprint(definition: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the definition's pinned fields as canonical JSON."""
    canonical = json.dumps(
        definition_of(definition),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def review(
    store: Store, upstream: str, tool: str, definition: Mapping[str, Any], mode: str
) -> Review:
    """Compare a listed definition with the pin (storing the pin the first time).

    ``mode``: ``strict`` withholds a change, ``auto`` makes it the pin.
    """
    key, seen_key = _keys(upstream, tool)
    record = _record(definition)
    digest = json.loads(record)["hash"]
    for _ in range(_RETRIES):
        current = store.get(key)
        if current is None:
            if store.compare_and_set(key, None, record):
                _index(store, upstream, tool)
                return "pinned"
            continue
        if _hash_in(current) == digest:
            _put(store, seen_key, "")
            return "same"
        if mode != "auto":
            _put(store, seen_key, record)
            return "withheld"
        if store.compare_and_set(key, current, record):
            _put(store, seen_key, "")
            return "updated"
    raise StoreUnavailable(f"pin of {upstream}/{tool}: the store kept changing under review")


def pins(store: Store) -> list[Pin]:
    """Every pin, in order of upstream and tool."""
    found = (pin_of(store, upstream, tool) for upstream, tool in _listed(store))
    return [pin for pin in found if pin is not None]


def pin_of(store: Store, upstream: str, tool: str) -> Pin | None:
    """One tool's pin (None: never seen)."""
    key, seen_key = _keys(upstream, tool)
    current = store.get(key)
    if current is None:
        return None
    approved = _parsed(current)
    seen = _parsed(store.get(seen_key) or "")
    return Pin(
        upstream=upstream,
        tool=tool,
        hash=str(approved.get("hash", "")),
        definition=approved.get("definition") or {},
        seen_hash=None if not seen else str(seen.get("hash", "")),
        seen=None if not seen else seen.get("definition") or {},
    )


def approve(store: Store, upstream: str, tool: str, expected: str | None = None) -> Pin:
    """Make the definition seen since the pin the new pin; the approved ``Pin``.

    ``expected``: the seen hash (or a prefix of at least 8 characters) the
    operator read in ``diff``; another one waiting is refused.
    """
    key, seen_key = _keys(upstream, tool)
    seen = store.get(seen_key)
    if not seen:
        raise PinError(f"{upstream}/{tool}: no changed definition waits for approval")
    digest = _hash_in(seen)
    if expected is not None and (len(expected) < 8 or not digest.startswith(expected.lower())):
        raise PinError(f"{upstream}/{tool}: the change waiting is {digest[:12]}, not {expected}")
    current = store.get(key)
    if not store.compare_and_set(key, current, seen):
        raise PinError(f"{upstream}/{tool}: the pin changed meanwhile; look again")
    store.compare_and_set(seen_key, seen, "")
    return Pin(upstream, tool, digest, _parsed(seen).get("definition") or {})


def _keys(upstream: str, tool: str) -> tuple[str, str]:
    name = json.dumps([upstream, tool], ensure_ascii=False)
    return f"gateway.pin:{name}", f"gateway.pin.seen:{name}"


def _record(definition: Mapping[str, Any]) -> str:
    pinned = definition_of(definition)
    return json.dumps({"hash": fingerprint(pinned), "definition": pinned}, sort_keys=True)


def _parsed(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _hash_in(text: str) -> str:
    """The hash of a stored record ("" for one that does not parse: it matches nothing)."""
    digest = _parsed(text).get("hash")
    return digest if isinstance(digest, str) else ""


def _put(store: Store, key: str, value: str) -> None:
    """Set ``key`` to ``value`` unless it holds it already (no write when nothing changes)."""
    for _ in range(_RETRIES):
        current = store.get(key)
        if current == value or (current is None and not value):
            return
        if store.compare_and_set(key, current, value):
            return
    raise StoreUnavailable(f"{key}: the store kept changing")


def _listed(store: Store) -> list[tuple[str, str]]:
    names = json.loads(store.get(_INDEX) or "[]")
    return sorted((str(u), str(t)) for u, t in names)


def _index(store: Store, upstream: str, tool: str) -> None:
    """Add the tool to the list of pinned tools (what ``pins`` reads)."""
    for _ in range(_RETRIES):
        current = store.get(_INDEX)
        names = json.loads(current or "[]")
        if [upstream, tool] in names:
            return
        if store.compare_and_set(_INDEX, current, json.dumps(sorted([*names, [upstream, tool]]))):
            return
    raise StoreUnavailable("the list of pinned tools kept changing")
