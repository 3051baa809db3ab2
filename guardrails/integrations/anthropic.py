"""The Anthropic Messages API: offered tools in, ``tool_use`` through tool_call, ``tool_result`` out.

The ``anthropic`` package is imported only by the parts that need it (the
``beta_tool`` adapters); messages may be SDK objects or dicts::

    run = run_tool_loop(client, turn, model=..., max_tokens=1024, messages=[...])

or, inside a loop of your own::

    message = client.messages.create(..., tools=offer_tools(turn))
    messages += [
        {"role": "assistant", "content": message.content},
        {"role": "user", "content": tool_results(turn, message)},
    ]

Every ``tool_result`` carries the content tool_call decided on, and
``is_error: true`` for every outcome but ``ok``: a failed call is described by
its fixed sentence, never by ``repr(exception)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import pydantic

from ..context import ToolResult
from ..engine import Guardrails, Turn
from ..errors import UsageError
from ..tools import Tool
from ._common import field, offer, tools_of

__all__ = [
    "Run",
    "anthropic_tools",
    "arun_tool_loop",
    "atool_results",
    "from_beta_tool",
    "guard_beta_tools",
    "offer_tools",
    "run_tool_loop",
    "tool_result_block",
    "tool_results",
]


def anthropic_tools(
    source: Guardrails | Turn | Iterable[Tool], names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Tools as Anthropic tool params, bound parameters hidden."""
    wanted = None if names is None else frozenset(names)
    return [t.to_anthropic() for t in tools_of(source) if wanted is None or t.name in wanted]


def offer_tools(turn: Turn, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The ``tools`` for ``messages.create``: what ``turn`` offers; any other tool is ``unavailable``."""
    return [t.to_anthropic() for t in offer(turn, names)]


def tool_result_block(result: ToolResult, tool_use_id: str | None = None) -> dict[str, Any]:
    """One ``tool_result`` content block for a guarded call."""
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": tool_use_id or result.call_id,
        "content": result.content,
    }
    if result.is_error:
        block["is_error"] = True
    return block


def _tool_uses(message: Any) -> list[tuple[Any, Any, str | None]]:
    uses = []
    for block in field(message, "content") or ():
        if field(block, "type") == "tool_use":
            use_id = field(block, "id")
            uses.append(
                (
                    field(block, "name"),
                    field(block, "input"),
                    use_id if isinstance(use_id, str) else None,
                )
            )
    return uses


def tool_results(turn: Turn, message: Any) -> list[dict[str, Any]]:
    """Run each ``tool_use`` block of ``message`` through tool_call; the ``tool_result`` blocks."""
    return [
        tool_result_block(turn.call(name, arguments, use_id), use_id)
        for name, arguments, use_id in _tool_uses(message)
    ]


async def atool_results(turn: Turn, message: Any) -> list[dict[str, Any]]:
    """``tool_results`` for async tools and guards."""
    return [
        tool_result_block(await turn.acall(name, arguments, use_id), use_id)
        for name, arguments, use_id in _tool_uses(message)
    ]


# -- the tool loop ------------------------------------------------------------


class Run(NamedTuple):
    """How a tool loop ended: the last message, the whole transcript, every guarded call."""

    message: Any
    messages: list[dict[str, Any]]
    results: list[ToolResult]
    exhausted: bool = False


class _Loop:
    """The loop's state and decisions, shared by the sync and async drivers (no I/O)."""

    def __init__(
        self,
        turn: Turn,
        messages: Iterable[Any],
        names: Iterable[str] | None,
        max_iterations: int,
        create: dict[str, Any],
    ) -> None:
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        self.turn = turn
        self.transcript: list[dict[str, Any]] = list(messages)
        self.names = None if names is None else tuple(names)
        self.left = max_iterations
        self.create = create
        self.message: Any = None

    def request(self) -> dict[str, Any] | None:
        """The next ``messages.create`` arguments, or None when the loop is over."""
        if self.left == 0:
            return None
        self.left -= 1
        tools = offer_tools(self.turn, self.names)
        return {**self.create, "messages": list(self.transcript), "tools": tools}

    def receive(self, message: Any) -> list[tuple[Any, Any, str | None]]:
        """Record the model's message; the tool calls to answer (none: the run is over)."""
        self.message = message
        self.transcript.append({"role": "assistant", "content": field(message, "content")})
        uses = _tool_uses(message)
        if not uses:
            self.left = 0
        return uses

    def answer(self, blocks: list[dict[str, Any]]) -> None:
        self.transcript.append({"role": "user", "content": blocks})

    def run(self, uses_left: bool) -> Run:
        return Run(self.message, self.transcript, list(self.turn.results), uses_left)


def run_tool_loop(
    client: Any,
    turn: Turn,
    *,
    messages: Iterable[Any],
    names: Iterable[str] | None = None,
    max_iterations: int = 10,
    **create: Any,
) -> Run:
    """Call the model and answer its tool calls through tool_call until it stops asking.

    ``create`` goes to ``client.messages.create`` (``model``, ``max_tokens``,
    ``system`` ...). Before each model call, the tools are offered again, so a
    phase change shows in the next request. ``exhausted`` tells that the loop
    stopped at ``max_iterations`` with tool calls unanswered.
    """
    loop = _Loop(turn, messages, names, max_iterations, create)
    uses: list[tuple[Any, Any, str | None]] = []
    while (request := loop.request()) is not None:
        uses = loop.receive(client.messages.create(**request))
        if uses:
            loop.answer([tool_result_block(turn.call(n, a, i), i) for n, a, i in uses])
    return loop.run(bool(uses))


async def arun_tool_loop(
    client: Any,
    turn: Turn,
    *,
    messages: Iterable[Any],
    names: Iterable[str] | None = None,
    max_iterations: int = 10,
    **create: Any,
) -> Run:
    """``run_tool_loop`` for ``AsyncAnthropic`` clients, async tools and guards."""
    loop = _Loop(turn, messages, names, max_iterations, create)
    uses: list[tuple[Any, Any, str | None]] = []
    while (request := loop.request()) is not None:
        uses = loop.receive(await client.messages.create(**request))
        if uses:
            loop.answer([tool_result_block(await turn.acall(n, a, i), i) for n, a, i in uses])
    return loop.run(bool(uses))


# -- functions decorated with the SDK's beta_tool -------------------------------


def from_beta_tool(beta: Any, **options: Any) -> Tool:
    """A guarded ``Tool`` from a ``@beta_tool`` or ``@beta_async_tool`` function.

    The name, description and input schema are the SDK's; ``options`` are
    those of ``Tool`` (``bind=``, ``guards=``, ``effect=``, ``timeout=`` ...).
    Arguments are converted the way the SDK would (pydantic ``validate_call``).
    """
    options.setdefault("description", beta.description)
    return Tool(beta.name, pydantic.validate_call(beta.func), beta.input_schema, **options)


def guard_beta_tools(
    turn: Turn, names: Iterable[str] | None = None, *, asynchronous: bool = False
) -> list[Any]:
    """The tools ``turn`` offers, as runnable tools for the SDK's own tool runner.

    ``client.beta.messages.tool_runner(tools=guard_beta_tools(turn), ...)``
    then runs every call through tool_call: a non-ok outcome reaches the model
    as its fixed sentence with ``is_error``, instead of the runner's
    ``repr(exception)``. Use ``asynchronous=True`` with the async runner.
    """
    from anthropic.lib.tools import BetaAsyncFunctionTool, BetaFunctionTool, ToolError

    class GuardedTool(BetaFunctionTool[Any]):
        def call(self, input: object) -> Any:
            result = turn.call(self.name, input)
            if result.is_error:
                raise ToolError(result.content)
            return result.content

    class AsyncGuardedTool(BetaAsyncFunctionTool[Any]):
        async def call(self, input: object) -> Any:
            result = await turn.acall(self.name, input)
            if result.is_error:
                raise ToolError(result.content)
            return result.content

    cls = AsyncGuardedTool if asynchronous else GuardedTool
    return [
        cls(_through_the_runner, name=t.name, description=t.description, input_schema=t.schema)
        for t in offer(turn, names)
    ]


def _through_the_runner(**arguments: Any) -> Any:
    # Stands in for the SDK's function slot: a guarded tool runs only via call().
    raise UsageError("a guarded tool runs through the tool runner (its call method)")
