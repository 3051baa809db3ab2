"""Idempotency: a deterministic key per effect; a replay returns the first result.

A tool opts in with ``options={"idempotency_key": ...}``:

- a format string over the arguments: ``"publish-{brief_id}"``;
- a tuple of argument names: ``("brief_id", "channel")``;
- a function of the arguments returning a string;
- ``True``: every argument the tool receives.

The key is scoped by tenant and tool: the stored key is the JSON array
``[tenant, tool, key]``, so no two (tenant, tool, key) triples share one, and
tenant ``None`` differs from tenant ``""``. The first call claims it in the store
(atomically), runs, and stores its result; a replay returns that result with
reason ``replayed`` without running the tool; a concurrent replay waits for
the first to finish. A failed call releases the key. Keys expire after
``ttl`` seconds; a claim whose owner died is taken over after ``lease``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from .._call_state import CallState, enter, leave
from ..context import Escape, Invocation, ToolResult
from ..errors import ConfigurationError
from ..middleware.tool_call import Stop
from ..store import Claim, Store
from ..store.steps import Steps, aperform, arun, call, perform
from ..verdicts import ChokePoint, EscapeReason, Outcome, Reason

__all__ = ["Idempotency", "idempotency_key"]

log = logging.getLogger("guardrails")

OPTION = "idempotency_key"


def idempotency_key(invocation: Invocation) -> str | None:
    """The key a tool's ``idempotency_key`` option gives for this call, or None."""
    tool = invocation.tool
    spec = None if tool is None else tool.options.get(OPTION)
    if spec is None or spec is False:
        return None
    args = invocation.arguments
    if spec is True:
        key = _digest(args)
    elif isinstance(spec, str):
        key = spec.format_map(args)
    elif isinstance(spec, tuple | list):
        key = _digest({name: args.get(name) for name in spec})
    elif callable(spec):
        key = str(spec(args))
    else:
        raise ConfigurationError(f"tool {invocation.name!r}: bad idempotency_key {spec!r}")
    return scoped_key(invocation.context.tenant, invocation.name, key)


# The encoders ``json.dumps`` would build on every call with these options, built once.
_compact = json.JSONEncoder(separators=(",", ":")).encode
_canonical = json.JSONEncoder(sort_keys=True, default=str, separators=(",", ":")).encode


def scoped_key(tenant: str | None, tool: str, key: str) -> str:
    """The stored key of ``key`` for ``tenant`` and ``tool``: one JSON array, unambiguous."""
    return _compact([tenant, tool, key])


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()[:32]


class Idempotency:
    """A CallHook that runs each idempotent effect once per key."""

    __slots__ = ("clock", "lease", "name", "poll", "sleep", "store", "ttl", "wait")

    def __init__(
        self,
        store: Store,
        *,
        ttl: float = 86_400.0,
        lease: float = 300.0,
        wait: float = 30.0,
        poll: float = 0.02,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        name: str = "idempotency",
    ) -> None:
        if not (ttl > 0 and lease > 0 and wait >= 0 and poll > 0):
            raise ConfigurationError(f"{name}: ttl, lease and poll must be positive, wait >= 0")
        self.store = store
        self.ttl = ttl
        self.lease = lease
        self.wait = wait
        self.poll = poll
        self.clock = clock
        self.sleep = sleep
        self.name = name

    def before(self, invocation: Invocation, /) -> Stop | None:
        entered = self._enter(invocation)
        if entered is None or type(entered) is Stop:
            return entered
        key, owner, state = entered  # type: ignore[misc]
        deadline = time.monotonic() + self.wait
        try:
            while True:
                now = self.clock()
                claim = self.store.claim(key, owner, now, now + self.lease)
                decision = self._decide(claim, key, owner, state, deadline)
                if decision is not _AGAIN:
                    return decision  # type: ignore[return-value]
                self.sleep(self.poll)
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            return _unknown(exc)

    async def abefore(self, invocation: Invocation, /) -> Stop | None:
        """``before`` for ``acall``: the key is claimed without blocking the loop, and waited for on it."""
        entered = self._enter(invocation)
        if entered is None or type(entered) is Stop:
            return entered
        key, owner, state = entered  # type: ignore[misc]
        deadline = time.monotonic() + self.wait
        try:
            while True:
                now = self.clock()
                claim = await arun(self.store, "claim", key, owner, now, now + self.lease)
                decision = self._decide(claim, key, owner, state, deadline)
                if decision is not _AGAIN:
                    return decision  # type: ignore[return-value]
                await asyncio.sleep(self.poll)
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            return _unknown(exc)

    def _enter(self, invocation: Invocation) -> Stop | tuple[str, str, CallState] | None:
        try:
            key = idempotency_key(invocation)
        except (KeyError, IndexError, ValueError) as exc:
            return Stop(Outcome.ERROR, Reason.RAISED, None, exc)
        if key is None:
            return None
        return key, os.urandom(16).hex(), enter(invocation, self)

    def _decide(
        self, claim: Claim, key: str, owner: str, state: CallState, deadline: float
    ) -> Stop | object | None:
        if claim.state == "new":
            state.private[self.name] = (key, owner)
            state.detail["idempotency_key"] = key
            return None
        if claim.state == "done":
            state.detail["idempotency_key"] = key
            return Stop(Outcome.OK, Reason.REPLAYED, _decode(claim.result))
        if time.monotonic() >= deadline:
            return Stop(Outcome.UNAVAILABLE, Reason.IN_PROGRESS)
        return _AGAIN

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        claimed = leave(invocation, self).private.pop(self.name, None)
        if claimed is None:
            return result
        try:
            perform(self.store, self._settle(claimed, result))
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            return self._unsettled(claimed[0], result, exc)
        return result

    async def aafter(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        """``after`` for ``acall``: the key is settled without blocking the loop."""
        claimed = leave(invocation, self).private.pop(self.name, None)
        if claimed is None:
            return result
        try:
            await aperform(self.store, self._settle(claimed, result))
        except Exception as exc:  # StoreUnavailable, or a store's own driver error
            return self._unsettled(claimed[0], result, exc)
        return result

    def _settle(self, claimed: tuple[str, str], result: ToolResult) -> Steps[None]:
        key, owner = claimed
        if result.outcome is Outcome.OK:
            yield call("complete", key, owner, _encode(result), self.clock() + self.ttl)
        else:
            yield call("release", key, owner)

    def _unsettled(self, key: str, result: ToolResult, exc: Exception) -> ToolResult:
        log.warning("idempotency key %s not settled", key)
        missed = Escape(self.name, ChokePoint.TOOL_CALL, EscapeReason.STORE_UNAVAILABLE, exc)
        return result._replace(escapes=(*result.escapes, missed))


_AGAIN = object()


def _unknown(exc: Exception) -> Stop:
    # Without the key we cannot know whether the effect already ran.
    return Stop(Outcome.UNAVAILABLE, Reason.STORE_UNAVAILABLE, None, exc)


def _encode(result: ToolResult) -> str:
    try:
        return json.dumps({"value": result.value})
    except (TypeError, ValueError):
        return json.dumps({"content": result.content})


def _decode(text: str | None) -> Any:
    stored = json.loads(text) if text else {}
    return stored["value"] if "value" in stored else stored.get("content")
