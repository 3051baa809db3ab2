"""``guardrails policy check|explain|init|test``: a policy file against the tools.

``--tools SOURCE`` names the application's tools: a JSON tools list, an
importable ``MODULE[:NAME]`` or ``mcp:COMMAND ARGS...`` (see ``_tool_sources``).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import ConfigurationError
from ..policy.explain import explain
from ..policy.init import REVIEW, draft
from ..policy.loader import load
from ._shadow import read_turns, replay, report
from ._tool_sources import load_tools

__all__ = ["add_arguments", "add_tools_argument", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    for action, text in (
        ("check", "check a policy file against the tools"),
        ("explain", "print, per tool and parameter, which rule decides"),
    ):
        cmd = sub.add_parser(action, help=text)
        cmd.add_argument("file", help="the policy file (TOML)")
        add_tools_argument(cmd, required=action == "check")
    init = sub.add_parser("init", help="write a draft policy from the tools, guesses marked")
    add_tools_argument(init, required=True)
    init.add_argument(
        "-o", "--output", metavar="FILE", help="write the draft here (a new file); default stdout"
    )
    test = sub.add_parser("test", help="replay recorded calls through a policy, running no tool")
    test.add_argument("--policy", required=True, metavar="FILE", help="the policy file (TOML)")
    add_tools_argument(test, required=True)
    test.add_argument(
        "--calls", required=True, metavar="RECORDED.jsonl", help="recorded turns, one per line"
    )
    parser.set_defaults(func=run)


def add_tools_argument(cmd: argparse.ArgumentParser, *, required: bool) -> None:
    """``--tools SOURCE`` and ``--tools-timeout SECONDS``, shared by every policy action."""
    cmd.add_argument(
        "--tools",
        metavar="SOURCE",
        required=required,
        help="the tools: a JSON tools list (Anthropic, OpenAI or MCP shape), "
        "MODULE[:NAME] (a Guardrails engine, a mapping or list of tools) "
        "or 'mcp:COMMAND ARGS...' (an MCP server started over stdio)",
    )
    cmd.add_argument(
        "--tools-timeout",
        metavar="SECONDS",
        type=_positive,
        default=30.0,
        help="how long an MCP server may take to list its tools (default 30)",
    )


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 3600: {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    """0: the policy is sound; 2: it is not (one line on stderr naming file, table and key)."""
    if args.policy_command == "init":
        return _init(args)
    if args.policy_command == "test":
        return _test(args)
    try:
        policy = load(args.file)
        tools = load_tools(args.tools, timeout=args.tools_timeout) if args.tools else None
        if tools is not None:
            policy.check(tools)
    except ConfigurationError as exc:
        sys.stderr.write(f"guardrails policy {args.policy_command}: {exc}\n")
        return 2
    if args.policy_command == "check":
        print(f"{args.file}: ok ({len(policy.params)} parameter rules, {len(tools or {})} tools)")
    else:
        print(explain(policy, tools))
    return 0


def _init(args: argparse.Namespace) -> int:
    """0: the draft is written; 2: the tools or the output file cannot be used."""
    try:
        tools = load_tools(args.tools, timeout=args.tools_timeout)
        text = draft(tools, args.tools)
        if args.output is None:
            sys.stdout.write(text)
            return 0
        with open(args.output, "x", encoding="utf-8") as file:
            file.write(text)
    except ConfigurationError as exc:
        sys.stderr.write(f"guardrails policy init: {exc}\n")
        return 2
    except OSError as exc:
        reason = "it exists" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        sys.stderr.write(f"guardrails policy init: {args.output}: cannot write it ({reason})\n")
        return 2
    guesses = text.count(REVIEW)
    print(f"{args.output}: a draft for {len(tools)} tools, {guesses} lines to review")
    return 0


def _test(args: argparse.Namespace) -> int:
    """0: nothing would be refused; 1: something would; 2: unusable input."""
    try:
        _refuse_audit_store(args.calls)
        policy = load(args.policy)
        tools = load_tools(args.tools, timeout=args.tools_timeout)
        policy.check(tools)
        done = replay(policy, tools, read_turns(args.calls))
    except ConfigurationError as exc:
        sys.stderr.write(f"guardrails policy test: {exc}\n")
        return 2
    print(report(done, args.calls))
    return 1 if done.refusals else 0


def _refuse_audit_store(calls: str) -> None:
    """An audit store records no argument values or results: nothing to replay."""
    store = calls.startswith(("postgresql:", "postgres:", "sqlite:"))
    if not store and os.path.isfile(calls):
        try:
            with open(calls, "rb") as file:
                store = file.read(16) == b"SQLite format 3\x00"
        except OSError:
            pass  # read_turns says why it cannot be read
    if store:
        raise ConfigurationError(
            f"{calls}: an audit store keeps no argument values and no results, so replaying "
            "it cannot tell what a policy's rules would refuse; record turns as JSONL "
            "(docs/policy.md, 'Shadow mode')"
        )
