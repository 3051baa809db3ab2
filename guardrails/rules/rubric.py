"""A deterministic rubric over the structured output: a post_run rule.

The rubric's bands map a name to its maximum points and must sum to 100
(checked at construction, naming the rubric). The model's scores are read
from the structured output; every problem is collected, never only the first,
and the result is classified:

- ``complete``: every band scored within its range, every computed band equal
  to what the backend computed, the total (if declared) equal to the sum;
- ``incomplete``: something is missing (a band, the total, a computed value):
  ask for more data;
- ``invalid``: something is wrong (out of range, not a number, a computed band
  that differs, an unknown band, a wrong total, output that is not a JSON
  object): reject.

A band answered with one of the declared "no data" values is legitimate:
it scores 0 and is not an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..context import GuardResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..middleware import _paths
from ..verdicts import ChokePoint, Verdict

if TYPE_CHECKING:
    from ..middleware._run_record import RunRecord

__all__ = ["Rubric", "RubricIssue", "RubricResult", "RubricStatus", "rubric"]

Computed = str | Callable[["RunRecord"], Any]


class RubricStatus(StrEnum):
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class RubricIssue:
    """One problem: which field, what is wrong, and whether it makes the result invalid."""

    field: str
    problem: str
    status: RubricStatus


@dataclass(frozen=True, slots=True)
class RubricResult:
    """The classification, every issue, and the points counted (the verdict's evidence)."""

    status: RubricStatus
    issues: tuple[RubricIssue, ...]
    points: float
    no_data: tuple[str, ...] = ()


_INCOMPLETE = RubricStatus.INCOMPLETE
_INVALID = RubricStatus.INVALID


class Rubric:
    """The rule behind ``rubric``: a callable on a ``RunRecord`` (or on a dict, ``check``)."""

    __slots__ = ("bands", "computed", "name", "no_data", "scores", "total")

    def __init__(
        self,
        name: str,
        bands: Mapping[str, int | float],
        *,
        no_data: Iterable[Any] = (None,),
        computed: Mapping[str, Computed] | None = None,
        scores: str = "scores",
        total: str | None = "total",
    ) -> None:
        if not isinstance(bands, Mapping) or not bands:
            raise ConfigurationError(f"rubric {name!r}: bands must map band names to points")
        for band, points in bands.items():
            if not _number(points) or points <= 0:
                raise ConfigurationError(
                    f"rubric {name!r}: band {band!r} must be worth a positive number of points"
                )
        total_points = sum(bands.values())
        if not math.isclose(total_points, 100):
            raise ConfigurationError(
                f"rubric {name!r}: bands must sum to 100, not {total_points:g}"
            )
        computed = dict(computed or {})
        unknown = set(computed) - set(bands)
        if unknown:
            raise ConfigurationError(
                f"rubric {name!r}: computed band {sorted(unknown)[0]!r} is not a band"
            )
        self.name = name
        self.bands: Mapping[str, int | float] = MappingProxyType(dict(bands))
        self.no_data = tuple(no_data)
        self.computed: Mapping[str, Computed] = MappingProxyType(computed)
        self.scores = _paths.parse(scores)
        self.total = None if total is None else _paths.parse(total)

    def __call__(self, run: RunRecord) -> GuardResult | Verdict:
        if run.structured is None:
            issue = RubricIssue("", run.structured_error or "no_structured_output", _INVALID)
            result = RubricResult(_INVALID, (issue,), 0)
        else:
            result = self.check(run.structured, lambda source: _backend(source, run))
        if result.status is RubricStatus.COMPLETE:
            return GuardResult.passed(evidence=result)
        return GuardResult.rejected(f"rubric_{result.status}", evidence=result)

    def check(
        self, output: Mapping[str, Any], backend: Callable[[Computed], Any] = lambda s: None
    ) -> RubricResult:
        """Classify ``output``, collecting every issue (pure)."""
        issues: list[RubricIssue] = []
        scores = _paths.get(output, self.scores)
        if not isinstance(scores, Mapping):
            status = _INCOMPLETE if scores is _paths.MISSING else _INVALID
            issues.append(
                RubricIssue(
                    _dotted(self.scores),
                    "missing" if status is _INCOMPLETE else "not_an_object",
                    status,
                )
            )
            return RubricResult(_classify(issues), tuple(issues), 0)
        points = 0.0
        no_data: list[str] = []
        for band, maximum in self.bands.items():
            if band not in scores:
                issues.append(RubricIssue(band, "missing", _INCOMPLETE))
                continue
            value = scores[band]
            if _is_no_data(value, self.no_data):
                no_data.append(band)
            elif not _number(value):
                issues.append(RubricIssue(band, "not_a_number", _INVALID))
            elif not 0 <= value <= maximum:
                issues.append(RubricIssue(band, f"out_of_range_0_{maximum:g}", _INVALID))
            else:
                points += value
            if band in self.computed:
                expected = backend(self.computed[band])
                if expected is None:
                    issues.append(RubricIssue(band, "computed_value_unavailable", _INCOMPLETE))
                elif value != expected:
                    issues.append(RubricIssue(band, "differs_from_computed", _INVALID))
        for band in scores:
            if band not in self.bands:
                issues.append(RubricIssue(str(band), "unknown_band", _INVALID))
        if self.total is not None:
            stated = _paths.get(output, self.total)
            where = _dotted(self.total)
            if stated is _paths.MISSING:
                issues.append(RubricIssue(where, "missing", _INCOMPLETE))
            elif not _number(stated) or not math.isclose(stated, points):
                issues.append(RubricIssue(where, "differs_from_sum", _INVALID))
        return RubricResult(_classify(issues), tuple(issues), points, tuple(no_data))


def rubric(
    name: str,
    bands: Mapping[str, int | float],
    *,
    no_data: Iterable[Any] = (None,),
    computed: Mapping[str, Computed] | None = None,
    scores: str = "scores",
    total: str | None = "total",
    observe: bool = False,
) -> Guard:
    """A post_run guard named ``name`` classifying the scores of the structured output.

    ``computed`` maps a band to the context key (or function of the run) of the
    value the backend computed; the model's value must equal it.
    """
    rule = Rubric(name, bands, no_data=no_data, computed=computed, scores=scores, total=total)
    return Guard(rule, name=name, at=ChokePoint.POST_RUN, observe=observe)


def _classify(issues: list[RubricIssue]) -> RubricStatus:
    if any(i.status is _INVALID for i in issues):
        return _INVALID
    if issues:
        return _INCOMPLETE
    return RubricStatus.COMPLETE


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_no_data(value: Any, accepted: tuple[Any, ...]) -> bool:
    # Compared by type and value, so True never passes for 1, nor 0 for False.
    return any(type(value) is type(a) and value == a for a in accepted)


def _backend(source: Computed, run: RunRecord) -> Any:
    return source(run) if callable(source) else run.context.get(source)


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)
