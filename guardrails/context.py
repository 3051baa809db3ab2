"""Frozen values that flow through the choke-points."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple

from .verdicts import ChokePoint, EscapeReason, Outcome, Verdict

__all__ = [
    "Escape",
    "GuardResult",
    "Invocation",
    "ToolCall",
    "ToolResult",
    "TurnContext",
    "VerdictRecord",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
# Read once: an attribute of an Enum class goes through ``EnumType.__getattr__``
# on Python 3.11, several times the cost of a global.
_OK = Outcome.OK
_PASS = Verdict.PASS
_REJECT = Verdict.REJECT
_NOT_EVALUATED = Verdict.NOT_EVALUATED


@dataclass(frozen=True, slots=True)
class TurnContext:
    """Who and where a turn runs: the closure that bound arguments come from.

    ``values`` holds anything else the application knows and the model must not
    choose (account ids, record ids, amounts the backend computed).
    """

    tenant: str | None = None
    session: str | None = None
    phase: str | None = None
    agent: str | None = None
    workflow: str | None = None
    values: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.values, MappingProxyType):
            object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def get(self, key: str, default: Any = None) -> Any:
        """A value by name: the named fields first, then ``values``."""
        if key in _FIELDS:
            value = getattr(self, key)
            return default if value is None else value
        return self.values.get(key, default)

    def with_values(self, **values: Any) -> TurnContext:
        """A copy with more (or replaced) values."""
        return replace(self, values={**self.values, **values})

    def evolve(self, **changes: Any) -> TurnContext:
        """A copy with some named fields changed (for example ``phase``)."""
        return replace(self, **changes)


_FIELDS = frozenset({"tenant", "session", "phase", "agent", "workflow"})


class Invocation(NamedTuple):
    """What a tool_call guard looks at: one call that passed the schema checks.

    ``arguments`` are the model's arguments merged with the bound ones (what the
    tool will receive, secrets excluded); ``model_arguments`` are the model's
    alone. Both are read-only at every depth: the tool receives its own copy
    of what was validated, whatever a guard does with these.
    """

    name: str
    arguments: Mapping[str, Any]
    model_arguments: Mapping[str, Any]
    context: TurnContext
    call_id: str
    tool: Any = None
    turn: Any = None


class ToolCall(NamedTuple):
    """What the model asked for: a tool name, its arguments, and the call id."""

    name: str
    arguments: Any
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class GuardResult:
    """What a guard may return instead of a bare ``Verdict``.

    ``reason`` is a short machine-readable code for the audit trail;
    ``evidence`` any JSON-like detail for the audit trail; ``params`` names the
    offending parameters of a tool-call rejection (only names that exist in
    the tool's schema reach the model); ``escape`` records that a ``pass`` was
    deliberately let through (for example ``pass_on_retry``), or that a
    ``reject`` was decided by a fault rather than a check (``timeout``).
    """

    verdict: Verdict
    reason: str | None = None
    evidence: Any = None
    params: tuple[str, ...] = ()
    escape: EscapeReason | None = None

    @classmethod
    def passed(cls, reason: str | None = None, **kw: Any) -> GuardResult:
        return cls(_PASS, reason, **kw)

    @classmethod
    def rejected(cls, reason: str | None = None, **kw: Any) -> GuardResult:
        return cls(_REJECT, reason, **kw)

    @classmethod
    def not_evaluated(cls, reason: str | None = None, **kw: Any) -> GuardResult:
        return cls(_NOT_EVALUATED, reason, **kw)


class VerdictRecord(NamedTuple):
    """One guard's verdict on one subject, as recorded.

    ``enforced`` is False for guards in observe mode. ``reason`` and
    ``evidence`` come from the guard; they are for the audit trail and never
    reach the model.
    """

    guard: str
    choke_point: ChokePoint
    verdict: Verdict
    reason: str | None = None
    evidence: Any = None
    duration_ns: int = 0
    enforced: bool = True


class Escape(NamedTuple):
    """A time an action went on without a guard's decision."""

    guard: str
    choke_point: ChokePoint
    reason: EscapeReason
    exception: BaseException | None = None


class ToolResult(NamedTuple):
    """The result of one guarded tool call: a value, never an exception.

    ``content`` is exactly what the model is shown. ``value`` is what the tool
    returned (``None`` unless the outcome is ``ok``); ``exception`` is kept for
    the audit trail only. ``reason`` is a machine-readable code saying which step
    decided a non-ok outcome.
    """

    call_id: str
    tool: str
    outcome: Outcome
    content: str
    verdict: Verdict
    verdicts: tuple[VerdictRecord, ...] = ()
    escapes: tuple[Escape, ...] = ()
    reason: str | None = None
    params: tuple[str, ...] = ()
    value: Any = None
    exception: BaseException | None = None
    duration_ns: int = 0
    truncated: bool = False
    flags: tuple[str, ...] = ()
    known_tool: bool = True

    @property
    def ok(self) -> bool:
        return self.outcome is _OK

    @property
    def is_error(self) -> bool:
        """What integrations send as ``is_error`` / ``isError``."""
        return self.outcome is not _OK
