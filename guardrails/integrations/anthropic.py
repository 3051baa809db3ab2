"""The Anthropic Messages API: offered tools in, ``tool_use`` through tool_call, ``tool_result`` out.

The ``anthropic`` package is imported only by the parts that need it (the
``beta_tool`` adapters); messages may be SDK objects or dicts::

    run = run_tool_loop(client, turn, model=..., max_tokens=1024, messages=[...])

or, inside a loop of your own::

    message = client.messages.create(..., tools=offer_tools(turn, messages))
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
from ._common import (
    Call,
    Offer,
    aanswer,
    answer,
    aoffer,
    call_of,
    field,
    items,
    native_blocks,
    offer,
    tools_of,
)

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
    "tool_result_content",
    "tool_results",
]


def anthropic_tools(
    source: Guardrails | Turn | Iterable[Tool], names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Tools as Anthropic tool params, bound parameters hidden."""
    wanted = None if names is None else frozenset(names)
    return [t.to_anthropic() for t in tools_of(source) if wanted is None or t.name in wanted]


def offer_tools(
    turn: Turn, messages: Any = None, *, names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """The ``tools`` for ``messages.create``: what pre_turn offers for ``messages``.

    The turn remembers the offer: any other tool is ``unavailable`` at
    tool_call. A refused turn offers nothing; ``turn.pre_turn(messages)``
    returns the whole decision, refusal code included.
    """
    return [t.to_anthropic() for t in offer(turn, messages, names).tools]


# What a ``tool_result`` may hold besides text: a tool that returns these blocks
# (an image, a document) is answered with them, as the Messages API carries them.
_BLOCK_TYPES = frozenset({"text", "image", "document", "search_result"})


def tool_result_content(result: ToolResult) -> str | list[dict[str, Any]]:
    """What the model reads: the content tool_call decided on, or, for an ``ok`` result
    made of content blocks (images, documents) that fits ``max_result_chars``, the blocks."""
    blocks = native_blocks(result, _BLOCK_TYPES)
    return result.content if blocks is None else blocks


def tool_result_block(result: ToolResult, tool_use_id: str | None = None) -> dict[str, Any]:
    """One ``tool_result`` content block for a guarded call."""
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": result.call_id if tool_use_id is None else tool_use_id,
        "content": tool_result_content(result),
    }
    if result.is_error:
        block["is_error"] = True
    return block


def _tool_uses(message: Any) -> list[Call]:
    return [
        call_of(field(block, "name"), field(block, "input"), field(block, "id"))
        for block in items(field(message, "content"))
        if field(block, "type") == "tool_use"
    ]


def tool_results(turn: Turn, message: Any) -> list[dict[str, Any]]:
    """Run each ``tool_use`` block of ``message`` through tool_call; the ``tool_result`` blocks."""
    return answer(turn, _tool_uses(message), tool_result_block)


async def atool_results(turn: Turn, message: Any) -> list[dict[str, Any]]:
    """``tool_results`` for async tools and guards."""
    return await aanswer(turn, _tool_uses(message), tool_result_block)


# -- the tool loop ------------------------------------------------------------


class Run(NamedTuple):
    """How a tool loop ended.

    ``message`` is the model's last message (None when pre_turn refused the
    turn before any model call: ``refusal`` holds its code); ``messages`` the
    transcript; ``results`` every guarded call; ``exhausted`` is True when the
    loop stopped at ``max_iterations`` with the model still asking for tools.
    """

    message: Any
    messages: list[dict[str, Any]]
    results: list[ToolResult]
    exhausted: bool = False
    refusal: str | None = None


class _Loop:
    """The loop's state and decisions, shared by the sync and async drivers (no I/O)."""

    def __init__(self, turn: Turn, messages: Iterable[Any], max_iterations: int) -> None:
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        self.turn = turn
        self.input: list[Any] = list(messages)
        self.transcript: list[dict[str, Any]] = list(self.input)
        self.left = max_iterations
        self.message: Any = None
        self.asking = False
        self.refusal: str | None = None

    def going(self) -> bool:
        return self.left > 0 and self.refusal is None

    def request(self, offered: Offer, create: dict[str, Any]) -> dict[str, Any] | None:
        """The next ``messages.create`` arguments, or None when pre_turn refused the turn."""
        if offered.refusal is not None:
            self.refusal = offered.refusal
            return None
        self.left -= 1
        tools = [t.to_anthropic() for t in offered.tools]
        return {**create, "messages": list(self.transcript), "tools": tools}

    def receive(self, message: Any) -> list[tuple[Any, Any, str | None]]:
        """Record the model's message; the tool calls to answer (none: the run is over)."""
        self.message = message
        self.transcript.append({"role": "assistant", "content": field(message, "content")})
        uses = _tool_uses(message)
        self.asking = bool(uses)
        if not uses:
            self.left = 0
        return uses

    def answer(self, blocks: list[dict[str, Any]]) -> None:
        self.transcript.append({"role": "user", "content": blocks})

    def run(self) -> Run:
        results = list(self.turn.results)
        return Run(self.message, self.transcript, results, self.asking, self.refusal)


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
    ``system`` ...). Before each model call pre_turn decides the tools again
    (over the caller's ``messages``; ``names`` narrows the candidates), so a
    phase change shows in the next request.
    """
    loop = _Loop(turn, messages, max_iterations)
    while loop.going():
        request = loop.request(offer(turn, loop.input, names), create)
        if request is None:
            break
        uses = loop.receive(client.messages.create(**request))
        if uses:
            loop.answer([tool_result_block(turn.call(n, a, i), i) for n, a, i in uses])
    return loop.run()


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
    loop = _Loop(turn, messages, max_iterations)
    while loop.going():
        request = loop.request(await aoffer(turn, loop.input, names), create)
        if request is None:
            break
        uses = loop.receive(await client.messages.create(**request))
        if uses:
            loop.answer([tool_result_block(await turn.acall(n, a, i), i) for n, a, i in uses])
    return loop.run()


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
    turn: Turn,
    messages: Any = None,
    *,
    names: Iterable[str] | None = None,
    asynchronous: bool = False,
) -> list[Any]:
    """The tools pre_turn offers for ``messages``, as runnable tools for the SDK's tool runner.

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
            return tool_result_content(result)

    class AsyncGuardedTool(BetaAsyncFunctionTool[Any]):
        async def call(self, input: object) -> Any:
            result = await turn.acall(self.name, input)
            if result.is_error:
                raise ToolError(result.content)
            return tool_result_content(result)

    cls = AsyncGuardedTool if asynchronous else GuardedTool
    return [
        cls(_through_the_runner, name=t.name, description=t.description, input_schema=t.schema)
        for t in offer(turn, messages, names).tools
    ]


def _through_the_runner(**arguments: Any) -> Any:
    # Stands in for the SDK's function slot: a guarded tool runs only via call().
    raise UsageError("a guarded tool runs through the tool runner (its call method)")
