"""The shortcut of a parameter rule: a predicate that says a value passes every
check of the rule, in the common case, without naming what failed.

``quick(compiled)`` gives ``(value, context) -> bool``: ``True`` only when
``Compiled.check`` would find nothing; ``False`` means "ask ``check``", which
decides and names the failed checks. It reads exact types only (``str``,
``int``, ``float``; a ``bool`` or anything else goes to ``check``), so it
never decides differently from ``check``, only sooner. Rules with a value kind,
provenance or values from the context have no shortcut (``None``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .checks import Compiled

__all__ = ["Quick", "quick"]

Quick = Callable[[Any, Any], bool]

_isfinite = math.isfinite


def quick(compiled: Compiled) -> Quick | None:
    """The rule's shortcut, or None when it has none."""
    if compiled.kind is not None or compiled.grounded is not None or compiled.untrusted:
        return None
    if compiled.values_from is not None:
        return None
    # Only the checks below have a shortcut: a rule with any other step has none.
    known = (compiled._in_values, compiled._not_denied, compiled._matches, compiled._bounds)
    if not compiled.steps or not all(step in known for step in compiled.steps):
        return None
    tests = [
        test
        for test in (
            _in_values(compiled.values),
            _not_denied(compiled.deny),
            _matches(compiled),
            _within(compiled),
        )
        if test is not None
    ]
    if not tests:
        return None
    if len(tests) == 1:
        return tests[0]
    every = tuple(tests)

    def all_pass(value: Any, context: Any) -> bool:
        for test in every:  # noqa: SIM110 - a loop: no generator object per call
            if not test(value, context):
                return False
        return True

    return all_pass


def _in_values(values: frozenset[Any] | None) -> Quick | None:
    if values is None:
        return None

    def in_values(value: Any, context: Any) -> bool:
        cls = value.__class__
        return (cls is str or cls is int or cls is float) and value in values

    return in_values


def _not_denied(deny: frozenset[Any] | None) -> Quick | None:
    if deny is None:
        return None

    def not_denied(value: Any, context: Any) -> bool:
        cls = value.__class__
        return (cls is str or cls is int or cls is float) and value not in deny

    return not_denied


def _matches(compiled: Compiled) -> Quick | None:
    if compiled.pattern is None:
        return None
    fullmatch = compiled.pattern.fullmatch

    def matches(value: Any, context: Any) -> bool:
        return value.__class__ is str and fullmatch(value) is not None

    return matches


def _within(compiled: Compiled) -> Quick | None:
    low, high = compiled.min, compiled.max
    low_from, high_from = compiled.min_from, compiled.max_from
    if low is None and high is None and low_from is None and high_from is None:
        return None
    if low_from is None and high_from is None:
        low = -math.inf if low is None else low
        high = math.inf if high is None else high

        def within(value: Any, context: Any) -> bool:
            cls = value.__class__
            return (cls is float or cls is int) and low <= value <= high

        return within

    def within_context(value: Any, context: Any) -> bool:
        cls = value.__class__
        if cls is not float and cls is not int:
            return False
        if (low is not None and not value >= low) or (high is not None and not value <= high):
            return False
        if low_from is not None and not value >= _bound(context, low_from):
            return False
        return high_from is None or value <= _bound(context, high_from)

    return within_context


def _bound(context: Any, key: str) -> float:
    """A bound from the context's values when it is a finite number; NaN (no value
    passes) otherwise, so that ``check`` decides."""
    try:
        bound = context.values[key]
        cls = bound.__class__
        if cls is int or (cls is float and _isfinite(bound)):
            return bound  # type: ignore[no-any-return]
    except Exception:
        pass
    return math.nan
