"""Built-in rules. Each is a guard or a call hook built from configuration."""

from .allow_list import ToolAllowList, allow_list
from .ceiling import TurnCeiling
from .effects import Change, Perform, Restrict, Rewrite
from .provenance import Capture, Provenance, provenance
from .required_action import RequiredAction, required_action
from .rewrite import Overwrite, rewrite
from .rubric import Rubric, RubricIssue, RubricResult, RubricStatus, rubric
from .session_ceiling import Counter, MemoryCounter, SessionCeiling
from .thresholds import Thresholds, thresholds
from .triggers import TermSet, Trigger, trigger

__all__ = [
    "Capture",
    "Change",
    "Counter",
    "MemoryCounter",
    "Overwrite",
    "Perform",
    "Provenance",
    "RequiredAction",
    "Restrict",
    "Rewrite",
    "Rubric",
    "RubricIssue",
    "RubricResult",
    "RubricStatus",
    "SessionCeiling",
    "TermSet",
    "Thresholds",
    "ToolAllowList",
    "Trigger",
    "TurnCeiling",
    "allow_list",
    "provenance",
    "required_action",
    "rewrite",
    "rubric",
    "thresholds",
    "trigger",
]
