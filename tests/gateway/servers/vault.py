"""A secret provider factory, as ``[secrets] provider = "module:factory"`` names one."""

from __future__ import annotations

from collections.abc import Callable


def provider() -> Callable[[str], str | None]:
    vault = {"PAY_KEY": "from-the-vault"}
    return vault.get


def not_a_provider() -> str:
    return "a string"
