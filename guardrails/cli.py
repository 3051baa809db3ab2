"""The ``guardrails`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._version import __version__

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="guardrails",
        description="Guards for LLM agents at three choke-points: pre_turn, tool_call, post_run.",
    )
    parser.add_argument("--version", action="version", version=f"guardrails {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    example = sub.add_parser("example", help="run a small guarded tool-call example")
    example.set_defaults(func=_example)
    demo = sub.add_parser(
        "demo", help="a scripted agent, turn by turn: what the guards decided (no network)"
    )
    demo.add_argument(
        "--dir",
        default=None,
        help="where to write the audit database and metrics (default: a new temporary directory)",
    )
    demo.add_argument(
        "--live",
        metavar="MODEL",
        nargs="?",
        const="claude-sonnet-5-5",
        default=None,
        help="let a real model play the agent (needs ANTHROPIC_API_KEY and the anthropic extra)",
    )
    demo.set_defaults(func=_demo)
    from .coverage import add_arguments as coverage_arguments
    from .gateway.cli import add_arguments as gateway_arguments

    gateway_arguments(
        sub.add_parser(
            "gateway", help="one guarded MCP endpoint in front of MCP servers (needs the mcp extra)"
        )
    )

    coverage_arguments(
        sub.add_parser(
            "coverage",
            help="guard coverage from Prometheus metrics (a file or a 127.0.0.1 URL) or the audit log",
        )
    )
    return parser


def _example(args: argparse.Namespace) -> int:
    from .examples.quickstart import main as quickstart

    quickstart()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run
    from .errors import UsageError

    try:
        return run(directory=args.dir, model=args.live)
    except UsageError as exc:
        print(f"guardrails demo: {exc}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0
    return int(func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
