"""The ``guardrails`` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ._version import __version__

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
    example = sub.add_parser(
        "example",
        help="run a small guarded tool-call example",
        description="Run a small guarded tool-call example and print what each call returned.",
    )
    example.set_defaults(func=_example)
    demo = sub.add_parser(
        "demo",
        help="a scripted agent, turn by turn: what the guards decided (no network)",
        description=(
            "A scripted banking agent, turn by turn: each guard's verdict (pass, reject, "
            "not_evaluated), the outcome the model saw, the audit rows and the metrics. "
            "No network unless --live."
        ),
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
    from .gateway.cli import add_arguments as gateway_arguments
    from .observe.coverage import add_arguments as coverage_arguments

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
    from ._cli_audit import add_arguments as audit_arguments

    audit_arguments(sub.add_parser("audit", help="check the audit log (hash chain)"))

    from .policy.cli import add_arguments as policy_arguments

    policy_arguments(
        sub.add_parser("policy", help="check, explain, draft (init) or shadow-test (test) a policy")
    )

    from .approvals.cli import add_arguments as approvals_arguments

    approvals_arguments(
        sub.add_parser("approvals", help="list, show, approve or deny calls waiting for a person")
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
    except OSError as exc:  # --dir is a file, or cannot be created
        where = exc.filename if exc.filename is not None else args.dir
        print(f"guardrails demo: {where}: {exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 2


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
