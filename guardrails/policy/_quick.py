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

from ..verdicts import Verdict
from .checks import Compiled

__all__ = ["Quick", "quick", "quick_guard"]

Quick = Callable[[Any, Any], bool]

_isfinite = math.isfinite
_PASS = Verdict.PASS


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
    fullmatch, longest = compiled.pattern.fullmatch, compiled.pattern.inline_chars

    def matches(value: Any, context: Any) -> bool:
        # Only a value short enough to match well within the deadline (``patterns``).
        return value.__class__ is str and len(value) <= longest and fullmatch(value)

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


# -- the guard function of a rule on a top-level parameter -------------------------------
#
# A rule with one shortcut test gets a guard function with that test written in
# its body: one Python call per rule and per call instead of three (the guard,
# the shortcut, the test). A rule with several tests calls the shortcut.
# Whatever the test does not pass, ``slow(value, context)`` decides.

Slow = Callable[[Any, Any], Any]


def quick_guard(compiled: Compiled, head: str, slow: Slow) -> Callable[[Any], Any] | None:
    """The guard function of a rule on the top-level parameter ``head``, or None
    when the rule has no shortcut. An absent parameter passes (the schema decides
    whether it may be absent)."""
    passes = quick(compiled)
    if passes is None:
        return None
    tests = (
        compiled.values is not None,
        compiled.deny is not None,
        compiled.pattern is not None,
        (compiled.min, compiled.max, compiled.min_from, compiled.max_from) != (None,) * 4,
    )
    if tests == (True, False, False, False):
        return _guard_in(head, compiled.values, slow)  # type: ignore[arg-type]
    if tests == (False, False, True, False):
        pattern = compiled.pattern
        return _guard_matching(head, pattern.fullmatch, pattern.inline_chars, slow)  # type: ignore[union-attr]
    if tests == (False, False, False, True) and compiled.min_from is None:
        low = -math.inf if compiled.min is None else compiled.min
        high = math.inf if compiled.max is None else compiled.max
        if compiled.max_from is None:
            return _guard_within(head, low, high, slow)
        return _guard_under_context(head, low, high, compiled.max_from, slow)
    return _guard_passes(head, passes, slow)


def _guard_in(head: str, values: frozenset[Any], slow: Slow) -> Callable[[Any], Any]:
    def rule_in_values(inv: Any) -> Any:
        arguments = inv.arguments
        if head not in arguments:
            return _PASS
        value = arguments[head]
        cls = value.__class__
        if (cls is str or cls is int or cls is float) and value in values:
            return _PASS
        return slow(value, inv.context)

    return rule_in_values


def _guard_matching(head: str, fullmatch: Any, longest: int, slow: Slow) -> Callable[[Any], Any]:
    def rule_matching(inv: Any) -> Any:
        arguments = inv.arguments
        if head not in arguments:
            return _PASS
        value = arguments[head]
        if value.__class__ is str and len(value) <= longest and fullmatch(value):
            return _PASS
        return slow(value, inv.context)

    return rule_matching


def _guard_within(head: str, low: float, high: float, slow: Slow) -> Callable[[Any], Any]:
    def rule_within(inv: Any) -> Any:
        arguments = inv.arguments
        if head not in arguments:
            return _PASS
        value = arguments[head]
        cls = value.__class__
        if (cls is float or cls is int) and low <= value <= high:
            return _PASS
        return slow(value, inv.context)

    return rule_within


def _guard_under_context(
    head: str, low: float, high: float, key: str, slow: Slow
) -> Callable[[Any], Any]:
    def rule_under_context(inv: Any) -> Any:
        arguments = inv.arguments
        if head not in arguments:
            return _PASS
        value = arguments[head]
        context = inv.context
        cls = value.__class__
        if (cls is float or cls is int) and low <= value <= high:
            try:
                bound = context.values[key]
                kind = bound.__class__
                if (kind is int or (kind is float and _isfinite(bound))) and value <= bound:
                    return _PASS
            except Exception:
                pass  # ``check`` decides, and says why
        return slow(value, context)

    return rule_under_context


def _guard_passes(head: str, passes: Quick, slow: Slow) -> Callable[[Any], Any]:
    def rule_shortcut(inv: Any) -> Any:
        arguments = inv.arguments
        if head not in arguments:
            return _PASS
        value = arguments[head]
        context = inv.context
        if passes(value, context):
            return _PASS
        return slow(value, context)

    return rule_shortcut
