"""``guardrails gateway --config FILE [--http HOST:PORT | --stdio] [--metrics HOST:PORT]``,
and ``guardrails gateway pins ...`` (``pins_cli.py``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .pins_cli import add_arguments as pins_arguments

    # Required unless a subcommand runs instead (checked in ``run``).
    parser.add_argument("--config", metavar="FILE", help="the gateway's TOML file (required)")
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp"
    )
    how.add_argument("--stdio", action="store_true", help="serve one client over stdio (default)")
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at HOST:PORT/metrics (over HTTP: instead of the clients' port)",
    )
    parser.set_defaults(func=run, parser=parser)
    sub = parser.add_subparsers(dest="gateway_command", metavar="COMMAND")
    pins_arguments(
        sub.add_parser("pins", help="list, compare and approve changed upstream tool definitions")
    )


def run(args: argparse.Namespace) -> int:
    if args.config is None:
        args.parser.error("the following arguments are required: --config")
    try:
        import mcp  # noqa: F401
    except ImportError:
        print(
            "guardrails gateway: needs the mcp extra: pip install 'guardrails-kit[mcp]'",
            file=sys.stderr,
        )
        return 2
    from functools import partial

    import anyio

    from ..errors import GuardrailsError
    from .app import Gateway
    from .config import load_config
    from .serve import serve_http, serve_stdio

    try:
        gateway = Gateway(load_config(args.config))
        http = None if args.http is None else _address(args.http, "--http")
        if args.metrics is not None:
            # Metrics on their own address: not on the clients' port at all.
            _metrics_server(gateway, *_address(args.metrics, "--metrics"))
        if http is not None:
            anyio.run(partial(serve_http, metrics=args.metrics is None), gateway, *http)
        else:
            anyio.run(serve_stdio, gateway)
    except GuardrailsError as exc:
        # One line: a schema error's detail (the validator's report) stays out.
        print(f"guardrails gateway: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _address(text: str, option: str) -> tuple[str, int]:
    from ..errors import ConfigurationError

    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigurationError(f"{option} {text!r}: expected HOST:PORT")
    return host, int(port)


def _metrics_server(gateway: Any, host: str, port: int) -> None:
    from prometheus_client import start_http_server

    from ..errors import ConfigurationError

    try:
        server, _ = start_http_server(port, addr=host, registry=gateway.registry)
    except OSError as exc:
        raise ConfigurationError(
            f"--metrics {host}:{port}: cannot listen ({exc.strerror})"
        ) from exc
    bound = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"guardrails gateway: metrics on http://{shown}:{bound}/metrics", file=sys.stderr)
