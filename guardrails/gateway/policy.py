"""The gateway's ``policy = "path"`` key: a policy file loaded into the engine.

This is the one place a policy file enters the gateway. The file is checked
against the published tools when the gateway starts (an unknown tool,
parameter or source is one error naming the file, the table and the key), and
its provenance labels and per-session counts live in the gateway's store, so
replicas sharing PostgreSQL share them.

Each MCP request is a turn of its own, so ``max_per_turn`` of 1 or more never
refuses at the gateway: it is logged at start (``max_per_session`` is the
ceiling that holds across calls). ``max_per_turn = 0`` still closes a tool.
"""

from __future__ import annotations

import logging

from ..engine import Guardrails
from ..errors import ConfigurationError
from ..policy.loader import load
from ..store import Store

__all__ = ["load_policy"]

log = logging.getLogger("guardrails.gateway")


def load_policy(rails: Guardrails, path: str | None, store: Store) -> None:
    """Load the policy file at ``path`` (none: nothing) into ``rails``."""
    if path is None:
        return
    try:
        policy = load(path)
        rails.load_policy(policy, store=store)
    except ConfigurationError as exc:
        raise ConfigurationError(f"gateway.policy: {exc}") from None
    for tool, ceiling in sorted(policy.ceilings.items()):
        if ceiling.per_turn:
            log.warning(
                "gateway.policy: tools.%s.max_per_turn limits nothing here (each MCP request "
                "is its own turn); use max_per_session",
                tool,
            )
