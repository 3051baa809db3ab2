"""The ``guardrails`` command: one module per subcommand (see ``AGENTS.md``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .._version import __version__

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (``guardrails coverage: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="guardrails",
        description="Guards for LLM agents at three choke-points: pre_turn, tool_call, post_run.",
    )
    parser.add_argument("--version", action="version", version=f"guardrails {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from . import demo, example

    example.add_arguments(sub.add_parser("example", help="run a small guarded tool-call example"))
    demo.add_arguments(
        sub.add_parser(
            "demo", help="a scripted agent, turn by turn: what the guards decided (no network)"
        )
    )
    from ..gateway.cli import add_arguments as gateway_arguments
    from ..observe.coverage import add_arguments as coverage_arguments

    gateway_arguments(
        sub.add_parser(
            "gateway", help="one guarded MCP endpoint in front of MCP servers (needs the mcp extra)"
        )
    )

    coverage_arguments(
        sub.add_parser(
            "coverage",
            help="guard coverage from Prometheus metrics (a file or a 127.0.0.1 URL) or the audit log",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    from .audit import add_arguments as audit_arguments

    audit_arguments(sub.add_parser("audit", help="check the audit log (hash chain)"))

    from .policy import add_arguments as policy_arguments

    policy_arguments(
        sub.add_parser("policy", help="check, explain, draft (init) or shadow-test (test) a policy")
    )

    from ..approvals.cli import add_arguments as approvals_arguments

    approvals_arguments(
        sub.add_parser("approvals", help="list, show, approve or deny calls waiting for a person")
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0
    try:
        return int(func(args))
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
