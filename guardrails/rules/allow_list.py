"""Tool allow-lists per phase and per tenant: a pre_turn rule.

A tool the tenant lacks, or that the phase does not allow, is never offered.
A tenant or phase with no configuration is ``not_evaluated`` with a
``not_configured`` escape: every candidate is offered (fail-open), unless the
rule is fail-closed, in which case nothing is offered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..context import GuardResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..verdicts import ChokePoint, EscapeReason, Verdict
from .effects import Restrict

if TYPE_CHECKING:
    from ..middleware._pre_turn_request import PreTurnRequest

__all__ = ["ToolAllowList", "allow_list"]

_NOTHING = Restrict(only=frozenset())


class ToolAllowList:
    """The rule behind ``allow_list``: a callable on a ``PreTurnRequest``."""

    __slots__ = ("by_phase", "by_tenant")

    def __init__(
        self,
        by_phase: Mapping[str, Iterable[str]] | None = None,
        by_tenant: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        if by_phase is None and by_tenant is None:
            raise ConfigurationError("allow_list: give by_phase, by_tenant or both")
        self.by_phase = _freeze(by_phase, "by_phase")
        self.by_tenant = _freeze(by_tenant, "by_tenant")

    def __call__(self, request: PreTurnRequest) -> GuardResult | Verdict:
        context = request.context
        tools = request.tools
        allowed: frozenset[str] | None = None
        for table, key, what in (
            (self.by_phase, context.phase, "phase"),
            (self.by_tenant, context.tenant, "tenant"),
        ):
            if table is None:
                continue
            names = table.get(key) if key is not None else None
            if names is None:
                # Evidence that offers nothing: it applies only when the rule is
                # fail-closed (the boundary then turns this into a reject).
                return GuardResult.not_evaluated(
                    f"{what}_not_configured",
                    evidence=_NOTHING,
                    escape=EscapeReason.NOT_CONFIGURED,
                )
            allowed = names if allowed is None else allowed & names
        assert allowed is not None
        refused = frozenset(t for t in tools if t not in allowed)
        if not refused:
            return Verdict.PASS
        return GuardResult.rejected(
            "not_allowed", evidence=Restrict(only=allowed, detail=sorted(refused))
        )


def allow_list(
    by_phase: Mapping[str, Iterable[str]] | None = None,
    by_tenant: Mapping[str, Iterable[str]] | None = None,
    *,
    name: str = "allow_list",
    fail_closed: bool = False,
    observe: bool = False,
) -> Guard:
    """A pre_turn guard offering only the tools allowed for the turn's phase and tenant.

    With both tables, a tool must be allowed by both.
    """
    rule = ToolAllowList(by_phase, by_tenant)
    return Guard(rule, name=name, at=ChokePoint.PRE_TURN, fail_closed=fail_closed, observe=observe)


def _freeze(
    table: Mapping[str, Iterable[str]] | None, what: str
) -> Mapping[str, frozenset[str]] | None:
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"allow_list: {what} must map a name to tool names")
    frozen: dict[str, frozenset[str]] = {}
    for key, names in table.items():
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise ConfigurationError(f"allow_list: {what}[{key!r}] must be a list of tool names")
        frozen[key] = frozenset(names)
    return frozen
