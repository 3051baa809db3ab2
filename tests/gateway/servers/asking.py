"""An upstream that asks the client during a call: questions (elicitation) and
completions from its model (sampling), through the SDK's resolvers (a
2026-07-28 call answers ``input_required``; an older one sends the request
mid-call) and through the older request itself (``ctx.elicit``). ``hold``
keeps a call in flight until a file exists; ``forever`` never stops asking.
Its questions hold ``$ASKING_KEY`` (a careless upstream). With ``--legacy``
it speaks only the older protocol (``server/discover`` fails: a client falls
back to the handshake).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.types import (
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

app = MCPServer("asking")
KEY = os.environ.get("ASKING_KEY", "none")


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit(f"Your name? (key {KEY})", Name)


def ask_model() -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"a word ({KEY})"))
    return Sample([message], max_tokens=5)


@app.tool()
def greet(greeting: str, name: Annotated[Name, Resolve(ask_name)]) -> str:
    """Greet the user by the name they give when asked."""
    return f"{greeting} {name.name}"


@app.tool()
def draft(topic: str, word: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """A draft on ``topic`` with a word from the client's model."""
    text = word.content.text if isinstance(word.content, TextContent) else "?"
    return f"{topic}: {text}"


@app.tool()
async def ask(ctx: Context) -> str:
    """Ask the client for a name with the older request (``elicitation/create``)."""
    try:
        result = await ctx.elicit(f"Your name? (key {KEY})", Name)
    except Exception as exc:
        return f"elicitation refused ({type(exc).__name__})"
    return f"elicitation {result.action} {getattr(result, 'data', None)}"


@app.tool()
async def hold(path: str) -> str:
    """Write ``path``.started, then answer once ``path`` exists (a call kept in flight)."""
    import anyio

    with open(f"{path}.started", "w"):
        pass
    while not os.path.exists(path):
        await anyio.sleep(0.01)
    return "held"


@app.prompt()
async def named(ctx: Context) -> str:
    """A prompt that asks for a name with the older request (``ctx.elicit``)."""
    try:
        result = await ctx.elicit(f"Your name? (key {KEY})", Name)
    except Exception as exc:
        return f"elicitation refused ({type(exc).__name__})"
    return f"elicitation {result.action}"


@app.tool()
async def forever() -> str | InputRequiredResult:
    """Answer ``input_required`` at every round (an upstream that never finishes)."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    question = ElicitRequest(
        params=ElicitRequestFormParams(message="again?", requested_schema=schema)
    )
    return InputRequiredResult(input_requests={"again": question}, request_state="more")


def _older_only() -> None:
    """Every connection opens in the older (handshake) protocol: the 2026-07-28
    envelope is not recognised, so ``server/discover`` fails and a client falls back."""
    from mcp.server import runner

    runner._has_modern_envelope = lambda params: False  # type: ignore[attr-defined]


if __name__ == "__main__":
    if "--legacy" in sys.argv:
        _older_only()
    serve(app)
