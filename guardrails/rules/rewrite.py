"""Rewrite: the numbers the product publishes are the ones the backend computed.

A post_run rule. Each declared field of the structured output is overwritten
with the value the backend computed (a context key, or a function of the run).
A field that already holds that value is left alone; every overwrite is a
``Change`` with the old and new value. When a backend value is missing, the
rule does not evaluate (``not_configured`` escape) and nothing is rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..context import GuardResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..middleware import _paths
from ..verdicts import ChokePoint, EscapeReason, Verdict
from .effects import Change, Rewrite

if TYPE_CHECKING:
    from ..middleware._run_record import RunRecord

__all__ = ["Overwrite", "rewrite"]

Source = str | Callable[["RunRecord"], Any]


class Overwrite:
    """The rule behind ``rewrite``: a callable on a ``RunRecord``."""

    __slots__ = ("fields",)

    def __init__(self, fields: Mapping[str, Source]) -> None:
        if not isinstance(fields, Mapping) or not fields:
            raise ConfigurationError("rewrite: map at least one output field to its source")
        table: dict[tuple[str | int, ...], Source] = {}
        for path, source in fields.items():
            if not (isinstance(source, str) or callable(source)):
                raise ConfigurationError(
                    f"rewrite: the source of {path!r} must be a context key or a function"
                )
            parsed = _paths.parse(path)
            if not parsed:
                raise ConfigurationError("rewrite: cannot overwrite the whole output")
            table[parsed] = source
        self.fields: Mapping[tuple[str | int, ...], Source] = MappingProxyType(table)

    def __call__(self, run: RunRecord) -> GuardResult | Verdict:
        if run.structured is None:
            return GuardResult.not_evaluated(run.structured_error or "no_structured_output")
        changes: list[Change] = []
        missing: list[str] = []
        for path, source in self.fields.items():
            new = source(run) if callable(source) else run.context.get(source)
            if new is None:
                missing.append(".".join(map(str, path)))
                continue
            old = _paths.get(run.structured, path)
            old = None if old is _paths.MISSING else old
            if type(old) is not type(new) or old != new:
                changes.append(Change(path, old, new))
        if missing:
            return GuardResult.not_evaluated(
                "computed_value_unavailable",
                evidence={"fields": missing},
                escape=EscapeReason.NOT_CONFIGURED,
            )
        if not changes:
            return Verdict.PASS
        return GuardResult.rejected("overwritten", evidence=Rewrite(tuple(changes)))


def rewrite(fields: Mapping[str, Source], *, name: str = "rewrite", observe: bool = False) -> Guard:
    """A post_run guard writing the backend's values over the model's.

    ``fields`` maps a path of the structured output (``"total"``,
    ``"invoice.amount"``, ``"lines.0.price"``) to a context key or a function of
    the run.
    """
    return Guard(Overwrite(fields), name=name, at=ChokePoint.POST_RUN, observe=observe)
