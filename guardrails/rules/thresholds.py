"""Confidence thresholds per source, not one global threshold: a post_run rule.

Each item of the structured output carries a source and a score; the score is
judged against the threshold of its source. One score under its threshold (or
not a number) rejects. A source without a threshold cannot be judged: the rule
is ``not_evaluated`` with a ``not_configured`` escape, or rejects when
fail-closed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..context import GuardResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..middleware import _paths
from ..verdicts import ChokePoint, EscapeReason, Verdict

if TYPE_CHECKING:
    from ..middleware._run_record import RunRecord

__all__ = ["Thresholds", "thresholds"]


class Thresholds:
    """The rule behind ``thresholds``: a callable on a ``RunRecord``."""

    __slots__ = ("by_source", "items", "score", "source")

    def __init__(
        self,
        by_source: Mapping[str, float],
        *,
        items: str = "items",
        source: str = "source",
        score: str = "confidence",
    ) -> None:
        if not isinstance(by_source, Mapping) or not by_source:
            raise ConfigurationError("thresholds: map at least one source to its threshold")
        for name, value in by_source.items():
            if not _number(value):
                raise ConfigurationError(f"thresholds: threshold of {name!r} is not a number")
        self.by_source: Mapping[str, float] = MappingProxyType(dict(by_source))
        self.items = _paths.parse(items)
        self.source = source
        self.score = score

    def __call__(self, run: RunRecord) -> GuardResult | Verdict:
        if run.structured is None:
            return GuardResult.not_evaluated(run.structured_error or "no_structured_output")
        node = _paths.get(run.structured, self.items)
        entries = [node] if isinstance(node, Mapping) else node
        if not isinstance(entries, list):
            return GuardResult.not_evaluated("no_items")
        below: list[dict[str, Any]] = []
        unconfigured: list[str] = []
        for index, entry in enumerate(entries):
            source = entry.get(self.source) if isinstance(entry, Mapping) else None
            score: Any = entry.get(self.score) if isinstance(entry, Mapping) else None
            threshold = self.by_source.get(source) if isinstance(source, str) else None
            if threshold is None:
                unconfigured.append(str(source))
            elif not _number(score) or score < threshold:
                below.append({"item": index, "source": source, "score": score, "min": threshold})
        evidence = {"below": below, "unconfigured": sorted(set(unconfigured))}
        if below:
            return GuardResult.rejected("below_threshold", evidence=evidence)
        if unconfigured:
            return GuardResult.not_evaluated(
                "source_not_configured", evidence=evidence, escape=EscapeReason.NOT_CONFIGURED
            )
        return Verdict.PASS


def thresholds(
    by_source: Mapping[str, float],
    *,
    items: str = "items",
    source: str = "source",
    score: str = "confidence",
    name: str = "thresholds",
    fail_closed: bool = False,
    observe: bool = False,
) -> Guard:
    """A post_run guard judging each item's score against the threshold of its source.

    ``items`` is the path of the list of items (or of one item) in the
    structured output; ``source`` and ``score`` name their fields.
    """
    rule = Thresholds(by_source, items=items, source=source, score=score)
    return Guard(rule, name=name, at=ChokePoint.POST_RUN, fail_closed=fail_closed, observe=observe)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
