"""The gateway's ``policy = "path"`` key: a policy file loaded into the engine.

This is the one place a policy file enters the gateway. The file is checked
against the published tools when the gateway starts (an unknown tool,
parameter or source is one error naming the file, the table and the key), and
its provenance labels and per-session counts live in the gateway's store, so
replicas sharing PostgreSQL share them.
"""

from __future__ import annotations

from ..engine import Guardrails
from ..errors import ConfigurationError
from ..store import Store

__all__ = ["load_policy"]


def load_policy(rails: Guardrails, path: str | None, store: Store) -> None:
    """Load the policy file at ``path`` (none: nothing) into ``rails``."""
    if path is None:
        return
    try:
        rails.load_policy(path, store=store)
    except ConfigurationError as exc:
        raise ConfigurationError(f"gateway.policy: {exc}") from None
