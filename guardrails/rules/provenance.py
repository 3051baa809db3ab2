"""Provenance: a claim survives only if a tool of this run produced what supports it.

``Capture`` is a call hook (register it in ``Guardrails(hooks=[...])``): after
each successful call of a tool it knows, it reads ``ToolResult.value`` and
keeps the identifiers found at the declared paths, per turn. ``provenance``
is a post_run rule: a claim in the structured output whose status is "found"
keeps it only if its identifier was captured in this turn; otherwise the claim
is downgraded to the declared not-found values, and the model's original
claim (reasoning included) and text are kept in the verdict's evidence.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..context import GuardResult, Invocation, ToolResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..middleware import _paths
from ..verdicts import ChokePoint, EscapeReason, Verdict
from .effects import Change, Rewrite

if TYPE_CHECKING:
    from ..middleware._run_record import RunRecord

__all__ = ["Capture", "Provenance", "provenance"]


class Capture:
    """A capture sink fed by tool_call: identifiers that tools actually returned.

    ``fields`` maps a tool name to the paths of the identifiers in its result
    (``"id"``, ``"orders.*.id"``, ``"*.sku"``). Identifiers are kept as strings.
    """

    __slots__ = ("_seen", "fields")

    def __init__(self, fields: Mapping[str, str | Iterable[str]]) -> None:
        if not isinstance(fields, Mapping) or not fields:
            raise ConfigurationError("Capture: map at least one tool name to identifier paths")
        table: dict[str, tuple[tuple[str | int, ...], ...]] = {}
        for tool, paths in fields.items():
            items = (paths,) if isinstance(paths, str) else tuple(paths)
            if not items:
                raise ConfigurationError(f"Capture: no identifier path for tool {tool!r}")
            table[tool] = tuple(_paths.parse(p) for p in items)
        self.fields: Mapping[str, tuple[tuple[str | int, ...], ...]] = MappingProxyType(table)
        # Per turn, and gone with the turn.
        self._seen: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

    def before(self, invocation: Invocation, /) -> None:
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        paths = self.fields.get(result.tool)
        if paths is None or not result.ok or invocation.turn is None:
            return result
        value = result.value
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
        found = {_key(v) for path in paths for _, v in _paths.walk(value, path) if _usable(v)}
        if found:
            self._seen.setdefault(invocation.turn, set()).update(found)
        return result

    def ids(self, turn: Any) -> frozenset[str]:
        """The identifiers captured in ``turn``."""
        return frozenset(self._seen.get(turn, ()))


def _usable(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _key(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


class Provenance:
    """The rule behind ``provenance``: a callable on a ``RunRecord``."""

    __slots__ = ("capture", "claims", "found", "id_field", "not_found", "status_field")

    def __init__(
        self,
        capture: Capture,
        *,
        claims: str = "",
        id_field: str = "id",
        status_field: str = "status",
        found: Any = "found",
        not_found: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(capture, Capture):
            raise ConfigurationError("provenance: capture must be a Capture")
        self.capture = capture
        self.claims = _paths.parse(claims)
        self.id_field = id_field
        self.status_field = status_field
        self.found = found
        downgrade = {status_field: "not_found"} if not_found is None else dict(not_found)
        if not downgrade:
            raise ConfigurationError("provenance: not_found must set at least one field")
        self.not_found: Mapping[str, Any] = MappingProxyType(downgrade)

    def __call__(self, run: RunRecord) -> GuardResult | Verdict:
        if run.structured is None:
            return GuardResult.not_evaluated(
                run.structured_error or "no_structured_output", escape=EscapeReason.DECLINED
            )
        node = _paths.get(run.structured, self.claims)
        if isinstance(node, Mapping):
            claims: list[tuple[tuple[str | int, ...], Any]] = [(self.claims, node)]
        elif isinstance(node, list):
            claims = [((*self.claims, i), item) for i, item in enumerate(node)]
        else:
            return GuardResult.not_evaluated("no_claims", escape=EscapeReason.DECLINED)
        captured = self.capture.ids(run.turn)
        changes: list[Change] = []
        originals: list[Any] = []
        for where, claim in claims:
            if not isinstance(claim, Mapping) or claim.get(self.status_field) != self.found:
                continue
            ident = claim.get(self.id_field)
            if _usable(ident) and _key(ident) in captured:
                continue
            originals.append(copy.deepcopy(dict(claim)))
            for key, value in self.not_found.items():
                changes.append(Change((*where, key), claim.get(key), value))
        if not changes:
            return Verdict.PASS
        detail = {"claims": originals, "text": run.text}
        return GuardResult.rejected("claim_without_trace", evidence=Rewrite(tuple(changes), detail))


def provenance(
    capture: Capture,
    *,
    claims: str = "",
    id_field: str = "id",
    status_field: str = "status",
    found: Any = "found",
    not_found: Mapping[str, Any] | None = None,
    name: str = "provenance",
    fail_closed: bool = False,
    observe: bool = False,
) -> Guard:
    """A post_run guard downgrading "found" claims whose identifier no tool returned.

    ``claims`` is the path of the claim object, or of a list of claims, in the
    structured output (the output itself by default). ``not_found`` are the
    values written over a downgraded claim (default: ``status="not_found"``).
    """
    rule = Provenance(
        capture,
        claims=claims,
        id_field=id_field,
        status_field=status_field,
        found=found,
        not_found=not_found,
    )
    return Guard(rule, name=name, at=ChokePoint.POST_RUN, fail_closed=fail_closed, observe=observe)
