"""A person approves a risky call: bound to its exact arguments, used once, expiring, audited.

- ``ApprovalGate(store)``: the call hook that holds calls needing approval;
- ``Approvals(store)``: list, show, approve and deny requests (the CLI's
  ``guardrails approvals`` uses it);
- ``parse_approval``/``ApprovalRule``: the ``approval=`` setting of a tool or
  of the policy file (``always``, ``never`` or a condition on the arguments).

See docs/approvals.md.
"""

from __future__ import annotations

from .._conditions import ApprovalRule, parse_approval
from ..store._approval_rows import ApprovalRecord
from ._sentences import SENTENCES
from .api import AUDIT_KIND, ApprovalError, Approvals
from .book import ApprovalBook
from .gate import ApprovalGate

__all__ = [
    "AUDIT_KIND",
    "SENTENCES",
    "ApprovalBook",
    "ApprovalError",
    "ApprovalGate",
    "ApprovalRecord",
    "ApprovalRule",
    "Approvals",
    "parse_approval",
]
