"""OpenAI-style function calling: tool definitions in and out, ``tool_calls`` through tool_call.

No OpenAI package is needed: messages may be dicts or SDK objects with the
same fields. A chat-completion message's ``tool_calls`` become ``tool`` role
messages whose content is exactly what tool_call decided the model may see::

    tools = offer_tools(turn)                      # pass as `tools=` to the API
    reply = ...                                    # the assistant message
    messages += [reply, *tool_messages(turn, reply)]

For the Responses API, ``offer_response_tools`` gives the flat definitions and
``function_call_outputs`` answers a response's ``function_call`` items.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..context import ToolResult
from ..engine import Guardrails, Turn
from ..errors import ConfigurationError
from ..tools import Tool
from ._common import Call, aanswer, answer, call_of, field, items, native_blocks, offer, tools_of

__all__ = [
    "afunction_call_outputs",
    "atool_messages",
    "function_call_outputs",
    "load_tools",
    "offer_response_tools",
    "offer_tools",
    "openai_tools",
    "tool_message",
    "tool_messages",
]


def openai_tools(
    source: Guardrails | Turn | Iterable[Tool], names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Tools as OpenAI ``{"type": "function", ...}`` definitions, bound parameters hidden."""
    wanted = None if names is None else frozenset(names)
    return [t.to_openai() for t in tools_of(source) if wanted is None or t.name in wanted]


def offer_tools(
    turn: Turn, messages: Any = None, *, names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """What pre_turn offers for ``messages``, as OpenAI definitions.

    The turn remembers the offer: any other tool is ``unavailable`` at tool_call.
    """
    return [t.to_openai() for t in offer(turn, messages, names).tools]


def offer_response_tools(
    turn: Turn, messages: Any = None, *, names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """``offer_tools`` in the Responses API's flat ``{"type": "function", "name": ...}`` form."""
    return [
        {"type": "function", **t.to_openai()["function"]}
        for t in offer(turn, messages, names).tools
    ]


def load_tools(
    definitions: Iterable[Any],
    implementations: Mapping[str, Callable[..., Any]],
    **options: Any,
) -> list[Tool]:
    """Tools from OpenAI definitions (bare or ``{"type": "function"}``-wrapped).

    ``implementations`` maps each tool name to its function; ``options`` go to
    every ``Tool`` (for example ``timeout=``).
    """
    tools = []
    for definition in definitions:
        body = field(definition, "function") or definition
        name = field(body, "name")
        if name not in implementations:
            raise ConfigurationError(f"tool {name!r}: no implementation given")
        tools.append(Tool.from_definition(definition, implementations[name], **options))
    return tools


def tool_message(result: ToolResult, call_id: str | None = None) -> dict[str, Any]:
    """One ``tool`` role message: the outcome's content, never exception text."""
    answered = result.call_id if call_id is None else call_id
    return {"role": "tool", "tool_call_id": answered, "content": result.content}


def _calls(message: Any) -> list[Call]:
    return [
        call_of(
            field(field(call, "function") or {}, "name"),
            field(field(call, "function") or {}, "arguments"),
            field(call, "id"),
        )
        for call in items(field(message, "tool_calls"))
    ]


def tool_messages(turn: Turn, message: Any) -> list[dict[str, Any]]:
    """Run every tool call of an assistant message through tool_call, in order."""
    return answer(turn, _calls(message), tool_message)


async def atool_messages(turn: Turn, message: Any) -> list[dict[str, Any]]:
    """``tool_messages`` for async tools and guards."""
    return await aanswer(turn, _calls(message), tool_message)


# -- the Responses API: function_call items -------------------------------------------


def _function_calls(response_items: Any) -> list[Call]:
    return [
        call_of(field(item, "name"), field(item, "arguments"), field(item, "call_id"))
        for item in items(field(response_items, "output", response_items))
        if field(item, "type") == "function_call"
    ]


# What a ``function_call_output`` may hold besides text: a tool that returns these
# items (an image, a file) is answered with them, as the Responses API carries them.
_OUTPUT_TYPES = frozenset({"input_text", "input_image", "input_file"})


def _output_item(result: ToolResult, call_id: str | None) -> dict[str, Any]:
    answered = result.call_id if call_id is None else call_id
    items = native_blocks(result, _OUTPUT_TYPES)
    output: Any = result.content if items is None else items
    return {"type": "function_call_output", "call_id": answered, "output": output}


def function_call_outputs(turn: Turn, response: Any) -> list[dict[str, Any]]:
    """Responses API: each ``function_call`` item (of a response, or a list of items)
    through tool_call; the ``function_call_output`` items to send back."""
    return answer(turn, _function_calls(response), _output_item)


async def afunction_call_outputs(turn: Turn, response: Any) -> list[dict[str, Any]]:
    """``function_call_outputs`` for async tools and guards."""
    return await aanswer(turn, _function_calls(response), _output_item)
