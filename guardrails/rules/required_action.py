"""Required action: when the run shows something required was not done, the backstop does it.

A post_run rule. When ``when(run)`` holds and ``tool`` was not called
successfully in the run, the rule rejects with ``Perform``: post_run calls the
tool through the tool_call pipeline (its bound parameters come from the turn's
context, its guards and recorders apply), counts the action, and never
repeats it in the same turn, even when the tool fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..context import GuardResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..verdicts import ChokePoint, Verdict
from .effects import Perform

if TYPE_CHECKING:
    from ..middleware._run_record import RunRecord

__all__ = ["RequiredAction", "required_action"]

Arguments = Mapping[str, Any] | Callable[["RunRecord"], Mapping[str, Any]]


class RequiredAction:
    """The rule behind ``required_action``: a callable on a ``RunRecord``."""

    __slots__ = ("arguments", "tool", "when")

    def __init__(
        self, tool: str, when: Callable[[RunRecord], bool], arguments: Arguments | None = None
    ) -> None:
        if not isinstance(tool, str) or not tool:
            raise ConfigurationError(f"required_action: tool must be a tool name, not {tool!r}")
        if not callable(when):
            raise ConfigurationError(f"required_action {tool!r}: when must be a predicate")
        if arguments is None:
            arguments = MappingProxyType({})
        if not (callable(arguments) or isinstance(arguments, Mapping)):
            raise ConfigurationError(
                f"required_action {tool!r}: arguments must be a mapping or a function of the run"
            )
        self.tool = tool
        self.when = when
        self.arguments = arguments

    def __call__(self, run: RunRecord) -> GuardResult | Verdict:
        if not self.when(run) or run.called_ok(self.tool):
            return Verdict.PASS
        arguments = self.arguments(run) if callable(self.arguments) else self.arguments
        return GuardResult.rejected(
            "required_action_missing", evidence=Perform(self.tool, arguments)
        )


def required_action(
    tool: str,
    *,
    when: Callable[[RunRecord], bool],
    arguments: Arguments | None = None,
    name: str | None = None,
    observe: bool = False,
) -> Guard:
    """A post_run guard: when ``when(run)`` holds and ``tool`` did not succeed, call it.

    ``arguments`` are the model-facing arguments (a mapping, or a function of
    the run); bound parameters are filled from the context by the pipeline.
    The guard is named ``required_<tool>`` unless ``name`` is given.
    """
    rule = RequiredAction(tool, when, arguments)
    return Guard(rule, name=name or f"required_{tool}", at=ChokePoint.POST_RUN, observe=observe)
