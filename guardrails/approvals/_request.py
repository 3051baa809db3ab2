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

_encode = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
).encode


def canonical(arguments: Mapping[str, Any]) -> str:
    """The canonical JSON text of ``arguments`` (``ValueError``/``TypeError`` if not JSON)."""
    return _encode(dict(arguments.items()))


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
