"""OAuth scopes mapped to tools: a pre_turn guard over the scopes of the request's token.

A request whose token carries scopes (a bearer JWT) is offered the tools its
scopes are mapped to (``[auth.oauth.scopes]``, ``*`` for every tool) and no
other: a tool no scope of the token covers is not listed, and a call of it
answers ``unavailable``. A request without token scopes (stdio, a static
token) is not restricted by this guard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..context import GuardResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..rules.effects import Restrict
from ..verdicts import ChokePoint, Verdict

if TYPE_CHECKING:
    from ..middleware.pre_turn import PreTurnRequest

__all__ = ["SCOPES_KEY", "ScopeAllowList", "scope_allow_list"]

SCOPES_KEY = "guardrails/oauth_scopes"
"""Where a request's token scopes travel in the turn context's values."""


class ScopeAllowList:
    """The rule: the union of the tools the token's scopes are mapped to."""

    __slots__ = ("table",)

    def __init__(self, table: Mapping[str, frozenset[str]]) -> None:
        self.table = table

    def __call__(self, request: PreTurnRequest) -> GuardResult | Verdict:
        scopes = request.context.values.get(SCOPES_KEY)
        if not isinstance(scopes, frozenset):
            return Verdict.PASS
        allowed: frozenset[str] = frozenset()
        for scope in scopes:
            allowed |= self.table.get(scope, frozenset())
        refused = frozenset(t for t in request.tools if t not in allowed)
        if not refused:
            return Verdict.PASS
        return GuardResult.rejected(
            "scope_not_granted", evidence=Restrict(only=allowed, detail=sorted(refused))
        )


def scope_allow_list(
    scopes: Mapping[str, frozenset[str]] | None,
    tools: Iterable[str],
    known: Iterable[str] = (),
) -> list[Guard]:
    """The guard for ``[auth.oauth.scopes]`` (none without the table); ``*`` is every tool.
    A name not published now but ``known`` (withheld, or no longer listed) is no error."""
    if scopes is None:
        return []
    published = frozenset(tools)
    table: dict[str, frozenset[str]] = {}
    for scope, names in scopes.items():
        unknown = sorted(names - published - frozenset(known) - {"*"})
        if unknown:
            raise ConfigurationError(f"auth.oauth.scopes.{scope}: no tool {unknown[0]!r}")
        table[scope] = published if "*" in names else frozenset(names) & published
    rule = ScopeAllowList(table)
    return [Guard(rule, name="oauth_scopes", at=ChokePoint.PRE_TURN, fail_closed=True)]
