"""The ``guardrails`` command: one module per subcommand (see ``AGENTS.md``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._version import __version__

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (``guardrails coverage: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# The subcommands in the order --help lists them: what each is for, and its parser's options.
# A subcommand's module is imported only when it runs (``_add_arguments``), so that
# ``guardrails --help`` loads neither the demo, the gateway, Prometheus nor a framework.
_COMMANDS: dict[str, tuple[str, dict[str, Any]]] = {
    "example": ("run a small guarded tool-call example", {}),
    "demo": ("a scripted agent, turn by turn: what the guards decided (no network)", {}),
    "gateway": ("one guarded MCP endpoint in front of MCP servers (needs the mcp extra)", {}),
    "coverage": (
        "guard coverage from Prometheus metrics (a file or a 127.0.0.1 URL) or the audit log",
        {"formatter_class": argparse.RawDescriptionHelpFormatter},
    ),
    "audit": ("check the audit log (hash chain)", {}),
    "policy": ("check, explain, draft (init) or shadow-test (test) a policy", {}),
    "approvals": ("list, show, approve or deny calls waiting for a person", {}),
}


def _add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Import ``command``'s module and let it add its arguments to ``parser``."""
    if command == "example":
        from .example import add_arguments
    elif command == "demo":
        from .demo import add_arguments
    elif command == "gateway":
        from ..gateway.cli import add_arguments
    elif command == "coverage":
        from ..observe.coverage import add_arguments
    elif command == "audit":
        from .audit import add_arguments
    elif command == "policy":
        from .policy import add_arguments
    elif command == "approvals":
        from ..approvals.cli import add_arguments
    else:
        raise KeyError(command)
    add_arguments(parser)


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option."""
    # The options before the command (-h, --version) take no value: the first other word
    # is the command (argparse refuses it if it is none).
    return next((word for word in argv if word != "--" and not word.startswith("-")), None)


def _build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``argv``'s subcommand (of every subcommand when ``argv`` is None)."""
    parser = _Parser(
        prog="guardrails",
        description="Guards for LLM agents at three choke-points: pre_turn, tool_call, post_run.",
    )
    parser.add_argument("--version", action="version", version=f"guardrails {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = None if argv is None else _command_in(argv)
    for command, (text, options) in _COMMANDS.items():
        cmd = sub.add_parser(command, help=text, **options)
        if argv is None or command == chosen:
            _add_arguments(command, cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = _build_parser(words)
    args = parser.parse_args(words)
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
