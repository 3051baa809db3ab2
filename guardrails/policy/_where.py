"""The keys of ``Policy.where``: where each part of a policy was declared."""

from __future__ import annotations

__all__ = ["free_key"]


def free_key(tool: str, path: str) -> str:
    """The key of a free path in ``Policy.where`` (never a rule's name: it has a space)."""
    return f"{tool}.{path} free"
