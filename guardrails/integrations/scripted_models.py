"""Offline models for the agent frameworks: they answer from a script and keep what they were sent.

For tests, examples and docs without network. A script is a list of turns;
a turn is either the final text, or a list of tool calls ``(name, arguments)``
(call ids ``call_0``, ``call_1`` ... within each turn) or ``(call_id, name,
arguments)``::

    client = chat_client([("get_orders", {"status": "open"})], "done")  # Agent Framework
    llm = adk_model([("get_orders", {"status": "open"})], "done")       # Google ADK

After a run, ``.requests`` holds every request the framework sent (none are kept with ``repeat``), and
``tool_results(model)`` what the model was sent back for each call id in the
last one. (For the Claude Agent SDK, the CLI talks to the Messages API: use
``scripted.ScriptedMessagesAPI``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Turn", "adk_model", "chat_client", "tool_results"]

# One scripted turn: the final text, or tool calls as (name, arguments) or (call id, name, arguments).
Turn = str | Sequence[tuple[str, dict[str, Any]] | tuple[str, str, dict[str, Any]]]


def _next(script: list[Any], repeat: bool) -> Any:
    if not script:
        return "(the script has ended)"
    turn = script.pop(0)
    if repeat:
        script.append(turn)
    return turn


def _calls(turn: Sequence[Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(call id, name, arguments) of each call of a turn; ``call_<i>`` where no id is given."""
    return [(f"call_{i}", *call) if len(call) == 2 else tuple(call) for i, call in enumerate(turn)]


def chat_client(*turns: Turn, repeat: bool = False) -> Any:
    """An Agent Framework chat client (with function invocation and middleware) reading ``turns``.

    With ``repeat`` the script starts again when it ends (for benchmarks).
    """
    import agent_framework as af
    from agent_framework.observability import ChatTelemetryLayer

    class ScriptedChatClient(  # type: ignore[misc, unused-ignore]
        af.FunctionInvocationLayer, af.ChatMiddlewareLayer, ChatTelemetryLayer, af.BaseChatClient
    ):
        def __init__(self) -> None:
            super().__init__()
            self.script = list(turns)
            self.requests: list[tuple[list[Any], dict[str, Any]]] = []

        def _inner_get_response(
            self, *, messages: Any, stream: bool, options: Any, **kwargs: Any
        ) -> Any:
            if not repeat:
                self.requests.append((list(messages), dict(options)))
            turn = _next(self.script, repeat)
            if isinstance(turn, str):
                contents: list[Any] = [turn]
            else:
                contents = [
                    af.Content.from_function_call(call_id=call_id, name=name, arguments=args)
                    for call_id, name, args in _calls(turn)
                ]
            message = af.Message(role="assistant", contents=contents)
            if stream:

                async def updates() -> Any:
                    yield af.ChatResponseUpdate(role="assistant", contents=message.contents)

                return af.ResponseStream(updates(), finalizer=af.ChatResponse.from_updates)

            async def response() -> Any:
                return af.ChatResponse(messages=[message])

            return response()

    return ScriptedChatClient()


def adk_model(*turns: Turn, repeat: bool = False) -> Any:
    """A Google ADK ``BaseLlm`` reading ``turns`` (with ``repeat``, again and again)."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    class ScriptedLlm(BaseLlm):  # type: ignore[misc, unused-ignore]
        script: list[Any]
        requests: list[Any]

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            if not repeat:
                self.requests.append(llm_request.model_copy(deep=True))
            turn = _next(self.script, repeat)
            if isinstance(turn, str):
                parts = [types.Part(text=turn)]
            else:
                parts = [
                    types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))
                    for call_id, name, args in _calls(turn)
                ]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    return ScriptedLlm(model="scripted", script=list(turns), requests=[])


def tool_results(model: Any) -> dict[str, Any]:
    """What the model was sent back for each call id, in its last request."""
    last = model.requests[-1]
    if isinstance(last, tuple):  # Agent Framework: (messages, options)
        return {
            c.call_id: c.result for m in last[0] for c in m.contents if c.type == "function_result"
        }
    return {
        p.function_response.id: p.function_response.response
        for c in last.contents
        for p in c.parts
        if p.function_response is not None
    }
