"""Checkpoints of the audit chain: its head, written to be kept somewhere else.

A hash chain shows a changed row, but not a rewrite of every row with every
hash recomputed, nor the newest rows removed. A checkpoint fixes the head at
one moment: the number of rows, the last row's id and hash, and the time, as
one JSON object (``export``), optionally signed with HMAC-SHA256 (``hmac``
from the standard library) under a key read from a file. Keep it where the
store's writers cannot reach (another machine, a ticket, a log shipped off),
and the key where the store's roles cannot read it. ``verify(store,
anchor=...)`` later checks that the chain still holds that row with that
hash (``read`` gives the anchor back, after checking the signature): a
rewritten history changes the hash, a deleted tail leaves the store shorter.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from ._base import Store, StoreError
from .verify import Verified, verify

__all__ = [
    "FORMAT",
    "Checkpoint",
    "CheckpointError",
    "SignatureMismatch",
    "check",
    "export",
    "read",
    "read_key",
]

FORMAT = "guardrails-audit-checkpoint/1"
ALGORITHM = "hmac-sha256"
_FIELDS = ("format", "rows", "last_id", "head", "at")


class CheckpointError(StoreError):
    """A checkpoint or key that cannot be used: unreadable, malformed, exposed."""


class SignatureMismatch(CheckpointError):
    """A checkpoint whose signature does not match the key, or was removed."""


class Checkpoint(NamedTuple):
    """The head of a chain at one moment; ``signed``: its signature was checked."""

    rows: int  # every row, hashed or written before the chain existed
    last_id: int
    head: str
    at: str
    signed: bool = False


def export(store: Store, key: bytes | None = None, *, now: datetime | None = None) -> str:
    """The checkpoint of ``store``'s chain as JSON text (signed when ``key`` is given).

    Raises ``CheckpointError`` when the chain does not verify: a head of a
    tampered chain is no anchor.
    """
    found = verify(store)
    if not found.ok:
        raise CheckpointError(f"the chain does not verify ({found.line()}): no checkpoint")
    rows = found.rows + found.unhashed
    at = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body: dict[str, Any] = {
        "format": FORMAT,
        "rows": rows,
        "last_id": rows,  # ids are consecutive from 1
        "head": found.head,
        "at": at,
    }
    if key is not None:
        body["signature"] = {"algorithm": ALGORITHM, "value": _sign(body, key)}
    return json.dumps(body, indent=2) + "\n"


def read(text: str, key: bytes | None = None) -> Checkpoint:
    """The checkpoint in ``text``; its signature checked with ``key``.

    Raises ``CheckpointError`` when the text is not a checkpoint, when it is
    signed and no key is given, when a key is given and it is not signed (a
    signature removed), or when the signature does not match.
    """
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise CheckpointError("the checkpoint is not JSON") from exc
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise CheckpointError(f"not a checkpoint (format {FORMAT!r} expected)")
    rows, last_id, head, at = (body.get(k) for k in _FIELDS[1:])
    if not (
        type(rows) is int
        and type(last_id) is int
        and 0 <= rows == last_id
        and isinstance(head, str)
        and isinstance(at, str)
    ):
        raise CheckpointError("the checkpoint's rows, last_id, head or at is missing or wrong")
    signature = body.get("signature")
    if key is None:
        if signature is not None:
            raise CheckpointError("the checkpoint is signed: give the key to check it")
        return Checkpoint(rows, last_id, head, at)
    if not isinstance(signature, dict) or signature.get("algorithm") != ALGORITHM:
        raise SignatureMismatch(f"the checkpoint is not signed ({ALGORITHM}), but a key was given")
    value = signature.get("value")
    if not isinstance(value, str) or not hmac.compare_digest(value, _sign(body, key)):
        raise SignatureMismatch(
            "the checkpoint's signature does not match: it was changed, or signed with another key"
        )
    return Checkpoint(rows, last_id, head, at, signed=True)


def check(store: Store, checkpoint: Checkpoint) -> Verified:
    """``verify`` of ``store`` against the head the checkpoint holds."""
    if checkpoint.last_id == 0:
        return verify(store)
    return verify(store, anchor=(checkpoint.last_id, checkpoint.head))


def read_key(path: str | os.PathLike[str]) -> bytes:
    """A signing key from a file (its bytes, surrounding whitespace removed).

    Refused when others than the file's owner may read it, or when it is
    shorter than 16 bytes: a key the store's roles can read signs nothing.
    """
    try:
        mode = os.stat(path).st_mode
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise CheckpointError(f"cannot read the key {os.fspath(path)!r}: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CheckpointError(
            f"the key {os.fspath(path)!r} may be read by others than its owner (chmod 600 it)"
        )
    if len(key) < 16:
        raise CheckpointError(f"the key {os.fspath(path)!r} holds fewer than 16 bytes")
    return key


def _sign(body: dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 of the checkpoint's fields (never the signature), as canonical JSON."""
    signed = json.dumps({k: body.get(k) for k in _FIELDS}, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, signed.encode("utf-8"), hashlib.sha256).hexdigest()
