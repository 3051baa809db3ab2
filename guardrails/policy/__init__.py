"""Argument policies and data provenance, declared in Python or in a TOML file.

See docs/policy.md. Load one with ``Guardrails(..., policy=...)``,
``rails.load_policy(path)`` or ``Policy.from_toml(path, tools=...)``.
"""

from .custom_kinds import CustomKind
from .kinds import Kind
from .loader import load, loads
from .policy import Ceiling, Policy, PolicyError
from .rules import Check, Param

__all__ = [
    "Ceiling",
    "Check",
    "CustomKind",
    "Kind",
    "Param",
    "Policy",
    "PolicyError",
    "load",
    "loads",
]
