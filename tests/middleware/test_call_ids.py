"""Generated call ids: the documented form, unique across threads, blocks and forks."""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
import threading
from itertools import islice

import pytest

from guardrails import Guardrails, tool
from guardrails.middleware._call_ids import ids, new_call_id

_FORM = re.compile(r"gr_[0-9a-f]{8}[0-9a-f]+[0-9a-f]{3}")


@tool
def echo(q: str) -> str:
    """Echo."""
    return q


def test_generated_ids_have_the_documented_form_and_go_through_the_pipeline() -> None:
    rails = Guardrails([echo])
    first = rails.call("echo", {"q": "x"}).call_id
    second = rails.call("echo", {"q": "x"}, call_id="").call_id
    assert _FORM.fullmatch(first) and _FORM.fullmatch(second)
    assert first != second
    assert _FORM.fullmatch(new_call_id())


def test_ids_stay_unique_across_block_boundaries() -> None:
    # Three blocks of 4,096 and a bit: the block number grows, the suffix wraps.
    stream = ids()
    taken = list(islice(stream, 3 * 4096 + 10))
    assert len(set(taken)) == len(taken)
    assert all(_FORM.fullmatch(i) for i in taken)
    assert taken[0][:11] == taken[-1][:11]  # one process, one prefix
    assert taken[4095][-3:] == "fff" and taken[4096][-3:] == "000"


def test_two_streams_have_different_prefixes() -> None:
    assert next(ids())[:11] != next(ids())[:11]


def test_threads_taking_ids_at_once_never_share_one() -> None:
    per_thread = 20_000
    results: list[list[str]] = []
    start = threading.Barrier(4)

    def take() -> None:
        start.wait()
        results.append([new_call_id() for _ in range(per_thread)])

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for r in results for i in r]
    assert len(every) == 4 * per_thread == len(set(every))


def _child_ids(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put([new_call_id() for _ in range(3)])


@pytest.mark.skipif(
    sys.platform == "win32" or not hasattr(os, "register_at_fork"), reason="needs fork"
)
def test_a_forked_child_draws_a_new_prefix() -> None:
    new_call_id()  # the parent's stream has started
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_ids, args=(queue,))
    child.start()
    theirs = queue.get(timeout=60)
    child.join(60)
    ours = [new_call_id() for _ in range(3)]
    assert {i[:11] for i in theirs} != {i[:11] for i in ours}
    assert not set(theirs) & set(ours)
