"""The policy file: TOML read with the standard library, every key checked.

::

    [policy]
    fail_closed = false            # a rule that cannot decide (store unreadable): refuse

    [sources]
    trusted = ["list_contacts"]    # tool results trusted (default: untrusted)

    [tools.pay]
    intent = ["pay", "transfer"]   # offered only when the user's input says so
    max_per_turn = 1
    max_per_session = 3
    approval = "amount > 500"      # a person approves these calls first (docs/approvals.md)

    [tools.pay.params.iban]
    kind = "iban"
    grounded_in = ["user", "context"]

A mistake (an unknown table or key, a value of the wrong type, a pattern that
does not compile) is one ``PolicyError`` naming the file, the table and the
key. Tool names, parameters and sources are checked against the registered
tools when the policy is loaded into an engine (``Policy.check``).

What a file may hold is bounded (the ``MAX_*`` names below, and the pattern
bounds of ``patterns``); past a bound the file is refused the same way, before
the part over the bound is parsed or compiled.
"""

from __future__ import annotations

import os

from ._toml_read import (
    _PARAM_KEYS,
    MAX_BYTES,
    MAX_ITEMS,
    MAX_KEY_PARTS,
    MAX_NESTING,
    MAX_RULES,
    MAX_TABLES,
    MAX_TOOLS,
    read_file,
)
from .policy import Policy, build

__all__ = [
    "MAX_BYTES",
    "MAX_ITEMS",
    "MAX_KEY_PARTS",
    "MAX_NESTING",
    "MAX_RULES",
    "MAX_TABLES",
    "MAX_TOOLS",
    "_PARAM_KEYS",
    "load",
    "loads",
]


def load(path: str | os.PathLike[str]) -> Policy:
    """Read and check a policy file (not yet against tools)."""
    return build(*read_file(path))


def loads(text: str, *, origin: str = "<string>") -> Policy:
    """A policy from TOML text; ``origin`` names it in errors."""
    return build(origin, text)
