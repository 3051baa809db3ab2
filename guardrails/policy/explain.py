"""What ``guardrails policy explain`` prints: per tool and parameter, which rule decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .policy import Policy
from .provenance import CONTEXT, USER

__all__ = ["explain"]


def explain(policy: Policy, tools: Mapping[str, Any] | None = None) -> str:
    """A plain-text account of ``policy``; with ``tools``, unruled tools and parameters too."""
    names = sorted(
        set(tools or ())
        | {p.tool for p in policy.params}
        | set(policy.intents)
        | set(policy.ceilings)
    )
    lines = [f"policy {policy.origin}"]
    lines.append(
        f"  trusted sources: {', '.join([USER, CONTEXT, *sorted(policy.trusted)])}; "
        "every other tool's results are untrusted"
    )
    if policy.default_grounded_in is not None:
        lines.append(
            "  safe default: every string argument of a tool with an effect must be grounded in "
            f"{sorted(policy.default_grounded_in)!r}, unless free or ruled (policy:TOOL.defaults)"
        )
    if policy.fail_closed:
        lines.append("  fail_closed: a rule that cannot decide (its store unreadable) refuses")
    for name in names:
        lines.append(f"tool {name}")
        trust = "trusted" if name in policy.trusted else "untrusted"
        lines.append(f"  results: {trust}")
        if name in policy.intents:
            terms = ", ".join(repr(t) for t in policy.intents[name])
            lines.append(
                f"  offered only when the user's input mentions: {terms} (policy:{name}.intent)"
            )
        ceiling = policy.ceilings.get(name)
        if ceiling is not None:
            parts = [
                f"{n} per {w}"
                for n, w in ((ceiling.per_turn, "turn"), (ceiling.per_session, "session"))
                if n is not None
            ]
            lines.append(f"  at most {' and '.join(parts)} (policy:{name}.ceiling -> limit)")
        ruled = [p for p in policy.params if p.tool == name]
        params = sorted({p.path for p in ruled} | set(_properties(tools, name)))
        free = {path for tool, path in policy.free if tool == name}
        params = sorted(set(params) | free)
        defaulted = policy.default_grounded_in is not None and _effect(tools, name)
        for path in params:
            rules = [p for p in ruled if p.path == path]
            if not rules:
                lines.append(f"  {path}: {_unruled(name, path in free, defaulted)}")
                continue
            for rule in sorted(rules, key=lambda r: r.rule_name):
                lines.append(f"  {path}: {rule.rule_name} -> {rule.outcome}")
                lines.extend(f"      {check}" for check in rule.explain())
    return "\n".join(lines)


def _effect(tools: Mapping[str, Any] | None, name: str) -> bool:
    return bool(getattr((tools or {}).get(name), "effect", False))


def _unruled(tool: str, free: bool, defaulted: bool) -> str:
    if free:
        return "free of the safe default (the schema alone decides)"
    if defaulted:
        return f"the safe default (policy:{tool}.defaults): its strings must be grounded"
    return "no rule (the schema alone decides)"


def _properties(tools: Mapping[str, Any] | None, name: str) -> list[str]:
    spec = (tools or {}).get(name)
    if spec is None:
        return []
    return sorted(getattr(getattr(spec, "compiled", None), "properties", ()) or ())
