"""The cancellable stdin reader: lines as the SDK reads them, and when it steps aside."""

from __future__ import annotations

import os
import socket

import anyio

from guardrails.gateway._stdin import stdin_lines


async def test_lines_from_a_pipe_and_the_last_line_without_newline() -> None:
    read, write = os.pipe()
    os.write(write, b'{"a": 1}\n{"b": "\xc3\xa9"}\npartial')
    os.close(write)
    try:
        with stdin_lines(read) as lines:
            assert lines is not None
            got = [line async for line in lines]
    finally:
        os.close(read)
    assert got == ['{"a": 1}\n', '{"b": "é"}\n', "partial"]


async def test_a_read_waiting_for_input_is_cancelled_at_once() -> None:
    read, write = os.pipe()
    try:
        with stdin_lines(read) as lines, anyio.move_on_after(0.1) as scope:
            assert lines is not None
            await lines.__anext__()
        assert scope.cancelled_caught
        assert os.get_blocking(read)  # restored
    finally:
        os.close(read)
        os.close(write)


def test_a_regular_file_or_a_shared_socket_is_left_to_the_sdk(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "input")
    with open(path, "w") as out:
        out.write("x\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        with stdin_lines(fd) as lines:
            assert lines is None
    finally:
        os.close(fd)
    left, right = socket.socketpair()
    saved = os.dup(1)
    try:
        os.dup2(left.fileno(), 1)  # stdout is the same socket as the input
        with stdin_lines(left.fileno()) as lines:
            assert lines is None
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        left.close()
        right.close()
