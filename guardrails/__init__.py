"""guardrails: the rules an LLM agent must obey, as code at three choke-points."""

from ._version import __version__
from .context import (
    Escape,
    GuardResult,
    Invocation,
    ToolCall,
    ToolResult,
    TurnContext,
    VerdictRecord,
)
from .engine import Guardrails, Turn
from .errors import (
    ConfigurationError,
    DuplicateNameError,
    GuardrailsError,
    LimitExceeded,
    NotConfigured,
    SchemaError,
    StopRun,
    TicketClosed,
    UsageError,
)
from .guard import Guard, guard
from .middleware.post_run import BackstopAction, PostRunReport, RunRecord
from .middleware.pre_turn import PreTurnDecision, PreTurnRequest, Refusal
from .middleware.ticket import Ticket
from .middleware.tool_call import CallHook, Stop
from .observe.recorder import Recorder, Recorders
from .tools import Secret, Tool, tool
from .verdicts import ChokePoint, EscapeReason, Outcome, Reason, Verdict, combine, model_sentence

__all__ = [
    "BackstopAction",
    "CallHook",
    "ChokePoint",
    "ConfigurationError",
    "DuplicateNameError",
    "Escape",
    "EscapeReason",
    "Guard",
    "GuardResult",
    "Guardrails",
    "GuardrailsError",
    "Invocation",
    "LimitExceeded",
    "NotConfigured",
    "Outcome",
    "PostRunReport",
    "PreTurnDecision",
    "PreTurnRequest",
    "Reason",
    "Recorder",
    "Recorders",
    "Refusal",
    "RunRecord",
    "SchemaError",
    "Secret",
    "Stop",
    "StopRun",
    "Ticket",
    "TicketClosed",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Turn",
    "TurnContext",
    "UsageError",
    "Verdict",
    "VerdictRecord",
    "__version__",
    "combine",
    "guard",
    "model_sentence",
    "tool",
]
