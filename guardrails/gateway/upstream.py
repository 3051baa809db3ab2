"""One upstream MCP server, kept connected: started, watched, restarted with backoff.

A supervisor task owns the ``mcp.Client`` (it is entered and left in that
task). Calls borrow it. A call to an upstream that is down fails at once with
``UpstreamUnavailable`` (the model sees ``unavailable``); a broken connection
or a crash during a call raises ``UpstreamFailed`` (``error``); a call that
outlives its timeout raises ``TimeoutError`` (``error``) and makes the
supervisor check the upstream at once (a ``tools/list`` within the timeout),
restarting it if the check fails too. The same check runs every
``health_interval`` seconds. Each listing (at a restart, at a health check)
is compared with the one before; a change is handed to ``on_tools_changed``
(the gateway publishes it again). Nothing the upstream says travels in these
exceptions.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ..errors import StopRun
from .config import UpstreamConfig
from .metrics import GatewayCounters

__all__ = ["Backoff", "Upstream", "UpstreamFailed", "UpstreamUnavailable", "innermost"]

log = logging.getLogger("guardrails.gateway")

_MAX_PAGES = 100
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.\-]+)\}")


class UpstreamUnavailable(StopRun):
    """The upstream is down (starting, or restarting after a failure)."""


class UpstreamFailed(RuntimeError):
    """The upstream's connection broke, or it answered something that is not a result."""


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
    """One connection's client and state: a failure of this connection never marks the next."""

    __slots__ = ("broken", "client", "wake")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.broken = anyio.Event()
        self.wake = anyio.Event()


class Upstream:
    """The connection to one upstream, and the tools it listed when it first connected."""

    def __init__(
        self,
        config: UpstreamConfig,
        counters: GatewayCounters,
        *,
        backoff: Backoff | None = None,
        health_interval: float = 15.0,
        secrets: Callable[[str], Any] | None = None,
        secrets_timeout: float = 5.0,
    ) -> None:
        self.config = config
        self.secrets = secrets
        self.secrets_timeout = secrets_timeout
        self.name = config.name
        self.counters = counters
        self.backoff = backoff or Backoff(config.backoff_initial, config.backoff_max)
        self.health_interval = health_interval
        self.tools: list[Any] = []
        # The listing last read (``tools`` is what is published; they differ
        # while a new listing does not fit the configuration).
        self.listed: list[Any] = []
        # Called with this upstream and its new listing when the listing changed.
        self.on_tools_changed: Callable[[Upstream, list[Any]], Awaitable[None]] | None = None
        self._live: _Connection | None = None

    # -- calls ----------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The upstream's ``CallToolResult``; raises as the module docstring says."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        live = self._live
        if live is None or live.broken.is_set():
            self.counters.failed(self.name, "unavailable")
            raise UpstreamUnavailable(f"upstream {self.name!r} is down")
        try:
            with anyio.fail_after(timeout):
                return await live.client.call_tool(tool, arguments)
        except TimeoutError:
            self.counters.failed(self.name, "timeout")
            live.wake.set()  # the supervisor checks it now
            raise
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._break(live)
            raise UpstreamFailed(f"upstream {self.name!r} answered an error ({exc.code})") from exc
        except Exception as exc:
            self._break(live)
            raise UpstreamFailed(f"upstream {self.name!r} failed ({type(exc).__name__})") from exc

    def _break(self, live: _Connection) -> None:
        if not live.broken.is_set():
            self.counters.failed(self.name, "disconnected")
        live.broken.set()
        live.wake.set()

    # -- supervision ----------------------------------------------------------

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, list, watch; on failure wait the backoff and start again. Runs until cancelled.

        ``task_status.started()`` is called after the first successful listing.
        """
        started = False
        while True:
            live: _Connection | None = None
            try:
                async with await self._connect() as client:
                    with anyio.fail_after(self.config.connect_timeout):
                        tools = await _list_all(client)
                    if not started:
                        self.tools = self.listed = tools
                    live = self._live = _Connection(client)
                    await self._relisted(tools)
                    self.counters.set_up(self.name, True)
                    self.backoff.reset()
                    if not started:
                        started = True
                        task_status.started()
                    await self._watch(live)
            except Exception as exc:
                if live is None or not live.broken.is_set():
                    self.counters.failed(self.name, "disconnected")
                # The exception's own text may come from the upstream: only ours is logged.
                cause = innermost(exc)
                detail = str(cause) if isinstance(cause, UpstreamFailed) else type(cause).__name__
                log.warning("upstream %r failed (%s); restarting", self.name, detail)
            finally:
                self._live = None
                if live is not None:
                    live.broken.set()
                self.counters.set_up(self.name, False)
            await anyio.sleep(self.backoff.next())
            self.counters.restarted(self.name)

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
                self.counters.failed(self.name, "timeout")
                live.broken.set()
            except Exception:
                self._break(live)
            else:
                await self._relisted(tools)

    async def _relisted(self, tools: list[Any]) -> None:
        """Tell the gateway when a listing differs from the one read before."""
        if _signature(tools) == _signature(self.listed):
            return
        self.listed = tools
        log.warning("upstream %r: its tool list changed; publishing it again", self.name)
        if self.on_tools_changed is not None:
            await self.on_tools_changed(self, tools)

    async def _connect(self) -> Any:
        from mcp import Client, StdioServerParameters

        config = self.config
        if config.command is not None:
            target: Any = StdioServerParameters(
                command=config.command[0],
                args=list(config.command[1:]),
                env=await self._resolved(config.env) or None,
                cwd=config.cwd,
            )
        else:
            assert config.url is not None
            target = _http(config.url, await self._resolved(config.headers))
        return Client(target, cache=None)

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


@asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


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
