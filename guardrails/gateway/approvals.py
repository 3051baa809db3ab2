"""The gateway's approval gate: the tools' ``approval`` and each tenant's own rules.

``[upstreams.NAME.tools.TOOL] approval = ...`` is the tool's own rule (every
tenant); ``[tenants.NAME] approvals = { TOOL = ... }`` adds a rule for that
tenant's calls of a published tool; ``[when.CLASS] approval = ...`` adds one
to every tool of a class its annotations put it in (``annotations.py``). A
call needs approval when any rule says so (the policy file's ``approval``
included): no rule takes another's away. The gate is always in the
engine, so a policy file's rules hold too; requests live in the gateway's
store, where ``guardrails approvals`` and the HTTP endpoint decide them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._conditions import ApprovalRule
from ..approvals import ApprovalGate
from ..context import Invocation
from ..errors import ConfigurationError
from ..store import Store
from ..tools import Tool
from .settings import GatewayConfig

__all__ = ["TenantApprovalGate", "approval_gate"]


class TenantApprovalGate(ApprovalGate):
    """An ``ApprovalGate`` that adds the calling tenant's own rule of the tool, and the
    rules of the tool's classes (``by_class``: published name -> rules)."""

    __slots__ = ("by_class", "by_tenant")

    def __init__(
        self,
        store: Any,
        by_tenant: Mapping[str, Mapping[str, ApprovalRule]],
        *,
        ttl: float,
        by_class: Mapping[str, tuple[ApprovalRule, ...]] | None = None,
    ) -> None:
        super().__init__(store, ttl=ttl)
        self.by_tenant = by_tenant
        self.by_class = by_class or {}

    def rules_for(self, invocation: Invocation) -> tuple[ApprovalRule, ...]:
        rules = (*super().rules_for(invocation), *self.by_class.get(invocation.name, ()))
        tenant = invocation.context.tenant
        own = None if tenant is None else self.by_tenant.get(tenant, {}).get(invocation.name)
        return rules if own is None else (*rules, own)


def approval_gate(
    config: GatewayConfig,
    tools: Mapping[str, Tool],
    store: Store,
    known: frozenset[str] = frozenset(),
    by_class: Mapping[str, tuple[ApprovalRule, ...]] | None = None,
) -> TenantApprovalGate:
    """The gate over ``store``; a tenant's rule of an unknown tool, or one reading a
    parameter the tool does not have, is an error naming the key. A rule of a tool
    not published now but ``known`` (withheld by its pin, or no longer listed)
    waits until the tool is published again. ``by_class``: the rules the tools'
    classes add (a condition on a parameter a tool lacks holds its every call)."""
    by_tenant: dict[str, dict[str, ApprovalRule]] = {}
    for name, tenant in config.tenants.items():
        for tool, rule in tenant.approvals.items():
            key = f"tenants.{name}.approvals.{tool}"
            spec = tools.get(tool)
            if spec is None and tool in known:
                continue
            if spec is None:
                raise ConfigurationError(f"{key}: no tool {tool!r}")
            properties = spec.source_schema.get("properties", {})
            rule.check_names(properties if isinstance(properties, Mapping) else {}, key)
            by_tenant.setdefault(name, {})[tool] = rule
    return TenantApprovalGate(store, by_tenant, ttl=config.approvals.ttl, by_class=by_class)
