"""MCP servers (``mcp`` >= 2): tools/list filtered by pre_turn, tools/call through tool_call.

Either serve an engine's tools from a server of their own::

    server = guarded_server(rails, "billing", context=lambda ctx: TurnContext(tenant=...))

or put them in front of an existing ``MCPServer`` / low-level ``Server`` as a
``(ctx, call_next)`` middleware, which answers ``tools/list`` and
``tools/call`` from the engine and passes every other request on::

    app.middleware.append(GuardedTools(rails, context=...))

``context`` maps each request to the ``TurnContext`` its turn runs in (tenant,
session, phase from your auth and session state: never from the model);
``turn_input``, when given, to what pre_turn reads as the user's input (MCP
requests carry none of their own). A non-``ok`` outcome answers
``isError: true`` with the outcome's fixed sentence.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..context import ToolResult, TurnContext
from ..engine import Guardrails, Turn
from ..tools import Tool
from ._common import aoffer
from ._mcp_results import Forwarded, answer, forwarded

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult

__all__ = [
    "Forwarded",
    "GuardedTools",
    "ServerToolFailed",
    "call_tool_result",
    "default_context",
    "guarded_server",
    "tools_from_server",
]

ContextFn = Callable[["ServerRequestContext[Any, Any]"], TurnContext | Awaitable[TurnContext]]
# The user's input of a request for pre_turn (text, messages; None: no input).
TurnInputFn = Callable[["ServerRequestContext[Any, Any]"], Any]


def default_context(ctx: ServerRequestContext[Any, Any]) -> TurnContext:
    """The tenant is the authenticated client (HTTP with auth); nothing else is known."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    return TurnContext(tenant=None if token is None else token.client_id)


_HEADER_KEY = "x-mcp-header"


def _no_header_check(name: str) -> None:
    return None


def header_lookup(rails: Guardrails) -> Callable[[str], None] | None:
    """What a low-level ``Server`` serving ``rails``' tools takes as ``get_tool_input_schema``.

    On the 2026-07-28 HTTP transport the SDK compares a ``tools/call``'s
    ``Mcp-Param-*`` headers with the ``x-mcp-header`` annotations of the called
    tool's schema; without a lookup it runs the ``tools/list`` handler (pre_turn,
    with its audit row) on every call to find that schema. When no tool's schema
    has such an annotation there is nothing to compare, whatever the caller may
    see: a lookup answering None says so without listing. Otherwise None: the
    SDK lists the caller's tools as before, so a tool hidden from the caller is
    never compared (its call answers ``unavailable`` like any unlisted tool).
    """
    for tool in rails.tools.values():
        if _declares_header(tool.schema):
            return None
    return _no_header_check


def _declares_header(schema: Any) -> bool:
    stack = [schema]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            if _HEADER_KEY in value:
                return True
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return False


def call_tool_result(result: ToolResult) -> CallToolResult:
    """The MCP answer for a guarded call: its content, ``isError`` unless the outcome is ``ok``.

    An ``ok`` result keeps its shape when the model would read exactly its text:
    an MCP content block the tool returned (an image, audio, a resource) and a
    server tool's answer are sent as they are, and a JSON object also as
    ``structuredContent`` beside its text.
    """
    return answer(result)


class GuardedTools:
    """``tools/list`` and ``tools/call`` answered from a Guardrails engine.

    Usable as the SDK's ``(ctx, call_next)`` server middleware, or through its
    ``list_tools`` / ``call_tool`` methods as the handlers of a low-level
    ``Server`` (``guarded_server`` does that). Each request is a turn of its
    own: pre_turn decides what the caller is offered, so a tool that is not
    listed for the caller's phase or tenant answers ``unavailable`` if called.

    ``turn_input(ctx)`` (a function or a coroutine function) gives pre_turn the
    user's input for the request, for guards that read what the user asked
    (``trigger``, intent gates); without it pre_turn runs with no user input.
    Like ``context``, it reads what the application knows, never the model.
    """

    def __init__(
        self,
        rails: Guardrails,
        *,
        context: ContextFn = default_context,
        names: Iterable[str] | None = None,
        turn_input: TurnInputFn | None = None,
    ) -> None:
        self.rails = rails
        self.context = context
        self.names = None if names is None else tuple(names)
        self.turn_input = turn_input

    async def _turn(self, ctx: ServerRequestContext[Any, Any]) -> Turn:
        context = self.context(ctx)
        if not isinstance(context, TurnContext):
            context = await context
        turn = self.rails.turn(context)
        await aoffer(turn, await self._input(ctx), self.names)
        return turn

    async def _input(self, ctx: ServerRequestContext[Any, Any]) -> Any:
        if self.turn_input is None:
            return None
        found = self.turn_input(ctx)
        return await found if inspect.isawaitable(found) else found

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: Any = None
    ) -> ListToolsResult:
        from mcp.types import ListToolsResult
        from mcp.types import Tool as MCPTool

        turn = await self._turn(ctx)
        offered = turn.offered or frozenset()
        tools = [
            MCPTool(
                name=t.name,
                description=t.description or None,
                input_schema=t.to_mcp()["inputSchema"],
            )
            for t in self.rails.tools.values()
            if t.name in offered
        ]
        # The listing depends on who asks and on their phase: never cached, never shared.
        return ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        return call_tool_result(await self.result(ctx, params))

    async def result(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> ToolResult:
        """The guarded call's result, before it is made an MCP answer."""
        turn = await self._turn(ctx)
        arguments = {} if params.arguments is None else params.arguments
        return await turn.acall(params.name, arguments)

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "tools/list":
            return await self.list_tools(ctx)
        if ctx.method == "tools/call":
            from mcp.types import CallToolRequestParams

            # Middleware runs before the SDK validates params; malformed params
            # raise ValidationError, which the SDK answers as invalid params.
            return await self.call_tool(ctx, CallToolRequestParams.model_validate(ctx.params or {}))
        return await call_next(ctx)


class ServerToolFailed(RuntimeError):
    """A server tool answered with an error result; kept for the audit trail, never sent on."""


async def tools_from_server(
    app: Any, options: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Tool]:
    """The tools an ``MCPServer`` registered itself (``@app.tool()``), as guarded tools.

    Each calls back into ``app.call_tool``; register them with an engine and put
    ``GuardedTools`` in front of the same server, so its own tools are listed by
    pre_turn and called through tool_call (a failure then answers the fixed
    sentence instead of the exception text the server would send).
    ``options`` maps a tool name to ``Tool`` options (``bind=``, ``guards=``,
    ``effect=`` ...).
    """
    options = options or {}
    tools = []
    for definition in await app.list_tools():
        call = _call_through(app, definition.name)
        # The forwarding function takes **arguments, but the server's own tool
        # does not: undeclared arguments are refused unless the options say otherwise.
        given = {"extra": "reject", **options.get(definition.name, {})}
        tools.append(Tool.from_definition(definition, call, **given))
    return tools


def _call_through(app: Any, name: str) -> Callable[..., Awaitable[Forwarded]]:
    async def call(**arguments: Any) -> Forwarded:
        result = await app.call_tool(name, arguments)
        if getattr(result, "is_error", None) is not False:
            # An error result, or a shape this integration does not forward.
            raise ServerToolFailed(f"tool {name!r} answered {type(result).__name__} with an error")
        # Its blocks and structured content, as the server would have sent them.
        return forwarded(result)

    return call


def guarded_server(
    rails: Guardrails,
    name: str = "guardrails",
    *,
    context: ContextFn = default_context,
    names: Iterable[str] | None = None,
    turn_input: TurnInputFn | None = None,
    **options: Any,
) -> Server[Any]:
    """A low-level MCP ``Server`` whose tools are the engine's, guarded.

    ``context``, ``names`` and ``turn_input`` are those of ``GuardedTools``;
    ``options`` go to ``mcp.server.Server`` (``version``, ``instructions`` ...).
    """
    from mcp.server import Server

    tools = GuardedTools(rails, context=context, names=names, turn_input=turn_input)
    options.setdefault("get_tool_input_schema", header_lookup(rails))
    return Server(name, on_list_tools=tools.list_tools, on_call_tool=tools.call_tool, **options)
