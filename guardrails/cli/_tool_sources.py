"""Where the command line finds the tools a policy is checked against.

``load_tools(source)`` reads one of three sources, decided by its spelling:

- ``mcp:COMMAND ARGS...``: starts an MCP server over stdio, lists its tools
  (every page) and stops it, all within ``timeout`` seconds;
- a path to an existing file (or one ending ``.json``): a JSON tools list in
  the Anthropic, OpenAI (chat or Responses) or MCP shape, or an MCP
  ``tools/list`` result (``{"tools": [...]}``), shape decided per entry;
- anything else: ``MODULE[:NAME]``, imported (a ``Guardrails`` engine, a
  mapping or list of tools; without ``NAME`` the module's only engine or every
  ``Tool`` it defines).

Tools read from a definition have no implementation: calling one raises.
Each counts as having an effect unless its MCP annotations say
``readOnlyHint: true`` (MCP's own reading of a tool without annotations).
Every mistake is a ``ConfigurationError`` of one line.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

from ..engine import Guardrails
from ..errors import ConfigurationError
from ..policy.policy import _tool_map
from ..tools import Tool

__all__ = ["MAX_MCP_PAGES", "MCP_PREFIX", "definition_shape", "load_tools", "tools_from_json"]

MCP_PREFIX = "mcp:"
# A server that keeps answering with a next cursor is stopped after this many pages.
MAX_MCP_PAGES = 100
# Arguments of ``Tool.from_definition`` per shape: the key holding the input schema.
_NO_MCP = "mcp: install the 'mcp' extra (pip install guardrails-kit[mcp])"
_SCHEMA_KEYS = {"anthropic": "input_schema", "openai": "parameters", "mcp": "inputSchema"}


def load_tools(source: str, *, timeout: float = 30.0) -> dict[str, Tool]:
    """The tools named by ``source`` (see the module text), by name."""
    if source.startswith(MCP_PREFIX):
        return _from_mcp(source[len(MCP_PREFIX) :], timeout)
    if source.endswith(".py"):
        raise ConfigurationError(
            f"{source}: name a Python module as MODULE[:NAME] (importable), not as a file"
        )
    if source.endswith(".json") or os.path.isfile(source):
        return tools_from_json(source)
    return _from_module(source)


def tools_from_json(path: str) -> dict[str, Tool]:
    """The tools of a JSON file holding a tools list (or a ``tools/list`` result)."""
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigurationError(f"{path}: not JSON ({_first_line(exc)})") from None
    if isinstance(data, Mapping) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise ConfigurationError(
            f"{path}: expected a list of tool definitions or an object with a 'tools' list"
        )
    return _build(path, data)


def definition_shape(entry: Any) -> str:
    """``anthropic``, ``openai`` or ``mcp`` for a tool definition; ``ConfigurationError`` else."""
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"not an object but {type(entry).__name__}")
    if entry.get("type") == "function":
        inner = entry.get("function")
        fields = inner if isinstance(inner, Mapping) else entry
        if isinstance(fields.get("name"), str) and "input_schema" not in fields:
            return "openai"
    elif isinstance(entry.get("name"), str):
        found = [shape for shape, key in _SCHEMA_KEYS.items() if key in entry]
        if len(found) == 1:
            return found[0]
    raise ConfigurationError(
        "not a tool definition: expected 'name' with 'input_schema' (Anthropic), "
        "'inputSchema' (MCP) or 'parameters' (OpenAI), or 'type': 'function' with "
        f"'function' (OpenAI); keys found: {sorted(map(str, entry))[:10]}"
    )


def _build(origin: str, entries: list[Any]) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    for index, entry in enumerate(entries):
        where = f"{origin}: tool [{index}]"
        try:
            definition_shape(entry)
            tool = Tool.from_definition(entry, _no_implementation(where), effect=_effect(entry))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: {_first_line(exc)}") from None
        if tool.name in tools:
            raise ConfigurationError(f"{where}: a second tool named {tool.name!r}")
        tools[tool.name] = tool
    return tools


def _effect(entry: Mapping[str, Any]) -> bool:
    """False only when the definition's MCP annotations say the tool only reads."""
    annotations = entry.get("annotations")
    return not (isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True)


def _no_implementation(where: str) -> Any:
    def refuse(**_: Any) -> Any:
        raise ConfigurationError(f"{where} was read from a definition; it has no implementation")

    return refuse


def _from_module(spec: str) -> dict[str, Any]:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {type(exc).__name__}") from None
    if attr:
        if not hasattr(module, attr):
            raise ConfigurationError(f"module {module_name!r} has no {attr!r}")
        return _tool_map(getattr(module, attr))
    engines = [v for v in vars(module).values() if isinstance(v, Guardrails)]
    if len(engines) == 1:
        return dict(engines[0].tools)
    found = {v.name: v for v in vars(module).values() if isinstance(v, Tool)}
    if not found:
        raise ConfigurationError(f"module {module_name!r} defines no tools; name them MODULE:NAME")
    return found


def _from_mcp(command_line: str, timeout: float) -> dict[str, Tool]:
    try:
        argv = shlex.split(command_line)
    except ValueError as exc:
        raise ConfigurationError(f"mcp: cannot split the command ({exc})") from None
    if not argv:
        raise ConfigurationError("mcp: no command given (write mcp:COMMAND ARGS...)")
    try:
        import anyio
    except ImportError:  # pragma: no cover - anyio comes with mcp
        raise ConfigurationError(_NO_MCP) from None
    try:
        entries = anyio.run(_list_mcp_tools, argv, timeout)
    except ConfigurationError:
        raise
    except ImportError:
        raise ConfigurationError(_NO_MCP) from None
    except TimeoutError:
        raise ConfigurationError(
            f"mcp: {argv[0]!r} did not list its tools within {timeout:g} seconds"
        ) from None
    except Exception as exc:
        raise ConfigurationError(f"mcp: {argv[0]!r} failed: {_describe(exc)}") from None
    return _build(f"mcp:{argv[0]}", entries)


async def _list_mcp_tools(argv: list[str], timeout: float) -> list[Any]:
    import anyio
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(command=argv[0], args=argv[1:])
    entries: list[Any] = []
    with anyio.fail_after(timeout):
        async with Client(server, read_timeout_seconds=timeout) as client:
            cursor: str | None = None
            for _ in range(MAX_MCP_PAGES):
                page = await client.list_tools(cursor=cursor)
                entries.extend(t.model_dump(by_alias=True, exclude_none=True) for t in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    return entries
    raise ConfigurationError(f"mcp: {argv[0]!r} answered more than {MAX_MCP_PAGES} pages of tools")


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = _first_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else ""
