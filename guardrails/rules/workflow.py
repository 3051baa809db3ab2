"""Step-gated workflows: a chain of step tools the model cannot skip.

A ``Workflow`` names its steps in order (``start_building -> confirm_plan ->
submit_for_review -> ...``). The phase (the step expected next) is persisted
per session in a ``Store``, outside the model's context, so it survives
context compaction and process restarts and is shared by every process on the
same store. Each step has the instructions it returns on success and,
optionally, a check of its own input.

- As a ``CallHook``: a step called out of order answers ``unavailable`` (reason
  ``out_of_order``) with the fixed sentence, so it never carries a later step's
  instructions; a step whose check rejects answers ``invalid_args``. A step
  that may run first claims the phase (compare-and-set to a running marker),
  so two concurrent calls of one step never both run: the second answers
  ``unavailable`` (reason ``in_progress``). Success moves the marker to the
  next step and the result carries that step's instructions, the only way the
  model learns what comes next; any other result puts the phase back.
- As a pre_turn rule (``workflow.pre_turn_guard()``): only the current step's
  tool is offered among the step tools.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..context import Escape, GuardResult, Invocation, ToolResult, TurnContext
from ..errors import ConfigurationError
from ..guard import Guard, as_guard
from ..middleware.tool_call import Stop
from ..store import Store
from ..store.steps import Steps, aperform, call, perform
from ..verdicts import ChokePoint, Outcome, Reason, Verdict, model_sentence
from .effects import Restrict

__all__ = ["DONE", "RUNNING", "Step", "Workflow"]

DONE = "__done__"
"""The stored phase of a session whose workflow has finished."""

RUNNING = "__running__:"
"""Prefix of the stored phase while a step runs: ``__running__:<step tool>:<claim id>``."""


@dataclass(frozen=True, slots=True)
class Step:
    """One step: its tool, the instructions its success returns, an optional input check."""

    tool: str
    instructions: str
    check: Guard | Callable[[Invocation], Any] | None = None


def session_key(context: TurnContext) -> str | None:
    """The default: one phase per tenant and session."""
    if context.session is None:
        return None
    return f"{context.tenant or ''}:{context.session}"


class Workflow:
    """A chain of step tools, gated by a phase kept in the store."""

    __slots__ = ("_checks", "_claims", "_index", "key", "name", "steps", "store")

    def __init__(
        self,
        name: str,
        steps: Iterable[Step | tuple[str, str]],
        store: Store,
        *,
        key: Callable[[TurnContext], str | None] = session_key,
    ) -> None:
        chain = tuple(s if isinstance(s, Step) else Step(*s) for s in steps)
        if not chain:
            raise ConfigurationError(f"workflow {name!r}: needs at least one step")
        tools = [s.tool for s in chain]
        if len(set(tools)) != len(tools):
            raise ConfigurationError(f"workflow {name!r}: a step tool appears twice")
        if DONE in tools or any(t.startswith(RUNNING) for t in tools):
            raise ConfigurationError(f"workflow {name!r}: a step tool uses a reserved name")
        self.name = name
        self.steps: tuple[Step, ...] = chain
        self.store = store
        self.key = key
        self._index = {s.tool: i for i, s in enumerate(chain)}
        self._checks = {s.tool: as_guard(s.check) for s in chain if s.check is not None}
        # Claims of the calls between ``before`` and ``after``, by id of the
        # invocation, which the entry holds so that its id cannot be reused.
        self._claims: dict[int, tuple[Invocation, str, str, str | None]] = {}

    # -- reading the phase -----------------------------------------------------

    def _phase_key(self, context: TurnContext) -> str | None:
        key = self.key(context)
        return None if key is None else f"workflow:{self.name}:{key}"

    def current(self, context: TurnContext) -> str | None:
        """The step tool expected next (or running) in this session; None once done."""
        key = self._phase_key(context)
        phase = None if key is None else self.store.get(key)
        if phase is None:
            return self.steps[0].tool
        if phase.startswith(RUNNING):
            return _running_step(phase)
        return None if phase == DONE else phase

    def running(self, context: TurnContext) -> str | None:
        """The step tool that holds this session's phase now (a call runs it, or died in it)."""
        key = self._phase_key(context)
        phase = None if key is None else self.store.get(key)
        return _running_step(phase) if phase is not None and phase.startswith(RUNNING) else None

    def allowed(self, context: TurnContext, names: Sequence[str]) -> list[str]:
        """``names`` without the step tools that are not the current step (order kept)."""
        current = self.current(context)
        return [n for n in names if n not in self._index or n == current]

    def reset(self, context: TurnContext) -> bool:
        """Start this session's workflow again from the first step."""
        key = self._phase_key(context)
        if key is None:
            return False
        return self.store.compare_and_set(key, self.store.get(key), self.steps[0].tool)

    def resolve(self, context: TurnContext, *, completed: bool) -> bool:
        """Settle a step left running (its process died, or its success was not saved).

        ``completed=True`` moves the phase past that step; ``False`` lets it run
        again. Only an operator who knows what the step did can choose: the
        workflow never decides it alone. Returns False when no step is running.
        """
        key = self._phase_key(context)
        phase = None if key is None else self.store.get(key)
        if key is None or phase is None or not phase.startswith(RUNNING):
            return False
        step = _running_step(phase)
        index = self._index[step]
        following = self.steps[index + 1].tool if index + 1 < len(self.steps) else DONE
        return self.store.compare_and_set(key, phase, following if completed else step)

    def pre_turn_guard(self) -> Guard:
        """A pre_turn rule that offers, among the step tools, only the current one.

        Fail-closed: when the phase cannot be read, the turn is refused. Under
        ``apre_turn`` the phase is read on the store's threads.
        """
        return Guard(
            _PhaseOffer(self),
            name=f"workflow:{self.name}",
            at=ChokePoint.PRE_TURN,
            fail_closed=True,
        )

    # -- CallHook -----------------------------------------------------------------

    def before(self, invocation: Invocation, /) -> Stop | Escape | None:
        if invocation.name not in self._index:
            return None
        return perform(self.store, self._claim(invocation))

    async def abefore(self, invocation: Invocation, /) -> Stop | Escape | None:
        """``before`` for ``acall``: the phase is read and claimed without blocking the loop."""
        if invocation.name not in self._index:
            return None
        return await aperform(self.store, self._claim(invocation))

    def _claim(self, invocation: Invocation) -> Steps[Stop | Escape | None]:
        key = self._phase_key(invocation.context)
        if key is None:
            return Stop(Outcome.UNAVAILABLE, Reason.BINDING_UNRESOLVED)
        try:
            phase = yield call("get", key)
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            return Stop(Outcome.UNAVAILABLE, Reason.STORE_UNAVAILABLE, None, exc)
        if phase is not None and phase.startswith(RUNNING):
            return Stop(Outcome.UNAVAILABLE, Reason.IN_PROGRESS)
        expected = self.steps[0].tool if phase is None else phase
        if invocation.name != expected:
            return Stop(Outcome.UNAVAILABLE, Reason.OUT_OF_ORDER)
        escape: Escape | None = None
        check = self._checks.get(invocation.name)
        if check is not None:
            record, escape, _ = check.evaluate(invocation, ChokePoint.TOOL_CALL)
            if record.verdict is Verdict.REJECT and record.enforced:
                return Stop(Outcome.INVALID_ARGS, Reason.GUARD)
        marker = f"{RUNNING}{invocation.name}:{os.urandom(16).hex()}"
        try:
            claimed = yield call("compare_and_set", key, phase, marker)
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            return Stop(Outcome.UNAVAILABLE, Reason.STORE_UNAVAILABLE, None, exc)
        if not claimed:
            # Another call of this session claimed or moved the phase since we read it.
            return Stop(Outcome.UNAVAILABLE, Reason.IN_PROGRESS)
        self._claims[id(invocation)] = (invocation, key, marker, phase)
        return escape

    async def aafter(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        """``after`` for ``acall``: the phase is moved without blocking the event loop."""
        claim = self._claims.pop(id(invocation), None)
        if claim is None:
            return result
        return await aperform(self.store, self._move(claim, invocation, result))

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        claim = self._claims.pop(id(invocation), None)
        if claim is None:
            return result
        return perform(self.store, self._move(claim, invocation, result))

    def _move(
        self,
        claim: tuple[Invocation, str, str, str | None],
        invocation: Invocation,
        result: ToolResult,
    ) -> Steps[ToolResult]:
        _, key, marker, before = claim
        index = self._index[invocation.name]
        succeeded = result.outcome is Outcome.OK and result.reason is None
        following = self.steps[index + 1].tool if index + 1 < len(self.steps) else DONE
        try:
            # Success moves past the step; anything else gives the phase back.
            moved = yield call(
                "compare_and_set",
                key,
                marker,
                following if succeeded else (before or invocation.name),
            )
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            # The phase stays claimed: the step cannot run again until ``resolve``.
            return _withheld(result, Reason.STORE_UNAVAILABLE, exc) if succeeded else result
        if not succeeded:
            return result
        if not moved:
            # An operator reset or resolved the phase meanwhile: no instructions.
            return _withheld(result, Reason.OUT_OF_ORDER, None)
        instructions = self.steps[index].instructions
        content = instructions if result.value is None else f"{result.content}\n\n{instructions}"
        return result._replace(content=content)


class _PhaseOffer:
    """The function of ``Workflow.pre_turn_guard``: hide the step tools not due now."""

    __slots__ = ("__name__", "flow", "reads_store")

    def __init__(self, flow: Workflow) -> None:
        self.__name__ = "workflow_phase"
        self.flow = flow
        self.reads_store = flow.store  # read off the event loop under apre_turn

    def __call__(self, request: Any) -> GuardResult | Verdict:
        flow = self.flow
        current = flow.current(request.context)
        hidden = frozenset(n for n in request.tools if n in flow._index and n != current)
        if not hidden:
            return Verdict.PASS
        return GuardResult.rejected("workflow_phase", evidence=Restrict(remove=hidden))


def _running_step(phase: str) -> str:
    return phase[len(RUNNING) :].rpartition(":")[0]


def _withheld(result: ToolResult, reason: Reason, exc: BaseException | None) -> ToolResult:
    return result._replace(
        outcome=Outcome.UNAVAILABLE,
        content=model_sentence(Outcome.UNAVAILABLE),
        reason=reason,
        value=None,
        exception=exc,
    )
