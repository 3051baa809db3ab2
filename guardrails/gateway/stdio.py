"""A stdio upstream's transport: its process, its messages (bounded), its stderr, its exit.

The MCP SDK's stdio client reads a message of any length whole, lets the
child inherit the gateway's stderr, and says nothing when an idle child
exits. This transport, built from the same parts:

- reads at most ``max_bytes`` of one message; a longer one is discarded as it
  arrives (never held whole) and its request answered with ``TOO_LARGE``, so
  the call ends at once with an error rather than at its timeout. A request
  may carry a lower bound of its own (``bounded``: the calling tenant's);
- hands each line the child writes on stderr to ``on_stderr`` (the gateway
  redacts and logs it), never to the gateway's own stderr;
- calls ``on_exit(status)`` as soon as the child exits, busy or idle.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio

from .bounds import BoundedWriter, Bounds, too_large

__all__ = ["Launch", "stdio_transport"]

_CHUNK = 65536
_ID_WINDOW = 4096  # the id of an oversized answer is looked for in its first bytes
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
_STDERR_LINE = 4096
_EXIT_POLL = 0.02
_EXIT_GRACE = 2.0  # longer stderr lines are cut (the rest is not read into one string)


class Launch:
    """What to start: argv, environment, working directory."""

    __slots__ = ("argv", "cwd", "env")

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str | None) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd


def _message_id(head: bytes) -> Any:
    found = _ID.search(head[:_ID_WINDOW])
    if found is None:
        return None
    import json

    try:
        return json.loads(found.group(1))
    except ValueError:
        return None


def _parsed(line: bytes, bounds: Bounds) -> Any:
    """A ``SessionMessage`` (or the parse error, as the SDK's reader gives it)."""
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    rid = getattr(message, "id", None)
    if rid is not None and not hasattr(message, "method") and len(line) > bounds.of(rid):
        return too_large(rid)
    return SessionMessage(message)


async def _lines(stream: Any, bounds: Bounds, send: Callable[[Any], Any]) -> None:
    """Messages from ``stream``, each at most ``bounds.default`` bytes held."""
    buffer = bytearray()
    head: bytes | None = None  # set while an oversized line is being skipped
    async for chunk in stream:
        while chunk:
            end = chunk.find(b"\n")
            part, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
            if head is None:
                buffer += part
                if len(buffer) > bounds.default:
                    head, buffer = bytes(buffer[:_ID_WINDOW]), bytearray()
            if end < 0:
                break
            if head is not None:
                rid = _message_id(head)
                head = None
                if rid is not None:
                    bounds.of(rid)
                    await send(too_large(rid))
                continue
            line, buffer = bytes(buffer), bytearray()
            if line.strip():
                await send(_parsed(line, bounds))


async def _stderr_lines(stream: Any, on_line: Callable[[str], None]) -> None:
    buffer = bytearray()
    skipping = False
    async for chunk in stream:
        while chunk:
            end = chunk.find(b"\n")
            part, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
            if not skipping:
                buffer += part
                if len(buffer) > _STDERR_LINE:
                    on_line(bytes(buffer[:_STDERR_LINE]).decode("utf-8", "replace") + " [cut]")
                    buffer, skipping = bytearray(), True
            if end < 0:
                break
            if not skipping and buffer.strip():
                on_line(bytes(buffer).decode("utf-8", "replace").rstrip("\r"))
            buffer, skipping = bytearray(), False
    if buffer.strip() and not skipping:
        on_line(bytes(buffer).decode("utf-8", "replace"))


async def _read(process: Any, bounds: Bounds, to_session: Any, gone: anyio.Event) -> None:
    """The child's stdout, line by line, to the session; its end waits for the exit."""
    assert process.stdout is not None
    async with to_session:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await _lines(process.stdout, bounds, to_session.send)
        # The end of its output is usually its exit: say so before the session
        # sees the end (a start that fails is then reported with its status).
        with anyio.move_on_after(_EXIT_GRACE):
            await gone.wait()


async def _write(process: Any, from_session: Any, to_session: Any) -> None:
    """The session's messages to the child's stdin, one JSON line each."""
    assert process.stdin is not None
    try:
        async with from_session:
            async for item in from_session:
                text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send((text + "\n").encode("utf-8"))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await to_session.aclose()


async def _errors(process: Any, on_stderr: Callable[[str], None]) -> None:
    assert process.stderr is not None
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await _stderr_lines(process.stderr, on_stderr)


@asynccontextmanager
async def stdio_transport(
    launch: Launch,
    *,
    max_bytes: int,
    on_stderr: Callable[[str], None],
    on_exit: Callable[[int | None], None],
) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams of a started child; stopped as the SDK stops its own."""
    from mcp.client.stdio import _stop_server_process

    process = await anyio.open_process(
        launch.argv,
        env=launch.env,
        cwd=launch.cwd,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    bounds = Bounds(max_bytes)
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](0)

    gone = anyio.Event()

    async def reader() -> None:
        await _read(process, bounds, to_session, gone)

    async def writer() -> None:
        await _write(process, from_session, to_session)

    async def errors() -> None:
        await _errors(process, on_stderr)

    watching = anyio.CancelScope()

    async def exited() -> None:
        # Polled, not process.wait(): that also waits for the pipes to close,
        # which a grandchild holding them would put off.
        with watching:
            while process.returncode is None:
                await anyio.sleep(_EXIT_POLL)
            on_exit(process.returncode)
            gone.set()

    async with anyio.create_task_group() as tg:
        for task in (reader, writer, errors, exited):
            tg.start_soon(task)
        try:
            yield read_stream, BoundedWriter(write_stream, bounds)
        finally:
            watching.cancel()  # a stop the gateway asked for is not an exit to report
            with anyio.CancelScope(shield=True):
                write_stream.close()
                read_stream.close()
                await _stop_server_process(process)
                if process.stderr is not None:  # ours: the SDK's stop leaves it open
                    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await process.stderr.aclose()
            tg.cancel_scope.cancel()
