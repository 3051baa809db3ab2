"""The gateway's ``policy = "path"`` key: rules from a policy file, checked against its tools.

This is the one place a policy file enters the gateway. ``PolicyRules`` is
what the engine is built with: pre_turn/tool_call guards and call hooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..errors import ConfigurationError
from ..tools import Tool

__all__ = ["NO_POLICY", "PolicyRules", "policy_rules"]


class PolicyRules(NamedTuple):
    guards: tuple[Any, ...] = ()
    hooks: tuple[Any, ...] = ()


NO_POLICY = PolicyRules()


def policy_rules(path: str | None, tools: Mapping[str, Tool]) -> PolicyRules:
    """The guards and hooks of the policy file at ``path`` (``NO_POLICY`` without one)."""
    if path is None:
        return NO_POLICY
    raise ConfigurationError(
        f"gateway.policy: {path}: policy files are not supported by this version of guardrails"
    )
