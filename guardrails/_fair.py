"""Fair turns on the event loop: guarded async calls start a slice at a time.

A thousand ``acall``s released together are all ready in one iteration of the
event loop, and each runs tens of microseconds of Python before it first
waits: together they would hold the loop for tens of milliseconds, and every
other task of the application (a health check, a heartbeat, a stream) would
wait that long. The rule, per event loop:

- a call starts at once while the loop's current slice has room: less than
  ``slice`` seconds have passed since the slice opened. A slice opens at a
  call that finds the loop away from guarded calls for longer than a slice
  (an uncontended call never waits);
- past the slice, calls wait in FIFO order (a newcomer never passes a caller
  already waiting). Each later iteration of the loop lets a bounded number of
  them in (``MAX_BURST`` at most, at least one, so none starves), scaled so
  that the loop's iterations stay within the slice: the number shrinks when an
  iteration took longer than the slice and grows (at most doubling) when it
  took less;
- entering holds nothing, so nothing is released: an exception or a
  cancellation inside a call cannot leak a place. A caller cancelled while
  it waits is skipped, and its turn goes to no one in particular.

The work is CPU either way: the gate changes when it runs, not how much of it
there is. One gate per event loop (``asyncio.run`` called again gets a new
one); several engines on one loop share it, each call with its own slice.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from collections.abc import Callable
from time import perf_counter

__all__ = ["DEFAULT_SLICE", "MAX_BURST", "Gate", "enter", "gate", "next_burst"]

DEFAULT_SLICE = 0.0005
"""Seconds of the loop's time that guarded calls may start in before later ones wait."""

MAX_BURST = 64
"""The most waiting calls let in by one iteration of the loop."""

_INF = float("inf")


class Gate:
    """The admission state of one event loop. Used only from that loop's thread."""

    __slots__ = (
        "burst",
        "clock",
        "entered",
        "last",
        "opened",
        "slice",
        "ticked",
        "ticking",
        "waiting",
    )

    def __init__(self, clock: Callable[[], float] = perf_counter) -> None:
        self.clock = clock
        self.opened = -_INF  # when the current slice opened
        self.last = -_INF  # when the last call entered at once
        self.entered = 0  # calls that entered at once in the current slice
        self.slice = DEFAULT_SLICE  # the slice of the latest caller that waited
        self.burst = 1  # how many waiting calls the next iteration lets in
        self.ticking = False  # a tick is due in the next iteration
        self.ticked: float | None = None  # when the last tick of this series ran
        self.waiting: deque[asyncio.Future[None]] = deque()

    def enter(self, slice: float, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None] | None:
        """None: the call starts now. Else its place in the FIFO, a future to await.

        ``admit``, else ``queue``, in one call (a burst of calls queues a thousand
        at once, in one iteration of the loop: each step there counts).
        """
        return None if self.admit(slice) else self.queue(slice, loop)

    def admit(self, slice: float) -> bool:
        """True: the call starts now. False: it must wait for its turn (``queue``)."""
        if self.waiting:
            return False
        now = self.clock()
        if now - self.last > slice:  # the loop was elsewhere for a slice or more
            self.opened = now
            self.entered = 0
        self.last = now
        if now - self.opened < slice:
            self.entered += 1
            return True
        return False

    def queue(self, slice: float, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """This caller's place in the FIFO: a future to await, done at its turn."""
        future: asyncio.Future[None] = _Future(loop=loop)
        self.waiting.append(future)
        self.slice = slice
        if not self.ticking:
            # The calls that fitted in the slice just filled are the first estimate.
            self.burst = max(1, min(self.entered, MAX_BURST))
            self.ticking = True
            self.ticked = None
            loop.call_soon(self._tick, loop)
        return future

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        """One iteration of the loop: let the next callers in, and come back next iteration."""
        now = self.clock()
        if self.ticked is not None:  # the last iteration ran the callers let in last time
            self.burst = next_burst(self.burst, now - self.ticked, self.slice)
        released = 0
        waiting = self.waiting
        while waiting and released < self.burst:
            future = waiting.popleft()
            if not future.done():  # a caller cancelled while it waited is skipped
                future.set_result(None)
                released += 1
        # The callers let in run in the next iteration, in a slice of their own.
        self.opened = self.last = now
        self.entered = released
        self.ticked = now
        if waiting:
            loop.call_soon(self._tick, loop)
        else:
            self.ticking = False


def next_burst(burst: int, elapsed: float, slice: float) -> int:
    """How many callers the next iteration lets in, after one that took ``elapsed`` s (pure)."""
    most = min(burst * 2, MAX_BURST)
    if elapsed * most <= burst * slice:  # (no division: elapsed may be 0 or tiny)
        return most
    return max(1, int(burst * slice / elapsed))


_lock = threading.Lock()
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Gate] = weakref.WeakKeyDictionary()
# The last loop asked for and its gate, read as one tuple (so threads cannot mix them):
# the lookup of every call, a few tens of nanoseconds.
_last: tuple[object, Gate] = (None, Gate())
_running_loop = asyncio.get_running_loop
_Future = asyncio.Future  # the C future: ``loop.create_future()`` without its Python frame


def gate() -> Gate:
    """The gate of the running event loop (made on first use)."""
    loop = _running_loop()
    last = _last
    return last[1] if last[0] is loop else _find(loop)


def _find(loop: asyncio.AbstractEventLoop) -> Gate:
    global _last
    with _lock:
        try:
            found = _gates.get(loop)
            if found is None:
                found = _gates[loop] = Gate()
        except TypeError:  # a loop that cannot be weakly referenced: one gate per run
            found = Gate()
        _last = (loop, found)
    return found


def enter(slice: float) -> asyncio.Future[None] | None:
    """``gate().enter(slice)``: None when the call may start now, else the future to await."""
    loop = _running_loop()
    last = _last
    return (last[1] if last[0] is loop else _find(loop)).enter(slice, loop)
