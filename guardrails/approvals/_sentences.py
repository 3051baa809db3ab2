"""What the model reads when a call waits for, was refused, or outlived a person's approval.

The outcome is always ``unavailable``; the reason says which. These sentences
are public strings, written in docs/approvals.md and pinned by a test against
that text. Nothing else about the request (its id, who decides, when) reaches
the model.
"""

from __future__ import annotations

from ..verdicts import Reason

__all__ = ["SENTENCES"]

SENTENCES: dict[str, str] = {
    Reason.APPROVAL_PENDING: (
        "This call needs a person's approval and did not run. "
        "Once it is approved, the same call with the same arguments will run."
    ),
    Reason.APPROVAL_DENIED: "A person declined this call. It did not run; do not retry it.",
    Reason.APPROVAL_EXPIRED: (
        "The approval for this call expired before it was used, so it did not run. "
        "A new approval has been requested."
    ),
}
