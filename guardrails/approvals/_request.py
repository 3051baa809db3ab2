"""An approval request made from a call: its exact canonical arguments, their digest, the redacted copy.

The digest is SHA-256 of the canonical JSON of the arguments the tool would
receive (the model's merged with the bound ones; secrets are never among
them): keys sorted, no spaces, every non-ASCII character escaped, no NaN. Any change to any argument,
bound ones included, is another digest, so another request. The stored copy
shows each bound parameter as ``"<bound>"``: a person sees what the model
asked for, and the store keeps no value that came from the context.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

from ..context import Invocation
from ..store._approval_rows import ApprovalRecord

__all__ = ["BOUND", "canonical", "digest", "request_for"]

BOUND = "<bound>"
_MAX_DEPTH = 128

_encode = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
).encode


def canonical(arguments: Mapping[str, Any]) -> str:
    """The canonical JSON text of ``arguments`` (``ValueError``/``TypeError`` if not JSON)."""
    value = dict(arguments.items())
    _plain(value, 0)
    return _encode(value)


_SCALARS = (str, int, float)


def _plain(value: Any, depth: int) -> None:
    """Raise ``TypeError`` unless ``value`` is one JSON value with one text: no key that
    is not text (``json`` writes ``1`` and ``"1"`` alike), no tuple, set or object.
    Containers are read from their storage, so no method of a subclass runs."""
    if depth > _MAX_DEPTH:
        raise TypeError("nested too deep")
    if value is None or isinstance(value, _SCALARS):  # bool is an int
        return
    if isinstance(value, dict):
        for key, item in dict.items(value):
            if not isinstance(key, str):
                raise TypeError("a key that is not text")
            _plain(item, depth + 1)
    elif isinstance(value, list):
        for item in list.__iter__(value):
            _plain(item, depth + 1)
    else:
        raise TypeError("not a JSON value")


def digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``arguments``."""
    return hashlib.sha256(canonical(arguments).encode("ascii")).hexdigest()


def request_for(invocation: Invocation, now: float, ttl: float) -> ApprovalRecord:
    """A new pending request for ``invocation``; its id is the store's, never the model's."""
    arguments = invocation.arguments
    tool = invocation.tool
    bound = frozenset(getattr(tool, "bound", ())) if tool is not None else frozenset()
    shown = {k: (BOUND if k in bound else v) for k, v in arguments.items()}
    context = invocation.context
    return ApprovalRecord(
        id=secrets.token_hex(16),
        tenant=context.tenant,
        session=context.session,
        tool=invocation.name,
        digest=digest(arguments),
        arguments=canonical(shown),
        asked_by=context.agent,
        requested_at=now,
        expires_at=now + ttl,
        status="pending",
    )
