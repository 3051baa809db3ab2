"""An upstream using more of MCP: titles, annotations, output schemas, structured
results, images, embedded resources, progress, resources and prompts."""

from __future__ import annotations

import os
import sys
from typing import TypedDict

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import EmbeddedResource, ImageContent, TextResourceContents, ToolAnnotations

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

app = MCPServer("rich")
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


class Weather(TypedDict):
    city: str
    celsius: int


@app.tool(
    title="Current weather",
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
def weather(city: str) -> Weather:
    """The weather in a city."""
    return {"city": city, "celsius": 21}


@app.tool(
    title="Delete a file",
    annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
)
def delete(path: str) -> str:
    """Delete a file (nothing is deleted: a test double)."""
    return f"deleted {path}"


@app.tool()
def picture() -> list[ImageContent | EmbeddedResource]:
    """A one-pixel image and an embedded text resource."""
    return [
        ImageContent(type="image", data=PIXEL, mime_type="image/png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="notes"
            ),
        ),
    ]


def grown(text: str) -> str:
    """A tool listed once ``grow`` was called."""
    return f"grown {text}"


@app.tool()
async def grow(ctx: Context) -> str:
    """List one more tool and say so (to listen streams and to handshake sessions)."""
    app.add_tool(grown)
    await ctx.notify_tools_changed()
    await ctx.request_context.session.send_tool_list_changed()
    return "grew"


@app.tool()
async def count(label: str, steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times, each message naming ``label``."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"{label} {step}")
    return f"{label} counted {steps}"


@app.tool()
async def retitle(ctx: Context) -> str:
    """List ``weather`` under another title (a changed definition) and say so."""
    app.remove_tool("weather")
    app.add_tool(weather, title="Weather, changed")
    await ctx.notify_tools_changed()
    await ctx.request_context.session.send_tool_list_changed()
    return "retitled"


@app.tool()
async def ask(ctx: Context) -> str:
    """Ask the client for a name (an elicitation); say what became of it."""
    from pydantic import BaseModel

    class Name(BaseModel):
        name: str

    result = await ctx.elicit("Your name?", Name)
    return f"elicitation {result.action}"


@app.tool()
async def sample(ctx: Context) -> str:
    """Ask the client's model for text (sampling); say what became of it."""
    from mcp.types import SamplingMessage, TextContent

    message = SamplingMessage(role="user", content=TextContent(type="text", text="hi"))
    try:
        await ctx.request_context.session.create_message([message], max_tokens=5)
    except Exception as exc:
        return f"sampling refused ({type(exc).__name__})"
    return "sampling answered"


@app.prompt()
def greet(name: str) -> str:
    """A greeting (careless: it holds the upstream's key)."""
    return f"Hello {name}, key {os.environ.get('RICH_KEY', 'none')}"


@app.prompt()
def hidden() -> str:
    """A prompt the gateway's configuration does not expose."""
    return "hidden words"


@app.prompt()
def long() -> str:
    """A prompt longer than a small max_result_chars."""
    return "x" * 5000


@app.resource("file:///notes.txt", mime_type="text/plain")
def notes() -> str:
    """Notes (careless: they hold the upstream's key)."""
    return f"notes, key {os.environ.get('RICH_KEY', 'none')}"


@app.resource("file:///private.txt", mime_type="text/plain")
def private() -> str:
    """A resource the gateway's configuration does not expose."""
    return "private words"


@app.resource("file:///long.txt", mime_type="text/plain")
def long_notes() -> str:
    """A resource longer than a small max_result_chars."""
    return "y" * 5000


if __name__ == "__main__":
    serve(app)
