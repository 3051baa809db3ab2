"""Built-in rules. Each is a guard or a call hook built from configuration."""

from .ceiling import TurnCeiling

__all__ = ["TurnCeiling"]
