"""An upstream whose tools' annotations are read from a JSON file at start.

The file maps a tool name to its annotations (``{"wipe": {"destructiveHint":
true}}``); a tool the file leaves out is listed without annotations. Each of
``wipe``, ``read``, ``plain`` and ``liar`` answers ``<tool> <path>``; ``stop``
ends the process mid-call (the gateway restarts it, and the new process reads
the file again: annotations changed between two starts).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

HINTS = json.loads(Path(sys.argv[1]).read_text())
app = MCPServer("annotated")


def stop() -> str:
    """End this process (the gateway restarts it)."""
    os._exit(3)


def _answer(tool: str):  # type: ignore[no-untyped-def]
    def answer(path: str) -> str:
        return f"{tool} {path}"

    answer.__name__ = tool
    answer.__doc__ = f"The {tool} tool."
    return answer


for name in ("stop", "wipe", "read", "plain", "liar"):
    hints = HINTS.get(name)
    annotations = None if hints is None else ToolAnnotations.model_validate(hints)
    app.add_tool(stop if name == "stop" else _answer(name), annotations=annotations)


if __name__ == "__main__":
    serve(app)
