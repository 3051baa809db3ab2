"""Built-in rules. Each is a guard or a call hook built from configuration."""

from .allow_list import ToolAllowList, allow_list
from .ceiling import TurnCeiling
from .effects import Change, Perform, Restrict, Rewrite
from .provenance import Capture, Provenance, provenance
from .required_action import RequiredAction, required_action
from .session_ceiling import Counter, MemoryCounter, SessionCeiling
from .triggers import TermSet, Trigger, trigger

__all__ = [
    "Capture",
    "Change",
    "Counter",
    "MemoryCounter",
    "Perform",
    "Provenance",
    "RequiredAction",
    "Restrict",
    "Rewrite",
    "SessionCeiling",
    "TermSet",
    "ToolAllowList",
    "Trigger",
    "TurnCeiling",
    "allow_list",
    "provenance",
    "required_action",
    "trigger",
]
