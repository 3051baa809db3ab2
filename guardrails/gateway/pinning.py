"""The gateway's review of its upstreams' listings against the pins in the store.

``Pinning.withheld(store, upstreams)`` reviews every listed tool (off the event
loop) and returns the ``(upstream, tool)`` pairs not to publish. Each change
is logged and counted once per definition seen by this process, not at every
review: a first pin at INFO, a change withheld or replaced at WARNING.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..store import Store, offloop
from .metrics import PinCounters
from .pins import Review, definition_of, fingerprint, review

__all__ = ["Pinning"]

log = logging.getLogger("guardrails.gateway")

Listing = tuple[str, str, list[tuple[str, dict[str, Any]]]]


class Pinning:
    """Reviews listings; remembers which changes it has told about already."""

    def __init__(self, counters: PinCounters) -> None:
        self.counters = counters
        self._told: dict[tuple[str, str], str] = {}

    async def withheld(self, store: Store, upstreams: Iterable[Any]) -> frozenset[tuple[str, str]]:
        listings: list[Listing] = [
            (u.name, u.config.pin, [(t.name, definition_of(t)) for t in u.tools]) for u in upstreams
        ]
        found = await offloop.run(store, _review_all, store, listings)
        held: set[tuple[str, str]] = set()
        for (upstream, tool, digest), outcome in found:
            self._tell(upstream, tool, digest, outcome)
            if outcome == "withheld":
                held.add((upstream, tool))
        self.counters.set_withheld(Counter(upstream for upstream, _ in held))
        return frozenset(held)

    def _tell(self, upstream: str, tool: str, digest: str, outcome: Review) -> None:
        if outcome == "same" or self._told.get((upstream, tool)) == digest:
            self._told[upstream, tool] = digest
            return
        self._told[upstream, tool] = digest
        short = digest[:12]
        if outcome == "pinned":
            log.info("upstream %r: tool %r pinned (%s)", upstream, tool, short)
            return
        self.counters.changed(upstream, outcome)
        if outcome == "updated":
            log.warning(
                "upstream %r: tool %r changed (%s); published as its new pin (pin = auto)",
                upstream,
                tool,
                short,
            )
        else:
            log.warning(
                "upstream %r: tool %r changed (%s); withheld until approved "
                "(guardrails gateway pins approve)",
                upstream,
                tool,
                short,
            )


def _review_all(store: Store, listings: list[Listing]) -> list[tuple[tuple[str, str, str], Review]]:
    return [
        ((upstream, tool, fingerprint(definition)), review(store, upstream, tool, definition, mode))
        for upstream, mode, tools in listings
        for tool, definition in tools
    ]
