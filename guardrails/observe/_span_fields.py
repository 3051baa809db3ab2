"""What a tool call's span says: attributes, status and events, as pure functions of its result.

The span status is ``ERROR`` only for faults: the tool raised or timed out
(outcome ``error``), a store, audit log, hook or snapshot the call needed
failed, or a fail-closed guard could not decide. A guard that refused a call
(``invalid_args``, ``limit``, ``unavailable`` by policy) did its job: the
status stays unset, so a tracing backend's error rate counts faults and not
policy; ``error.type`` and ``guardrails.outcome`` still tell what the model saw.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..context import ToolResult
from ..verdicts import Outcome
from ._faults import STOPPED_BY_DEPENDENCY, fault_escapes

MAX_CALL_ID = 256
"""Longer call ids (and ids with control characters) are recorded as a digest."""


def call_id_value(call_id: Any) -> str | None:
    """The call id as recorded: itself when it is a short printable string, else a digest.

    ``None`` (not recorded) for an empty id or one that is not a string.
    """
    if type(call_id) is not str or not call_id:
        return None
    if len(call_id) <= MAX_CALL_ID and call_id.isprintable():
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"sha256:{digest}"


def error_type(exc: BaseException) -> str:
    """The exception's class name, qualified by its module unless built in; never its text."""
    cls = type(exc)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module == "builtins" else f"{module}.{name}"


def fault_of(result: ToolResult) -> str | None:
    """The ``error.type`` of a call that ended in a fault; None for ``ok`` or a policy refusal."""
    outcome = result.outcome
    if outcome is Outcome.OK:
        return None
    if outcome is Outcome.ERROR:
        exc = result.exception
        return error_type(exc) if isinstance(exc, BaseException) else outcome.value
    if result.reason in STOPPED_BY_DEPENDENCY:
        return str(result.reason)
    for escape in fault_escapes(result.verdicts, result.escapes, result.reason):
        return error_type(escape.exception) if escape.exception is not None else str(escape.reason)
    return None
