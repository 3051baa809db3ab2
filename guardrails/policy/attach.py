"""Loading a policy into an engine: merged with what it holds, checked, installed.

The engine keeps one installed policy. Loading another merges the two
(``Policy.__or__``), removes the previous policy's guards and hook, and
installs the merged one; the session labels carry over when the sources are
unchanged, and so do the user's input of live turns and in-memory counts. Every check runs here, so a mistake raises before any call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol

from ..errors import ConfigurationError
from ..guard import Guard
from ..tools import Tool
from .install import Installed, install
from .policy import Policy, PolicyError

__all__ = ["attach", "installed"]


class Engine(Protocol):
    """What loading a policy touches of a ``Guardrails`` (no import of the engine here)."""

    _guards: dict[str, Guard]
    _pipeline: Any

    @property
    def tools(self) -> Mapping[str, Tool]: ...

    @property
    def guards(self) -> Mapping[str, Guard]: ...

    def _add_guard(self, g: Guard, /) -> Guard: ...

    def _replan(self) -> None: ...


def as_policy(source: Any) -> Policy:
    if isinstance(source, Policy):
        return source
    if isinstance(source, str | os.PathLike):
        from .loader import load

        return load(source)
    raise ConfigurationError(f"a policy is a Policy or the path of a TOML file, not {source!r}")


def installed(engine: Engine) -> Installed | None:
    found: Installed | None = getattr(engine, "_policy", None)
    return found


def attach(engine: Engine, source: Any, *, store: Any = None, **limits: Any) -> Installed:
    """Merge ``source`` into ``engine``'s policy and install the result."""
    unknown = sorted(set(limits) - {"max_values", "max_sessions", "max_tenants"})
    if unknown:
        raise ConfigurationError(f"load_policy: unknown option {unknown[0]!r}")
    new = as_policy(source)
    previous = installed(engine)
    merged = new if previous is None else previous.policy | new
    if store is None and previous is not None:
        store = previous.ledgers.store
    made = install(merged, dict(engine.tools), store=store, carry=previous, **limits)
    gates = _approval_gates(engine, merged)
    taken = {g.name for g in previous.guards} if previous is not None else set()
    clash = sorted(g.name for g in made.guards if g.name in engine.guards and g.name not in taken)
    if clash:
        raise ConfigurationError(f"policy rule name {clash[0]!r} is already a guard's name")
    guards = engine._guards
    for name in taken:
        guards.pop(name, None)
    pipeline = engine._pipeline
    hooks = tuple(h for h in pipeline.hooks if previous is None or h is not previous.hook)
    try:
        for g in made.guards:
            engine._add_guard(g)
    except Exception:
        for g in made.guards:
            guards.pop(g.name, None)
        if previous is not None:
            for g in previous.guards:
                guards[g.name] = g
        raise
    pipeline.hooks = hooks if made.hook is None else (*hooks, made.hook)
    for gate in gates:
        gate.use_policy(merged.approvals)
    engine._policy = made  # type: ignore[attr-defined]
    engine._replan()
    return made


def _approval_gates(engine: Engine, policy: Policy) -> list[Any]:
    """The hooks that take the policy's approval rules; a policy that asks for approval
    in an engine without one is refused (its calls would run unasked)."""
    gates = [
        h
        for h in engine._pipeline.hooks
        if getattr(h, "grants_approval", False) is True and callable(getattr(h, "use_policy", None))
    ]
    asking = sorted(t for t, rules in policy.approvals.items() if any(not r.never for r in rules))
    if asking and not gates:
        raise PolicyError(
            policy.origin,
            f"tools.{asking[0]}",
            "approval",
            "needs approval but no hook grants approvals: add hooks=[ApprovalGate(store)] "
            "(guardrails.approvals) to the engine",
        )
    return gates
