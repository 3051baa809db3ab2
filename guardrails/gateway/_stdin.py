"""Lines from standard input, read without a worker thread, so that a stop is not held up.

The MCP SDK reads stdin in a worker thread, which a cancellation cannot
interrupt: on SIGTERM the gateway would wait for the client's next line. On
POSIX, when stdin is a pipe, a socket or a terminal of its own (not the
same file as stdout), this reader waits for the descriptor to be readable
instead, and a cancellation ends it at once.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

__all__ = ["stdin_lines"]

_CHUNK = 65536


class _Lines:
    """An async iterator of text lines (``\\n`` kept) from a non-blocking descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self.buffer:
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                if not self.buffer:
                    raise StopAsyncIteration
                line, self.buffer = self.buffer, b""
                return line.decode("utf-8", "replace")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace") + "\n"


@contextmanager
def stdin_lines(fd: int = 0) -> Iterator[_Lines | None]:
    """A cancellable reader of ``fd``, or ``None`` where one cannot be made (use the SDK's)."""
    try:
        status = os.fstat(fd)
        out = os.fstat(1)
    except OSError:
        yield None
        return
    mode = status.st_mode
    # O_NONBLOCK belongs to the open file: when stdout is the same file (a
    # terminal, one socket for both), the SDK's blocking writes would fail.
    shared = (status.st_dev, status.st_ino) == (out.st_dev, out.st_ino)
    readable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)
    if os.name != "posix" or shared or not readable:
        yield None
        return
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        yield _Lines(fd)
    finally:
        os.set_blocking(fd, blocking)
