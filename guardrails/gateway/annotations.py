"""Rules for a class of tools, chosen by the MCP annotations their upstream lists.

``[when.CLASS]`` (every upstream) and ``[upstreams.NAME.when.CLASS]`` (one)
give every tool of a class an approval rule, make it an action, or withhold
it. A tool's classes are read from its listed ``annotations``, each hint
absent taking the MCP specification's default (``readOnlyHint`` false,
``destructiveHint`` true, ``idempotentHint`` false, ``openWorldHint`` true),
so a tool without annotations is in ``writes``, ``destructive`` and
``open_world``.

Hints are the upstream's word: a class rule only ever adds to what the
configuration says of a tool (another approval rule, an effect, withholding)
and takes nothing away, so a tool claiming ``readOnlyHint`` still needs the
approval its own ``approval``, a tenant's or the policy's rule asks for, and
still gets a secret only when its own table says ``action = true``. The
annotations are pinned with the rest of the definition (``pins.py``): an
upstream that changes a hint has the tool withheld until an operator
approves the change, like any other change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from typing import Any, NamedTuple

from .._call_state import state_for
from .._conditions import ApprovalRule
from ..context import Invocation, ToolResult
from ..observe._tool_spans import open_span
from .settings import WhenRule

__all__ = [
    "ATTR_ANNOTATION_RULES",
    "CLASSES",
    "DETAIL",
    "AnnotationFacts",
    "Hints",
    "approval_rules",
    "classes_of",
    "hints_of",
    "matching",
    "rules_by_tool",
]

DETAIL = "annotation_rules"
"""The audit row's ``detail`` key: the class rules that matched the called tool."""
ATTR_ANNOTATION_RULES = "guardrails.gateway.annotation_rules"
"""The ``execute_tool`` span's attribute of the same rules."""


class Hints(NamedTuple):
    """A tool's four hints, the specification's default in place of each absent one."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True


CLASSES: Mapping[str, Callable[[Hints], bool]] = {
    "all": lambda h: True,
    "read_only": lambda h: h.read_only,
    "writes": lambda h: not h.read_only,
    # destructiveHint and idempotentHint speak only of a tool that writes.
    "destructive": lambda h: not h.read_only and h.destructive,
    "idempotent": lambda h: not h.read_only and h.idempotent,
    "not_idempotent": lambda h: not h.read_only and not h.idempotent,
    "open_world": lambda h: h.open_world,
}
"""The classes a ``when`` table may name, and when a tool is in each."""


def hints_of(tool: Any) -> Hints:
    """The hints of an ``mcp`` ``Tool`` (or of its ``annotations`` as a mapping)."""
    annotations = getattr(tool, "annotations", tool)
    if annotations is None:
        return Hints()
    listed = (
        annotations
        if isinstance(annotations, Mapping)
        else annotations.model_dump(by_alias=True, exclude_none=True)
    )
    default = Hints()
    return Hints(
        *(
            _hint(listed.get(key), fallback)
            for key, fallback in zip(
                ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"),
                default,
                strict=True,
            )
        )
    )


def _hint(value: object, default: bool) -> bool:
    # Anything but a JSON boolean says nothing: the default holds.
    return value if isinstance(value, bool) else default


def classes_of(tool: Any) -> frozenset[str]:
    """The classes ``tool`` is in, by its listed annotations."""
    hints = hints_of(tool)
    return frozenset(name for name, test in CLASSES.items() if test(hints))


def matching(rules: Iterable[WhenRule], tool: Any) -> tuple[WhenRule, ...]:
    """The rules of ``rules`` whose class ``tool`` is in, in their order."""
    rules = tuple(rules)
    if not rules:
        return ()
    classes = classes_of(tool)
    return tuple(rule for rule in rules if rule.klass in classes)


def rules_by_tool(
    upstreams: Iterable[Any], published: Mapping[tuple[str, str], str]
) -> dict[str, tuple[WhenRule, ...]]:
    """Published name -> the class rules its tool matched (tools matching none left out)."""
    found: dict[str, tuple[WhenRule, ...]] = {}
    for upstream in upstreams:
        for tool in upstream.tools:
            name = published.get((upstream.name, tool.name))
            rules = () if name is None else matching(upstream.config.when, tool)
            if name is not None and rules:
                found[name] = rules
    return found


def approval_rules(
    by_tool: Mapping[str, tuple[WhenRule, ...]],
) -> dict[str, tuple[ApprovalRule, ...]]:
    """Published name -> the approval rules its classes add."""
    rules = {
        name: tuple(r.approval for r in matched if r.approval is not None)
        for name, matched in by_tool.items()
    }
    return {name: found for name, found in rules.items() if found}


class AnnotationFacts:
    """A call hook: a call of a tool that class rules matched names them in its audit
    row (``detail["annotation_rules"]``) and on its span."""

    __slots__ = ("keys",)

    def __init__(self, by_tool: Mapping[str, tuple[WhenRule, ...]]) -> None:
        self.keys = {name: tuple(r.key for r in rules) for name, rules in by_tool.items()}

    def before(self, invocation: Invocation, /) -> None:
        keys = self.keys.get(invocation.name)
        if keys is None or invocation.tool is None:
            return None
        state_for(invocation).detail[DETAIL] = list(keys)
        span = open_span(invocation.call_id)
        if span is not None:
            with suppress(Exception):  # telemetry never breaks a call
                span.set_attribute(ATTR_ANNOTATION_RULES, keys)
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        return result
