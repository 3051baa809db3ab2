"""The rules the configuration declares, built against the published tools.

Each builder checks the names it is given against the tools the upstreams
listed and raises a ``ConfigurationError`` naming the key when one is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigurationError
from ..guard import Guard
from ..rules import SessionCeiling, allow_list
from ..rules.workflow import Workflow
from ..store import Store
from ..tools import Tool
from .config import TenantConfig, WorkflowConfig

__all__ = ["StoreCounter", "session_ceiling", "tenant_allow_list", "workflows"]


class StoreCounter:
    """A session ceiling's counter in the store, so that every replica counts together."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def incr(self, key: str, /) -> int:
        return self.store.incr(key)

    def get(self, key: str) -> int:
        return self.store.incr(key, 0)


def session_ceiling(limit: int | None, store: Store) -> list[SessionCeiling]:
    return [] if limit is None else [SessionCeiling(limit, StoreCounter(store))]


def tenant_allow_list(
    tenants: Mapping[str, TenantConfig],
    tools: Mapping[str, Tool],
    known: Iterable[str] = (),
) -> list[Guard]:
    """Each named tenant is offered its list (every tool without one); any other, nothing.

    A listed name that is not published now but is ``known`` (withheld by its pin,
    or published before and no longer listed) is left out until it is published
    again; a name neither published nor known is an error naming the key.
    """
    if not tenants:
        return []
    existing = tools.keys() | frozenset(known)
    by_tenant: dict[str, list[str]] = {}
    for name, tenant in tenants.items():
        if tenant.tools is None:
            by_tenant[name] = list(tools)
            continue
        unknown = sorted(set(tenant.tools) - existing)
        if unknown:
            raise ConfigurationError(f"tenants.{name}.tools: no tool {unknown[0]!r}")
        by_tenant[name] = sorted(set(tenant.tools) & tools.keys())
    return [allow_list(by_tenant=by_tenant, name="tenants", fail_closed=True)]


def workflows(
    configs: Iterable[WorkflowConfig], tools: Mapping[str, Tool], store: Store
) -> tuple[list[Guard], list[Any]]:
    """A pre_turn guard and a call hook per workflow, its phase kept in ``store``."""
    guards: list[Guard] = []
    hooks: list[Any] = []
    for config in configs:
        unknown = sorted({tool for tool, _ in config.steps} - tools.keys())
        if unknown:
            raise ConfigurationError(f"workflows.{config.name}.steps: no tool {unknown[0]!r}")
        flow = Workflow(config.name, config.steps, store)
        guards.append(flow.pre_turn_guard())
        hooks.append(flow)
    return guards, hooks
