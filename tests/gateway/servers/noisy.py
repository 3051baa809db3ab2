"""An upstream that says too much: progress carrying its own key, progress without
end, a call that never answers, and prompts and resources that echo its key."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from mcp.types import EmbeddedResource, TextResourceContents

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

app = MCPServer("noisy")
KEY = os.environ.get("NOISY_KEY", "no-key")
HUGE = 200_000


@app.tool()
async def leak_progress(ctx: Context) -> str:
    """Report progress whose message names the upstream's key, then one far too long."""
    await ctx.report_progress(1, 3, f"using key {KEY}")
    await ctx.report_progress(2, 3, "x" * HUGE)
    await ctx.report_progress(3, 3, "done")
    return "reported"


@app.tool()
async def flood(times: int, ctx: Context) -> str:
    """Report progress ``times`` times, as fast as it can."""
    for step in range(times):
        await ctx.report_progress(step, None, f"step {step}")
    return f"flooded {times}"


@app.tool()
async def hang(ctx: Context) -> str:
    """Say it started in the file ``NOISY_MARK`` names, report progress, never answer."""
    with open(os.environ["NOISY_MARK"], "a") as marker:
        marker.write("hanging\n")
    await ctx.report_progress(1, None, "started")
    await anyio.sleep_forever()
    return "never"


@app.tool()
def echo(text: str) -> str:
    """Answer ``text``."""
    return text


@app.prompt(description=f"a prompt described with the key {KEY}")
def told() -> list[UserMessage | AssistantMessage]:
    """A prompt whose embedded resource carries the key."""
    return [
        UserMessage(
            content=EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///k.txt", text=f"the key is {KEY}"),
            )
        ),
    ]


@app.resource("file:///told.txt", description=f"a resource described with the key {KEY}")
def told_resource() -> str:
    """A resource whose listing carries the key."""
    return "fine"


if __name__ == "__main__":
    serve(app)
