"""Claude Agent SDK: the engine's tools served in process, every call through tool_call.

::

    options = guard_options(ClaudeAgentOptions(...), rails, server="shop", sdk_tools=[get_orders])
    async for message in query(prompt="...", options=options): ...

``guard_options`` registers the SDK's ``@tool`` functions (``sdk_tools``) in the engine
(schema read the way the SDK builds it), serves all the engine's tools as the
in-process MCP server ``server`` (bound parameters hidden), and adds hooks:

- ``UserPromptSubmit`` starts a ``Turn`` for the session and runs pre_turn over
  the prompt (a refused prompt is blocked with the refusal code);
- ``PreToolUse`` notes each call of a served tool (its session and call id)
  and lets it through, or leaves it to the application's ``can_use_tool``
  (kept, and a call it denies audited); the served tool then runs the call
  through tool_call in that session's turn and answers with the result's
  content (``isError`` unless ok): the model reads exactly our outcome, never
  the CLI's or the SDK's words. The CLI's own tools named in ``cli_tools`` are
  admitted here and completed at ``PostToolUse`` (``_claude_cli``);
- ``Stop`` runs post_run over the last assistant message.

A served call the approval gate would ask about is put to it before the
application's ``can_use_tool`` is asked (docs/approvals.md).

The CLI answers calls of tools that do not exist at all before any hook runs
(``No such tool available: <name>``); that text cannot be replaced from here.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import json
from collections import defaultdict, deque
from collections.abc import Iterable
from typing import Any

from ..context import ToolResult
from ..engine import Guardrails, Turn
from ..errors import ConfigurationError
from ..middleware.ticket import Ticket
from ..tools import Tool
from ..verdicts import Outcome, model_sentence
from ._approval import gated, held, plain
from ._claude_cli import CliTools
from ._common import ContextSource, ReportSink, start_turn
from ._framework_tools import (
    Clash,
    ToolOptions,
    arefused,
    check_options,
    extra_of,
    register,
    watch,
)
from ._media import claude_text
from ._rich import Rich, sent

__all__ = ["ToolReportedError", "guard_options", "tool_from"]

_MCP = "mcp__"


class ToolReportedError(Exception):
    """An SDK tool answered ``is_error``: the call's outcome is ``error`` (its text stays here)."""


def tool_from(sdk_tool: Any, **options: Any) -> Tool:
    """A guarded ``Tool`` for a Claude Agent SDK ``@tool`` function (an ``SdkMcpTool``).

    The schema is the one the SDK would send (a ``{"name": type}`` mapping makes
    every key required, as the SDK does; undeclared arguments are refused unless
    the schema opens them); ``options`` are those of ``Tool``.
    """
    from claude_agent_sdk import _build_input_schema

    handler = sdk_tool.handler
    schema = _build_input_schema(sdk_tool)

    async def run(**arguments: Any) -> Any:
        answer = await handler(arguments)
        if not isinstance(answer, dict) or answer.get("is_error"):
            raise ToolReportedError(f"tool {sdk_tool.name!r} answered with an error")
        return _rendered(answer.get("content") or [])

    options.setdefault("description", sdk_tool.description or "")
    options.setdefault("extra", extra_of(schema))
    return Tool(sdk_tool.name, run, schema, **options)


# Where a served call's rich result waits while tool_call renders its stand-in.
_RICH: contextvars.ContextVar[list[Rich]] = contextvars.ContextVar("guardrails_claude_rich")


def _rendered(content: Any) -> str:
    """The text tool_call renders for a tool's content blocks, as the SDK would serve them.

    Text blocks are their text, an image its note (``[image/png, 1234 bytes]``);
    when there is an image, the blocks wait in ``_RICH`` to be served as they are.
    """
    from claude_agent_sdk import _convert_tool_content  # what the SDK's own server sends

    blocks = _convert_tool_content(list(content))
    text = claude_text(blocks)
    if text is None:
        return "\n".join(str(block["text"]) for block in blocks)
    found = _RICH.get(None)
    if found is not None:
        found.append(Rich(text, blocks))
    return text


class _Hooks:
    """The state the hooks share: one turn per session, and ok results waiting for the server."""

    def __init__(
        self,
        rails: Guardrails,
        server: str,
        context: ContextSource,
        on_report: ReportSink,
        can_use_tool: Any = None,
        cli: CliTools | None = None,
    ) -> None:
        self.rails = rails
        # The CLI's own tools the engine decides (``cli_tools``), through tickets.
        self.cli = cli
        self.prefix = f"{_MCP}{server}__"
        self.context = context
        self.on_report = on_report
        # The application's permission callback, asked for every served call.
        self.can_use_tool = can_use_tool
        self.turns: dict[str, Turn] = {}
        # Calls PreToolUse let through, by tool and arguments: the turn and call id
        # the served tool runs them in (the server is not told the session).
        self.waiting: defaultdict[tuple[str, str], deque[tuple[Turn, str | None]]] = defaultdict(
            deque
        )
        # Served calls the approval gate let through while the application's callback was
        # asked (a stored approval used), by call id: the served tool completes their ticket.
        self.admitted: dict[str, Ticket] = {}

    def turn_of(self, hook_input: dict[str, Any]) -> Turn:
        session = hook_input.get("session_id")
        key = session if isinstance(session, str) else ""
        turn = self.turns.get(key)
        if turn is None:
            turn = self.turns[key] = start_turn(self.rails, self.context, hook_input, session)
        return turn

    async def prompt(self, hook_input: Any, tool_use_id: Any, ctx: Any) -> Any:
        self.turns.pop(str(hook_input.get("session_id") or ""), None)
        decision = await self.turn_of(hook_input).apre_turn(hook_input.get("prompt") or "")
        if decision.refusal is not None:
            return {"decision": "block", "reason": str(decision.refusal.code)}
        return {}

    async def pre_tool(self, hook_input: Any, tool_use_id: Any, ctx: Any) -> Any:
        full_name = hook_input.get("tool_name")
        call_id = hook_input.get("tool_use_id") or tool_use_id
        if self.cli is not None and full_name in self.cli.names:
            # One of the CLI's own tools: decided here, run by the CLI.
            turn = self.turn_of(hook_input)
            return await self.cli.admit(turn, full_name, hook_input.get("tool_input"), call_id)
        if not (isinstance(full_name, str) and full_name.startswith(self.prefix)):
            return {}  # not a served tool: the CLI's own permissions decide
        name = full_name[len(self.prefix) :]
        turn = self.turn_of(hook_input)
        self.waiting[(name, _key(hook_input.get("tool_input")))].append(
            (turn, call_id if isinstance(call_id, str) else None)
        )
        # The call itself runs when the CLI calls the served tool, so a hook of
        # the application that denies it stops it before anything runs. With a
        # permission callback of the application's, the CLI asks it next.
        return {} if self.can_use_tool is not None else _ALLOW

    async def permit(self, name: str, tool_input: Any, ctx: Any) -> Any:
        """The application's ``can_use_tool``; a served call it denies is audited (``unavailable``).

        A served call the approval gate would ask about is put to the gate first, so that
        its request is stored while the application's callback decides (a person can
        approve it from anywhere meanwhile); the call still runs only on that approval."""
        served = name[len(self.prefix) :] if name.startswith(self.prefix) else None
        early = await self._gate(served, tool_input, ctx) if served is not None else None
        decision = await self.can_use_tool(name, tool_input, ctx)
        denied = getattr(decision, "behavior", None) == "deny"
        if served is None:
            if denied and self.cli is not None:
                await self.cli.refused(getattr(ctx, "tool_use_id", None))
            return decision
        waiting = self._take(served, tool_input, getattr(ctx, "tool_use_id", None))
        if waiting is None:
            return decision
        turn, call_id = waiting
        updated = getattr(decision, "updated_input", None)
        kept = not denied and call_id is not None and (updated is None or updated == tool_input)
        if early is not None and kept:
            self.admitted[str(call_id)] = early
        elif early is not None and early.open:
            await early.afail()  # admitted for what was asked, which does not run as asked
        if denied:
            if early is None:  # (a ticket's call was audited when it was decided)
                await arefused(turn, served, tool_input, call_id)
            return decision
        # Allowed, perhaps with arguments the application rewrote: those are the call's.
        arguments = tool_input if updated is None else updated
        self.waiting[(served, _key(arguments))].append(waiting)
        return decision

    async def _gate(self, name: str, tool_input: Any, ctx: Any) -> Ticket | None:
        """A served call the gate would ask about, admitted now: None when the gate holds it
        (its request stored) or does not ask; else its ticket (a stored approval used)."""
        if not gated(self.rails, name, tool_input):
            return None
        key = (name, _key(tool_input))
        call_id = getattr(ctx, "tool_use_id", None)
        queue = self.waiting.get(key)
        if not queue:
            return None
        turn, known = next((e for e in queue if e[1] == call_id), queue[0])
        ticket = await turn.aadmit(name, tool_input, known)
        return None if ticket.result is not None and held(ticket.result) else ticket

    def _take(self, name: str, arguments: Any, call_id: Any) -> tuple[Turn, str | None] | None:
        """The waiting call of ``name`` with these arguments (this call id, if it is there)."""
        key = (name, _key(arguments))
        queue = self.waiting.get(key)
        if not queue:
            return None
        found = next((entry for entry in queue if entry[1] == call_id), queue[0])
        queue.remove(found)
        if not queue:
            del self.waiting[key]
        return found

    async def stop(self, hook_input: Any, tool_use_id: Any, ctx: Any) -> Any:
        turn = self.turns.pop(str(hook_input.get("session_id") or ""), None)
        if turn is None:
            return {}
        for key, queue in list(self.waiting.items()):
            # Calls let through but never made (another hook denied them).
            kept = deque(entry for entry in queue if entry[0] is not turn)
            if kept:
                self.waiting[key] = kept
            else:
                del self.waiting[key]
        if self.cli is not None:
            self.cli.forget(turn)  # post_run settles their open tickets
        report = await turn.apost_run(hook_input.get("last_assistant_message") or "")
        if self.on_report is not None:
            self.on_report(report)
        return {}

    async def call(self, name: str, arguments: Any) -> tuple[Any, bool]:
        """Run a call PreToolUse let through, in its turn: (content blocks, is_error)."""
        waiting = self._take(name, arguments, None)
        if waiting is None:
            # Not seen by the hook (the server used without it): nothing runs.
            return _text_blocks(model_sentence(Outcome.UNAVAILABLE)), True
        turn, call_id = waiting
        ticket = self.admitted.pop(call_id, None) if call_id is not None else None
        found: list[Rich] = []
        token = _RICH.set(found)
        try:
            if ticket is not None:  # admitted while the application's callback was asked
                result = await _settled(ticket, self.rails.tools[name])
            else:
                result = await turn.acall(name, arguments, call_id)
        finally:
            _RICH.reset(token)
        answer = sent(result, found[-1] if found else None)
        return (_text_blocks(answer) if isinstance(answer, str) else answer), result.is_error


async def _settled(ticket: Ticket, tool: Tool) -> ToolResult:
    """A served call admitted before it ran: its body, and the steps after it."""
    if not ticket.admitted:
        assert ticket.result is not None
        return ticket.result
    try:
        value = tool(**plain(ticket.arguments))
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:  # read as turn.call reads a tool's exception
        return await ticket.afail(exc)
    return await ticket.acomplete(value)


def _text_blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


_ALLOW = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}


def _key(arguments: Any) -> str:
    """The same text for the arguments the hook saw and those the server got.

    Both were parsed from JSON the CLI wrote; a number written ``1.0`` on one
    side may be ``1`` on the other, so integral floats count as integers.
    """
    return json.dumps(_canonical(arguments), sort_keys=True, ensure_ascii=False, default=str)


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def _server(hooks: _Hooks, rails: Guardrails, name: str) -> Any:
    from mcp.server import Server
    from mcp.types import CallToolResult, ListToolsResult
    from mcp.types import Tool as McpTool

    cli = hooks.cli.names if hooks.cli is not None else frozenset()

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        served = [t for t in rails.tools.values() if t.name not in cli]
        return ListToolsResult(tools=[McpTool.model_validate(t.to_mcp()) for t in served])

    async def call_tool(ctx: Any, params: Any) -> CallToolResult:
        blocks, is_error = await hooks.call(params.name, params.arguments or {})
        return CallToolResult.model_validate({"content": blocks, "isError": is_error})

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def _added(hooks: _Hooks) -> dict[str, list[Any]]:
    """The hooks the adapter adds, after the application's, by event."""
    from claude_agent_sdk import HookMatcher

    added = {
        "UserPromptSubmit": [HookMatcher(hooks=[hooks.prompt])],
        "PreToolUse": [HookMatcher(hooks=[hooks.pre_tool])],
        "Stop": [HookMatcher(hooks=[hooks.stop])],
    }
    if hooks.cli is not None:
        added["PostToolUse"] = [HookMatcher(hooks=[hooks.cli.done])]
        added["PostToolUseFailure"] = [HookMatcher(hooks=[hooks.cli.failed])]
    return added


def guard_options(
    options: Any,
    rails: Guardrails,
    *,
    server: str,
    sdk_tools: Iterable[Any] = (),
    tool_options: ToolOptions | None = None,
    context: ContextSource = None,
    on_report: ReportSink = None,
    cli_tools: Iterable[str] = (),
) -> Any:
    """A copy of ``options`` (``ClaudeAgentOptions``) whose tools ``server`` are guarded by ``rails``.

    ``sdk_tools`` are ``@tool`` functions to register in the engine (with
    ``tool_options[name]``: ``bind=``, ``effect=`` ...); every engine tool is
    served as ``mcp__<server>__<name>``, replacing any server of that name.
    ``cli_tools`` names engine tools that are the CLI's own (``"Bash"``): those
    are not served, and each of their calls is admitted before the CLI runs it
    and completed with its output. ``context`` is a ``TurnContext`` or a
    function of the hook input returning one (default: the SDK session id);
    ``on_report`` receives each run's post_run report.
    """
    from claude_agent_sdk.types import McpSdkServerConfig

    sdk_tools = list(sdk_tools)
    check_options([t.name for t in sdk_tools], tool_options, "guard_options(options)")
    for sdk_tool in sdk_tools:
        given = (tool_options or {}).get(sdk_tool.name)
        build = functools.partial(tool_from, sdk_tool)
        register(rails, sdk_tool.name, build, given, source=sdk_tool, clash=Clash.APPLICATION_WINS)
    if not rails.tools:
        raise ConfigurationError("guard_options(options): the engine has no tools to serve")
    watch(rails)  # a served call the application's can_use_tool denies is audited through it
    cli = CliTools(rails, cli_tools) if cli_tools else None
    hooks = _Hooks(rails, server, context, on_report, options.can_use_tool, cli)
    existing = dict(options.hooks or {})
    merged = {event: [*existing.get(event, []), *added] for event, added in _added(hooks).items()}
    if not isinstance(options.mcp_servers, dict):
        raise ConfigurationError(
            "guard_options(options): mcp_servers must be a dict to add the guarded server"
        )
    servers = dict(options.mcp_servers)
    servers[server] = McpSdkServerConfig(
        type="sdk", name=server, instance=_server(hooks, rails, server)
    )
    permit = None if options.can_use_tool is None else hooks.permit
    return dataclasses.replace(
        options, hooks={**existing, **merged}, mcp_servers=servers, can_use_tool=permit
    )
