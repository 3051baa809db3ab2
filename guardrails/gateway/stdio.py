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

import contextvars
import re
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio

__all__ = ["TOO_LARGE", "Launch", "bounded", "release", "stdio_transport"]

TOO_LARGE = -32099
"""The code of the error a request is answered with when its answer was too long."""

_CHUNK = 65536
_ID_WINDOW = 4096  # the id of an oversized answer is looked for in its first bytes
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
_STDERR_LINE = 4096
_EXIT_POLL = 0.02
_EXIT_GRACE = 2.0  # longer stderr lines are cut (the rest is not read into one string)

# The bound of the answer to the request being sent from this task (None: the transport's).
_BOUND: contextvars.ContextVar[int | None] = contextvars.ContextVar("bound", default=None)


def bounded(limit: int | None) -> contextvars.Token[int | None]:
    """Requests sent from this context accept answers of at most ``limit`` bytes."""
    return _BOUND.set(limit)


def release(token: contextvars.Token[int | None]) -> None:
    """Undo ``bounded``."""
    _BOUND.reset(token)


class Launch:
    """What to start: argv, environment, working directory."""

    __slots__ = ("argv", "cwd", "env")

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str | None) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd


class _Bounds:
    """Per-request bounds, noted when a request is sent, read when its answer arrives."""

    def __init__(self, default: int) -> None:
        self.default = default
        self.by_id: dict[Any, int] = {}

    def note(self, message: Any) -> None:
        limit = _BOUND.get()
        message = getattr(message, "root", message)
        rid = getattr(message, "id", None)
        if limit is None or rid is None or not hasattr(message, "method"):
            return
        if len(self.by_id) < 10_000:
            self.by_id[rid] = min(limit, self.default)

    def of(self, rid: Any) -> int:
        return self.by_id.pop(rid, self.default)


class _Writer:
    """The session's write stream: notes each request's bound in the sender's context."""

    def __init__(self, inner: Any, bounds: _Bounds) -> None:
        self.inner = inner
        self.bounds = bounds

    async def send(self, item: Any) -> None:
        self.bounds.note(item.message)
        await self.inner.send(item)

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _Writer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _too_large(rid: Any) -> Any:
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError

    error = ErrorData(code=TOO_LARGE, message="answer too large")
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=rid, error=error))


def _message_id(head: bytes) -> Any:
    found = _ID.search(head[:_ID_WINDOW])
    if found is None:
        return None
    import json

    try:
        return json.loads(found.group(1))
    except ValueError:
        return None


def _parsed(line: bytes, bounds: _Bounds) -> Any:
    """A ``SessionMessage`` (or the parse error, as the SDK's reader gives it)."""
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    rid = getattr(message, "id", None)
    if rid is not None and not hasattr(message, "method") and len(line) > bounds.of(rid):
        return _too_large(rid)
    return SessionMessage(message)


async def _lines(stream: Any, bounds: _Bounds, send: Callable[[Any], Any]) -> None:
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
                    await send(_too_large(rid))
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
    bounds = _Bounds(max_bytes)
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](0)

    gone = anyio.Event()

    async def reader() -> None:
        assert process.stdout is not None
        async with to_session:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await _lines(process.stdout, bounds, to_session.send)
            # The end of its output is usually its exit: say so before the session
            # sees the end (a start that fails is then reported with its status).
            with anyio.move_on_after(_EXIT_GRACE):
                await gone.wait()

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for item in from_session:
                    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()

    async def errors() -> None:
        assert process.stderr is not None
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await _stderr_lines(process.stderr, on_stderr)

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
            yield read_stream, _Writer(write_stream, bounds)
        finally:
            watching.cancel()  # a stop the gateway asked for is not an exit to report
            with anyio.CancelScope(shield=True):
                write_stream.close()
                read_stream.close()
                await _stop_server_process(process)
            tg.cancel_scope.cancel()
