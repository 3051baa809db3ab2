"""What a pre_turn or post_run rule asks for, beyond its verdict.

A rule is a guard: it returns a verdict, or a ``GuardResult`` whose
``evidence`` may be one of the frozen values below. The choke-point applies
the evidence of an *enforced reject* only; a ``pass`` changes nothing, and a
``not_evaluated`` (fail-open) changes nothing either, while a fail-closed
guard's ``not_evaluated`` becomes a reject and its evidence applies. So the
verdict and escape accounting stay the same for every rule:

==============  ===========  ====================================================
evidence        choke-point  what an enforced reject does
==============  ===========  ====================================================
``Restrict``    pre_turn     removes tools from the offer (or keeps only some)
anything else   pre_turn     refuses the turn; the reject's reason is the code
``Perform``     post_run     calls a tool through tool_call (a backstop action)
``Rewrite``     post_run     overwrites fields of the structured output
anything else   post_run     nothing beyond the verdict
==============  ===========  ====================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Change", "Perform", "Restrict", "Rewrite"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Restrict:
    """pre_turn: take ``remove`` out of the offer; with ``only``, offer nothing else.

    ``detail`` is for the audit trail (for example the terms that matched).
    ``gates`` names, per tool taken out, the tool_call guard that refuses its
    calls (an intent gate): a call of that tool in this turn is refused with
    ``not_offered`` and carries that guard's ``reject``, with this rule's reason.
    """

    remove: frozenset[str] = frozenset()
    only: frozenset[str] | None = None
    detail: Any = None
    gates: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "remove", frozenset(self.remove))
        object.__setattr__(self, "gates", MappingProxyType(dict(self.gates)))
        if self.only is not None:
            object.__setattr__(self, "only", frozenset(self.only))

    def apply(self, names: Iterable[str]) -> list[str]:
        """The names that survive, in their order."""
        only = self.only
        return [n for n in names if n not in self.remove and (only is None or n in only)]


@dataclass(frozen=True, slots=True)
class Perform:
    """post_run: call ``tool`` with ``arguments`` through the tool_call pipeline.

    Parameters bound from the turn's context are filled by the pipeline, as
    for any call; ``arguments`` holds the others.
    """

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    detail: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", MappingProxyType(dict(self.arguments)))


@dataclass(frozen=True, slots=True)
class Change:
    """One overwrite of the structured output: where, what was there, what is there now."""

    path: tuple[str | int, ...]
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class Rewrite:
    """post_run: overwrite fields of the structured output.

    ``detail`` keeps whatever the audit needs (for example the model's
    original claim and its reasoning).
    """

    changes: tuple[Change, ...]
    detail: Any = None
