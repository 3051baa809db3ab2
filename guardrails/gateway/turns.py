"""Each MCP request is one turn; the user's words of it, when the client sends them.

There is no user text in ``tools/list`` or ``tools/call``. A client that knows
what its user said (the application hosting the model, not the model) may
send it as ``_meta["guardrails/user"]`` on each request of the user's turn:
pre_turn then reads it, so a policy's intent gates offer and admit the tools
the user asked for. A request without it has no user input: intent-gated
tools are neither listed nor callable (``unavailable``), as the policy says
for a turn with no user input. The text is never stored or logged (a policy
grounding values in ``user`` keeps digests of them, as everywhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..context import TurnContext
from ..engine import Turn
from ..integrations._common import aoffer
from ..integrations.mcp import GuardedTools

__all__ = ["MAX_USER_CHARS", "USER_KEY", "GatewayTools", "user_text"]

USER_KEY = "guardrails/user"
# Longer user text is not read at all (the intent gates see no input): matching
# is linear, and a request is bounded by what one turn of a user can say.
MAX_USER_CHARS = 100_000


def user_text(meta: Any) -> str | None:
    """The user's words in a request's ``_meta``, or None (absent, not text, empty, too long)."""
    value = meta.get(USER_KEY) if isinstance(meta, Mapping) else None
    if type(value) is not str or not value or len(value) > MAX_USER_CHARS:
        return None
    return value


class GatewayTools(GuardedTools):
    """``GuardedTools`` whose pre_turn reads the request's ``_meta["guardrails/user"]``."""

    async def _turn(self, ctx: Any) -> Turn:
        context = self.context(ctx)
        if not isinstance(context, TurnContext):
            context = await context
        turn = self.rails.turn(context)
        await aoffer(turn, user_text(getattr(ctx, "meta", None)), self.names)
        return turn
