"""Snapshot before mutate: an effectful tool first stores what it is about to change.

A tool opts in with ``options={"snapshot": take}`` where ``take(arguments)``
returns bytes, text or a JSON value; ``"snapshot_key"`` (a format string over
the arguments, default the tool's name) names the series. Each snapshot gets
the next version in the store, or goes to a ``save(key, data) -> version``
callback. If taking or storing it fails, the tool does not run, the outcome
is ``error`` with reason ``snapshot_failed``, and the audit row says so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .._call_state import enter, leave
from ..context import Invocation, ToolResult
from ..errors import ConfigurationError
from ..middleware.tool_call import Stop
from ..store import Store
from ..store.steps import Steps, aperform, call, perform
from ..verdicts import Outcome, Reason

__all__ = ["Snapshots"]


class Snapshots:
    """A CallHook that stores a versioned snapshot before a tool that declares one runs."""

    __slots__ = ("clock", "name", "save", "store")

    def __init__(
        self,
        store: Store | None = None,
        *,
        save: Callable[[str, bytes], int] | None = None,
        clock: Callable[[], float] = time.time,
        name: str = "snapshot",
    ) -> None:
        if (store is None) == (save is None):
            raise ConfigurationError(f"{name}: give either a store or a save callback")
        self.store = store
        self.save = save
        self.clock = clock
        self.name = name

    def before(self, invocation: Invocation, /) -> Stop | None:
        try:
            taken = self._take(invocation)
            if taken is None:
                return None
            version = perform(self.store, self._save(*taken))
        except Exception as exc:
            return Stop(Outcome.ERROR, Reason.SNAPSHOT_FAILED, None, exc)
        self._taken(invocation, taken[0], version)
        return None

    async def abefore(self, invocation: Invocation, /) -> Stop | None:
        """``before`` for ``acall``: the snapshot is saved without blocking the event loop."""
        try:
            taken = self._take(invocation)
            if taken is None:
                return None
            version = await aperform(self.store, self._save(*taken))
        except Exception as exc:
            return Stop(Outcome.ERROR, Reason.SNAPSHOT_FAILED, None, exc)
        self._taken(invocation, taken[0], version)
        return None

    def _take(self, invocation: Invocation) -> tuple[str, bytes] | None:
        tool = invocation.tool
        take = None if tool is None else tool.options.get("snapshot")
        if take is None:
            return None
        key = str(tool.options.get("snapshot_key", invocation.name)).format_map(
            invocation.arguments
        )
        return key, _as_bytes(take(invocation.arguments))

    def _save(self, key: str, data: bytes) -> Steps[int]:
        if self.save is not None:
            return self.save(key, data)
        version: int = yield call("put_snapshot", key, data, self.clock())
        return version

    def _taken(self, invocation: Invocation, key: str, version: int) -> None:
        enter(invocation, self).detail["snapshot"] = {"key": key, "version": version}

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        leave(invocation, self)
        return result


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    return json.dumps(data, sort_keys=True).encode()
