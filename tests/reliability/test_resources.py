"""Resources a call leaves behind when it runs in a short-lived thread.

Servers often run each request in a thread of its own. An async guard or tool
reached through the sync entry point runs on a private event loop of that
thread; when the thread ends, nothing may be left open (file descriptors of
the loop's selector) and no ``ResourceWarning`` may be raised.
"""

from __future__ import annotations

import gc
import os
import threading
import warnings
from typing import Any

from guardrails import Guardrails, Outcome, Tool, Verdict, guard

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


async def lookup(q: str) -> str:
    return "found"


@guard
async def async_check(_: Any) -> Verdict:
    return Verdict.PASS


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_async_tool_in_short_lived_threads_leaves_nothing_open(ledger: Any) -> None:
    rails = Guardrails([Tool("lookup", lookup, SCHEMA)], [async_check])
    outcomes: list[Outcome] = []

    def request() -> None:
        outcomes.append(rails.call("lookup", {"q": "x"}).outcome)

    request()  # the first call in this thread sets up what stays for the thread
    gc.collect()
    before = open_fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(50):
            thread = threading.Thread(target=request)
            thread.start()
            thread.join()
        del thread
        gc.collect()
    after = open_fds()

    ledger.add("resources", inputs=len(outcomes), fds_left_open=after - before)
    assert outcomes == [Outcome.OK] * 51
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert after <= before
