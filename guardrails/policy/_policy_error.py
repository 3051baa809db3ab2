"""A mistake in a policy, naming where it is."""

from __future__ import annotations

from ..errors import ConfigurationError

__all__ = ["PolicyError"]


class PolicyError(ConfigurationError):
    """A mistake in a policy: ``origin`` (file), ``table`` and ``key`` say where."""

    def __init__(self, origin: str, table: str, key: str | None, problem: str) -> None:
        self.origin, self.table, self.key, self.problem = origin, table, key, problem
        where = f"[{table}]" + (f" {key}" if key else "")
        super().__init__(f"{origin}: {where}: {problem}")
