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

from collections.abc import Iterable, Mapping
from typing import Any

from ..context import ToolResult
from ..engine import Guardrails
from ..integrations.mcp import ContextFn, GuardedTools, default_context, header_lookup
from ..store.held import held

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


def _request_user_text(ctx: Any) -> str | None:
    """The user's words of an MCP request (``user_text`` of its ``_meta``)."""
    return user_text(getattr(ctx, "meta", None))


class GatewayTools(GuardedTools):
    """``GuardedTools`` whose pre_turn reads the request's ``_meta["guardrails/user"]``.

    ``serve(server)`` gives the MCP ``Server`` answering through it the header
    lookup of its engine (``header_lookup``), again whenever the engine is replaced.
    """

    def __init__(
        self,
        rails: Guardrails,
        *,
        context: ContextFn = default_context,
        names: Iterable[str] | None = None,
    ) -> None:
        self._server: Any = None
        super().__init__(rails, context=context, names=names, turn_input=_request_user_text)

    @property
    def rails(self) -> Guardrails:
        return self._rails

    @rails.setter
    def rails(self, rails: Guardrails) -> None:
        self._rails = rails
        if self._server is not None:
            self._server.get_tool_input_schema = header_lookup(rails)

    async def result(self, ctx: Any, params: Any) -> ToolResult:
        """The guarded call's result; its pre_turn's audit row is committed with the
        call's own row (``store.held``), both before the result is returned."""
        async with held():
            return await super().result(ctx, params)

    def serve(self, server: Any) -> Any:
        """``server``, whose ``Mcp-Param-*`` header check follows this object's engine."""
        self._server = server
        server.get_tool_input_schema = header_lookup(self._rails)
        return server
