"""One upstream MCP server, kept connected: started, watched, restarted with backoff.

A supervisor task owns the ``mcp.Client`` (it is entered and left in that
task). Calls borrow it. A call to an upstream that is down fails at once with
``UpstreamUnavailable`` (the model sees ``unavailable``); a call whose answer
does not come (the connection broke, a crash, an answer too long) raises
``UpstreamFailed`` (``error``); a call that outlives its timeout raises
``TimeoutError`` (``error``). An error the upstream answers is its answer:
whatever its code, it fails that call only; so does an answer that does not
validate (structured content its tool's output schema refuses, a result of
the wrong shape), raised as ``UpstreamInvalid``. After a timeout or an answer
that may mean a closed connection, the supervisor checks the upstream at
once (a ``tools/list`` within the timeout); only a check that fails, or a
stdio child that exits (noticed at once, busy or idle), restarts it, and
every restart is logged with its reason. A restart first lets the calls the
upstream already accepted end (each within its own timeout): it never cuts
another caller's call short. The same check runs every ``health_interval``
seconds. Each listing is compared with the one before; a change is handed to
``on_tools_changed``. Nothing the upstream says travels in these exceptions;
what a stdio child writes on stderr is redacted and logged (``stderr.py``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from ..errors import StopRun
from .asking import Asker
from .bounds import TOO_LARGE, BoundsFull, bounded, release
from .config import UpstreamConfig
from .http_upstream import http_transport
from .metrics import GatewayCounters
from .states import StateSeal
from .stderr import StderrLog
from .stdio import Launch, stdio_transport

__all__ = [
    "Backoff",
    "Upstream",
    "UpstreamExited",
    "UpstreamFailed",
    "UpstreamInvalid",
    "UpstreamUnavailable",
    "innermost",
]

log = logging.getLogger("guardrails.gateway")

_MAX_PAGES = 100
# Rounds of input_required the gateway resolves for a client of the older protocol.
MAX_ROUNDS = 10
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.\-]+)\}")


class UpstreamUnavailable(StopRun):
    """The upstream is down (starting, or restarting after a failure)."""


class UpstreamFailed(RuntimeError):
    """The upstream's connection broke, or it answered something that is not a result."""


class UpstreamInvalid(UpstreamFailed):
    """The upstream answered a call with a result that does not validate (an answer, not a fault
    of the connection: that call fails, the upstream stays)."""


class _InvalidAnswer(Exception):
    """The SDK's output-schema check refused an answer (``_checked``)."""


class UpstreamExited(UpstreamFailed):
    """A stdio upstream's process exited before it was listed, or could not be started."""


class Backoff:
    """Delays between restarts: ``initial`` doubling up to ``maximum``, reset on success."""

    def __init__(self, initial: float = 0.25, maximum: float = 30.0) -> None:
        self.initial = initial
        self.maximum = maximum
        self.delay = initial

    def next(self) -> float:
        delay = self.delay
        self.delay = min(self.delay * 2, self.maximum)
        return delay

    def reset(self) -> None:
        self.delay = self.initial


class _Connection:
    """One connection's client and state: a failure of this connection never marks the next.

    ``broken`` holds the reason it is being left (logged at the restart);
    ``calls`` counts the calls it accepted that have not ended, ``callers``
    their clients' requests (where known: ``asking.Asker`` reads them).
    """

    __slots__ = ("broken", "callers", "calls", "client", "idle", "reason", "wake")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.broken = anyio.Event()
        self.wake = anyio.Event()
        self.idle = anyio.Event()
        self.idle.set()
        self.calls = 0
        self.callers: list[Any] = []
        self.reason = ""

    def fail(self, reason: str) -> bool:
        """Mark the connection to be left; False when it already was."""
        if self.broken.is_set():
            return False
        self.reason = reason
        self.broken.set()
        self.wake.set()
        return True


class Upstream:
    """The connection to one upstream, and the tools it listed when it first connected."""

    def __init__(
        self,
        config: UpstreamConfig,
        counters: GatewayCounters,
        *,
        backoff: Backoff | None = None,
        health_interval: float | None = None,
        secrets: Callable[[str], Any] | None = None,
        secrets_timeout: float = 5.0,
    ) -> None:
        self.config = config
        self.secrets = secrets
        self.secrets_timeout = secrets_timeout
        self.name = config.name
        self.counters = counters
        self.backoff = backoff or Backoff(config.backoff_initial, config.backoff_max)
        self.health_interval = (
            config.health_interval if health_interval is None else health_interval
        )
        self.tools: list[Any] = []
        # The listing last read (``tools`` is what is published; they differ
        # while a new listing does not fit the configuration).
        self.listed: list[Any] = []
        # Called with this upstream and its new listing when the listing changed.
        self.on_tools_changed: Callable[[Upstream, list[Any]], Awaitable[None]] | None = None
        self.stderr = StderrLog(self.name)
        # Elicitation and sampling during a call, relayed as the configuration says.
        self.asker = Asker(config, self._callers, lambda: self.stderr.secrets)
        # Binds the requestState handed to a client (the gateway sets the store's key).
        self.seal = StateSeal(os.urandom(32))
        # The longest answer read whole (the gateway sets it from the tenants' limits).
        self.max_bytes = 4 * 1024 * 1024
        self._live: _Connection | None = None
        self._exit: int | None = None

    # -- calls ----------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float,
        max_bytes: int | None = None,
        progress: Any = None,
        *,
        caller: Any = None,
        rounds: tuple[Any, Any] | None = None,
    ) -> Any:
        """The upstream's ``CallToolResult``; raises as the module docstring says.

        ``max_bytes`` bounds the answer read for this call (stdio upstreams);
        ``progress(value, total, message)`` receives the upstream's progress;
        ``caller`` is the calling client's request (``asking.py``). With
        ``rounds`` (the caller's ``inputResponses`` and ``requestState``) an
        ``InputRequiredResult`` is returned as it is, not resolved here.
        """
        live = self._live
        if live is None or live.broken.is_set():
            self.counters.failed(self.name, "unavailable")
            raise UpstreamUnavailable(f"upstream {self.name!r} is down")
        live.calls += 1
        live.idle = anyio.Event() if live.calls == 1 else live.idle
        live.callers.append(caller)
        token = bounded(max_bytes)
        try:
            return await self._call(live, tool, arguments, timeout, progress, rounds)
        finally:
            release(token)
            live.callers.remove(caller)
            live.calls -= 1
            if live.calls == 0:
                live.idle.set()

    def _callers(self) -> list[Any]:
        live = self._live
        return [] if live is None else list(live.callers)

    async def _call(
        self,
        live: _Connection,
        tool: str,
        arguments: dict[str, Any],
        timeout: float,
        progress: Any = None,
        rounds: tuple[Any, Any] | None = None,
    ) -> Any:
        from mcp.client._input_required import InputRequiredRoundsExceededError
        from mcp.client.extension import UnexpectedClaimedResult
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED
        from pydantic import ValidationError

        try:
            with anyio.fail_after(timeout):
                if rounds is None:
                    return await live.client.call_tool(tool, arguments, progress_callback=progress)
                responses, state = rounds
                return await live.client.session.call_tool(
                    tool,
                    arguments,
                    progress_callback=progress,
                    input_responses=responses,
                    request_state=state,
                    allow_input_required=True,
                )
        except (_InvalidAnswer, ValidationError, UnexpectedClaimedResult) as exc:
            # The answer arrived and is wrong: an upstream error, the connection is sound.
            kind = type(exc.__cause__ or exc).__name__
            raise UpstreamInvalid(
                f"upstream {self.name!r} answered an invalid result ({kind})"
            ) from None
        except InputRequiredRoundsExceededError:
            raise UpstreamFailed(f"upstream {self.name!r} asked for input too many times") from None
        except TimeoutError:
            self.counters.failed(self.name, "timeout")
            live.wake.set()  # the supervisor checks it now
            raise
        except MCPError as exc:
            if exc.code == TOO_LARGE:
                self.counters.failed(self.name, "too_large")
                log.warning("upstream %r: an answer longer than its bound was discarded", self.name)
                raise UpstreamFailed(f"upstream {self.name!r}: answer too large") from None
            if exc.code == CONNECTION_CLOSED:
                # The same code an upstream may answer: the supervisor finds out which.
                live.wake.set()
            raise UpstreamFailed(f"upstream {self.name!r} answered an error ({exc.code})") from exc
        except Exception as exc:
            if isinstance(innermost(exc), BoundsFull):  # refused before it was sent
                self.counters.failed(self.name, "unavailable")
                raise UpstreamUnavailable(f"upstream {self.name!r}: too many calls") from None
            self._break(live, f"its connection failed ({type(exc).__name__})")
            raise UpstreamFailed(f"upstream {self.name!r} failed ({type(exc).__name__})") from exc

    async def ask(self, method: str, *args: Any) -> Any:
        """A read request of the live client (``list_prompts``, ``get_prompt``),
        bounded by the upstream's timeout; raises ``UpstreamUnavailable`` when down.

        It is in flight with no caller to ask: while it runs, no request of the
        upstream's can be tied to a call's client (``asking.Asker``)."""
        live = self._live
        if live is None or live.broken.is_set():
            raise UpstreamUnavailable(f"upstream {self.name!r} is down")
        live.callers.append(None)
        try:
            with anyio.fail_after(self.config.timeout):
                return await getattr(live.client, method)(*args)
        finally:
            live.callers.remove(None)

    def _break(self, live: _Connection, reason: str) -> None:
        if live.fail(reason):
            self.counters.failed(self.name, "disconnected")

    # -- supervision ----------------------------------------------------------

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, list, watch; on failure wait the backoff and start again. Runs until cancelled.

        ``task_status.started()`` is called after the first successful listing;
        a stdio child that cannot be started, or exits before its first
        listing, raises ``UpstreamExited`` at once.
        """
        started = False
        while True:
            live: _Connection | None = None
            self._exit = None
            try:
                async with await self._connect() as client:
                    _checked(client.session)
                    with anyio.fail_after(self.config.connect_timeout):
                        tools = await _list_all(client)
                    if not started:
                        self.tools = self.listed = tools
                    live = self._live = _Connection(client)
                    if self._exit is not None:
                        live.fail(f"exited with status {self._exit}")
                    await self._relisted(tools)
                    self.counters.set_up(self.name, True)
                    self.backoff.reset()
                    if not started:
                        started = True
                        task_status.started()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._listen, live)
                        await self._watch(live)
                        tg.cancel_scope.cancel()
                    await self._drain(live)
                    reason = live.reason
            except Exception as exc:
                if not started and (self._exit is not None or isinstance(innermost(exc), OSError)):
                    raise self._start_failure(exc) from None
                if live is None or live.fail("failed"):
                    self.counters.failed(self.name, "disconnected")
                reason = self._failure(exc)
            finally:
                self._live = None
                if live is not None:
                    live.broken.set()
                self.counters.set_up(self.name, False)
            delay = self.backoff.next()
            log.warning("upstream %r: %s; restarting in %gs", self.name, reason, delay)
            await anyio.sleep(delay)
            self.counters.restarted(self.name)

    def _failure(self, exc: BaseException) -> str:
        """Why a connection ended, in the gateway's words (never the upstream's text)."""
        if self._exit is not None:
            return f"exited with status {self._exit}"
        cause = innermost(exc)
        if isinstance(cause, UpstreamFailed):
            return str(cause)
        return f"failed ({type(cause).__name__})"

    def _start_failure(self, exc: BaseException) -> UpstreamExited:
        where = f"upstreams.{self.name}"
        cause = innermost(exc)
        if self._exit is None and isinstance(cause, OSError):
            program = self.config.command[0] if self.config.command else "?"
            why = cause.strerror or type(cause).__name__
            return UpstreamExited(f"{where}.command: cannot start {program!r} ({why})")
        return UpstreamExited(f"{where}: exited with status {self._exit} before it was listed")

    async def _watch(self, live: _Connection) -> None:
        """Returns when the connection is broken or a health check fails."""
        while not live.broken.is_set():
            with anyio.move_on_after(self.health_interval):
                await live.wake.wait()
            if live.broken.is_set():
                return
            live.wake = anyio.Event()
            try:
                # tools/list is the one request every MCP era answers (ping is gone
                # in the 2026-07-28 protocol).
                with anyio.fail_after(self.config.timeout):
                    tools = await _list_all(live.client)
            except TimeoutError:
                if live.fail("did not answer its health check in time"):
                    self.counters.failed(self.name, "timeout")
            except Exception as exc:
                self._break(live, f"failed its health check ({type(innermost(exc)).__name__})")
            else:
                await self._relisted(tools)

    async def _listen(self, live: _Connection) -> None:
        """Hold a ``subscriptions/listen`` stream open (2026-07-28 upstreams): its
        ``tools/list_changed`` reaches ``_message`` like a handshake-era one."""
        from mcp.client.subscriptions import ListenNotSupportedError

        try:
            async with live.client.listen(tools_list_changed=True) as changes:
                async for _ in changes:
                    live.wake.set()
        except ListenNotSupportedError:
            return  # a handshake-era upstream sends its notifications unasked
        except Exception as exc:
            log.info("upstream %r: no change stream (%s)", self.name, type(exc).__name__)

    async def _message(self, message: Any) -> None:
        """The upstream said its tools changed: the watcher lists them now."""
        from mcp.types import ToolListChangedNotification

        live = self._live
        if live is not None and isinstance(message, ToolListChangedNotification):
            live.wake.set()

    async def _drain(self, live: _Connection) -> None:
        """Let the calls the connection accepted end (each is bounded by its timeout)."""
        if live.calls and self._exit is None:
            await live.idle.wait()

    async def _relisted(self, tools: list[Any]) -> None:
        """Tell the gateway when a listing differs from the one read before."""
        if _signature(tools) == _signature(self.listed):
            return
        self.listed = tools
        log.warning("upstream %r: its tool list changed; publishing it again", self.name)
        if self.on_tools_changed is not None:
            await self.on_tools_changed(self, tools)

    def _exited(self, status: int | None) -> None:
        self._exit = status
        live = self._live
        if live is not None:
            self._break(live, f"exited with status {status}")

    async def _connect(self) -> Any:
        from mcp import Client
        from mcp.client.stdio import get_default_environment

        config = self.config
        if config.command is not None:
            env = await self._resolved(config.env)
            target: Any = stdio_transport(
                Launch(_argv(config.command), get_default_environment() | env, config.cwd),
                max_bytes=self.max_bytes,
                on_stderr=self.stderr,
                on_exit=self._exited,
            )
        else:
            assert config.url is not None
            headers = await self._resolved(config.headers)
            target = http_transport(config.url, headers, self.max_bytes)
        relayed = self.asker.config
        return Client(
            target,
            cache=None,
            message_handler=self._message,
            # A capability is declared only where the configuration relays it.
            elicitation_callback=self.asker.elicit if relayed.elicitation == "relay" else None,
            sampling_callback=self.asker.sample if relayed.sampling == "relay" else None,
            input_required_max_rounds=MAX_ROUNDS,
        )

    async def _resolved(self, values: Mapping[str, str]) -> dict[str, str]:
        """``values`` with each ``${NAME}`` replaced by the secret ``NAME``, read now.

        The provider runs in a worker thread under ``secrets_timeout``: a slow
        vault delays this upstream's start, never the event loop.
        """
        names = sorted({m.group(1) for v in values.values() for m in _PLACEHOLDER.finditer(v)})
        if not names:
            return dict(values)
        found: dict[str, str] = {}
        for name in names:
            value = await self._secret(name)
            if value is None:
                raise UpstreamFailed(f"upstream {self.name!r}: secret {name!r} is missing")
            found[name] = str(value)
        self.stderr.know(found.values())
        return {
            key: _PLACEHOLDER.sub(lambda m: found[m.group(1)], value)
            for key, value in values.items()
        }

    async def _secret(self, name: str) -> Any:
        provider = self.secrets
        if provider is None:
            return None
        try:
            with anyio.fail_after(self.secrets_timeout):
                return await anyio.to_thread.run_sync(provider, name, abandon_on_cancel=True)
        except TimeoutError:
            raise UpstreamFailed(
                f"upstream {self.name!r}: secret {name!r} not read within {self.secrets_timeout:g}s"
            ) from None
        except Exception as exc:
            raise UpstreamFailed(
                f"upstream {self.name!r}: secret {name!r} could not be read ({type(exc).__name__})"
            ) from None


def _http(url: str, headers: dict[str, str]) -> Any:
    """A streamable-HTTP transport without a bound (what a test's own client uses)."""
    return http_transport(url, headers)


def _checked(session: Any) -> None:
    """The session's output-schema check, its refusal told apart from a broken connection.

    The SDK raises ``RuntimeError`` for an answer its tool's output schema
    refuses; here that refusal is ``_InvalidAnswer``, so ``_call`` fails only
    the call it answered."""
    check = session.validate_tool_result

    async def validated(name: str, result: Any) -> None:
        try:
            await check(name, result)
        except RuntimeError as exc:
            raise _InvalidAnswer() from exc

    session.validate_tool_result = validated


def _argv(command: tuple[str, ...]) -> list[str]:
    """``python`` (or ``python3``) is the gateway's own interpreter, not the first on PATH."""
    program = (
        sys.executable if command[0] in ("python", "python3") and sys.executable else command[0]
    )
    return [program, *command[1:]]


def _signature(tools: list[Any]) -> list[str]:
    """A listing as comparable text: names, descriptions, schemas (in order of name)."""
    return sorted(t.model_dump_json(by_alias=True, exclude_none=True) for t in tools)


def innermost(exc: BaseException) -> BaseException:
    """The single exception inside nested exception groups (task groups wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _list_all(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    log.warning("upstream listing stopped after %d pages", _MAX_PAGES)
    return tools
