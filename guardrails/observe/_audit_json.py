"""The JSON columns of an audit row read back (``guardrails.audit`` writes them).

Coverage reads them from an audit store; ``guardrails.audit`` re-exports both.
"""

from __future__ import annotations

import json
from typing import Any

from ..store import AuditRow

__all__ = ["decode_escapes", "decode_verdicts"]


def decode_verdicts(row: AuditRow) -> list[dict[str, Any]]:
    """The per-guard verdicts of a row, as dicts."""
    return list(json.loads(row.verdicts)) if row.verdicts else []


def decode_escapes(row: AuditRow) -> list[dict[str, Any]]:
    """The escapes of a row, as dicts."""
    return list(json.loads(row.escapes)) if row.escapes else []
