"""How many calls of a tool a policy allows in a turn and in a session."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError

__all__ = ["Ceiling"]


@dataclass(frozen=True, slots=True)
class Ceiling:
    """At most ``per_turn`` calls of a tool in one turn and ``per_session`` in one session."""

    per_turn: int | None = None
    per_session: int | None = None

    def __post_init__(self) -> None:
        for key in ("per_turn", "per_session"):
            value = getattr(self, key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ConfigurationError(f"{key} must be a non-negative integer")
        if self.per_turn is None and self.per_session is None:
            raise ConfigurationError("a ceiling needs per_turn, per_session or both")

    def __and__(self, other: Ceiling) -> Ceiling:
        return Ceiling(
            _lower(self.per_turn, other.per_turn), _lower(self.per_session, other.per_session)
        )


def _lower(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)
