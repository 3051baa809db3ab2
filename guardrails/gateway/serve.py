"""The two ways to serve the gateway: one client over stdio, many over streamable HTTP.

Both stop cleanly on SIGTERM or SIGINT: no new request is taken, the calls in
flight finish (each writes its audit row before it answers), then the
upstreams are stopped and the store is closed.
"""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from ..errors import ConfigurationError
from ._stdin import stdin_lines
from .app import Gateway
from .approvals_http import approval_routes
from .approvers import Approvers, ApproverTable, load_approvers
from .auth import CountRefusals, TokenTable, load_tokens
from .oauth import AnyOf, JwtVerifier, auth_settings, metadata_routes
from .origin import LOOPBACK, HostCheck
from .progress_http import stream_progress
from .sessions import SessionIdsCut, tenant_sessions

__all__ = ["http_app", "http_approvers", "http_tokens", "serve_http", "serve_stdio"]

GRACE_SECONDS = 10


def http_app(
    gateway: Gateway,
    host: str = "127.0.0.1",
    tokens: Any = None,
    *,
    metrics: bool = True,
    approvers: Approvers | None = None,
) -> Any:
    """The ASGI app: ``/mcp`` behind bearer auth (refusals counted), ``/metrics`` open;
    with OAuth, the protected-resource metadata (``oauth.py``); with approvers,
    ``/approvals`` behind their own tokens (``approvals_http.py``).

    ``metrics=False`` leaves ``/metrics`` out (they are served on their own address).
    """
    from mcp.server.transport_security import TransportSecuritySettings
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    if tokens is None:
        tokens = http_tokens(gateway)

    async def scrape(request: Request) -> Response:
        return Response(generate_latest(gateway.registry), media_type=CONTENT_TYPE_LATEST)

    routes = [Route("/metrics", scrape, methods=["GET"])] if metrics else []
    if approvers is None:
        approvers = http_approvers(gateway)
    if approvers is not None:
        routes += approval_routes(lambda: gateway.store, approvers)
    oauth = gateway.config.auth.oauth

    config = gateway.config
    server = gateway.server()
    app = server.streamable_http_app(
        # One JSON answer per request rather than an event stream: the gateway
        # sends nothing before the result, and this is several times faster.
        json_response=True,
        host=host,
        # Host and Origin are checked by HostCheck, counted apart from tokens.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_sessions=config.max_sessions,
        session_idle_timeout=config.session_idle_timeout,
        auth=auth_settings(oauth, f"http://{_url_host(host)}"),
        token_verifier=tokens,
        custom_starlette_routes=routes,
    )
    app.router.routes[:0] = metadata_routes(oauth)  # before the SDK's own metadata route
    stream_progress(server)  # a call that asks for progress may be answered as a stream
    tenant_sessions(server, config.limits_of, gateway.counters.limit)
    return HostCheck(
        CountRefusals(app, gateway.counters.refused),
        hosts=config.allowed_hosts,
        origins=config.allowed_origins,
        loopback=host in LOOPBACK,
        refused=gateway.counters.refused_request,
    )


def http_tokens(gateway: Gateway) -> Any:
    """The verifier of the configuration's static tokens and OAuth JWTs (either may be
    absent); serving over HTTP without either is refused."""
    tokens = load_tokens(gateway.config.auth)
    oauth = gateway.config.auth.oauth
    if not tokens and oauth is None:
        raise ConfigurationError(
            "auth: serving over HTTP needs bearer tokens (auth.tokens_file or auth.tokens_env)"
        )
    table = TokenTable(tokens, gateway.config.auth)
    if oauth is None:
        return table
    try:
        import jwt  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "auth.oauth: needs the gateway-oauth extra: pip install 'guardrails-kit[gateway-oauth]'"
        ) from None
    # Static tokens first (reloaded as ever), then the issuer's JWTs.
    return AnyOf(table, JwtVerifier(oauth))


def http_approvers(gateway: Gateway) -> Approvers | None:
    """The approvers of the configuration (None: no ``/approvals`` endpoint); a token that
    is also a static MCP client token is refused, so that a client's token never decides."""
    config = gateway.config.approvals
    table = None
    if config.approvers_file is not None or config.approvers_env is not None:
        approvers = load_approvers(config)
        if approvers.keys() & load_tokens(gateway.config.auth).keys():
            where = (
                "approvals.approvers_file" if config.approvers_file else "approvals.approvers_env"
            )
            raise ConfigurationError(f"{where}: a token is also an MCP client token (auth)")
        table = ApproverTable(config, approvers)
    oauth = gateway.config.auth.oauth
    if config.oauth_scope is None or oauth is None:
        return None if table is None else Approvers(table)
    return Approvers(table, JwtVerifier(oauth), config.oauth_scope)


async def serve_http(gateway: Gateway, host: str, port: int, *, metrics: bool = True) -> None:
    """Serve on ``host:port`` (port 0: a free one), announcing the URL on stderr when bound.

    ``metrics=False``: no ``/metrics`` on this port (``--metrics`` serves them elsewhere).
    """
    import uvicorn

    tokens = http_tokens(gateway)
    approvers = http_approvers(gateway)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say
    # so, and without it every answer waits out a delayed ACK (about 40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(f"--http {host}:{port}: cannot listen ({exc.strerror})") from exc
    sock.listen(128)
    async with gateway.running():
        app = http_app(gateway, host, tokens, metrics=metrics, approvers=approvers)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACE_SECONDS
        )
        server = uvicorn.Server(config)
        bound = sock.getsockname()[1]
        print(
            f"guardrails gateway: listening on http://{_url_host(host)}:{bound}/mcp",
            file=sys.stderr,
            flush=True,
        )
        # uvicorn handles SIGTERM/SIGINT: it stops accepting and lets requests
        # finish, then re-raises the signal to the handler that was there before
        # it: ours notes it, so that the upstreams and the store close too.
        with _signals_noted(), _reload_on_hangup(tokens), SessionIdsCut.installed():
            await server.serve(sockets=[sock])


async def serve_stdio(gateway: Gateway) -> None:
    """Serve one client over this process's stdin and stdout."""
    from mcp.server.stdio import stdio_server

    with stdin_lines() as lines:
        async with gateway.running(), anyio.create_task_group() as tg:
            server = gateway.server()
            tg.start_soon(_stop_on_signal, tg.cancel_scope)
            print("guardrails gateway: serving over stdio", file=sys.stderr, flush=True)
            async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
                await server.run(read, write, server.create_initialization_options())
            tg.cancel_scope.cancel()  # the client closed stdin


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            # Calls in flight are shielded (Gateway.server): they finish and
            # write their audit rows; nothing new is read.
            scope.cancel()
            return


@contextmanager
def _signals_noted() -> Iterator[None]:
    noted = (signal.SIGTERM, signal.SIGINT)
    previous = {number: signal.signal(number, lambda *_: None) for number in noted}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextmanager
def _reload_on_hangup(tokens: TokenTable) -> Iterator[None]:
    """SIGHUP reads the tokens again (where the platform has it)."""
    hangup = getattr(signal, "SIGHUP", None)
    if hangup is None:
        yield
        return
    previous = signal.signal(hangup, lambda *_: tokens.reload())
    try:
        yield
    finally:
        signal.signal(hangup, previous)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
