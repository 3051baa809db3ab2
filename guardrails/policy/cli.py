"""``guardrails policy check FILE`` and ``guardrails policy explain FILE``.

``--tools MODULE[:NAME]`` imports the application's tools: ``NAME`` may be a
``Guardrails`` engine, a mapping or a list of tools; without it, the module's
engine (if it has exactly one) or every ``Tool`` it defines.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from ..errors import ConfigurationError
from .explain import explain
from .loader import load
from .policy import _tool_map

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    for action, text in (
        ("check", "check a policy file against the tools of an importable module"),
        ("explain", "print, per tool and parameter, which rule decides"),
    ):
        cmd = sub.add_parser(action, help=text)
        cmd.add_argument("file", help="the policy file (TOML)")
        cmd.add_argument(
            "--tools",
            metavar="MODULE[:NAME]",
            required=action == "check",
            help="where the registered tools are: a Guardrails engine, a mapping or list of tools",
        )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """0: the policy is sound; 2: it is not (one line on stderr naming file, table and key)."""
    try:
        policy = load(args.file)
        tools = _import_tools(args.tools) if args.tools else None
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


def _import_tools(spec: str) -> dict[str, Any]:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {type(exc).__name__}") from None
    if attr:
        if not hasattr(module, attr):
            raise ConfigurationError(f"module {module_name!r} has no {attr!r}")
        return _tool_map(getattr(module, attr))
    from ..engine import Guardrails
    from ..tools import Tool

    engines = [v for v in vars(module).values() if isinstance(v, Guardrails)]
    if len(engines) == 1:
        return dict(engines[0].tools)
    found = {v.name: v for v in vars(module).values() if isinstance(v, Tool)}
    if not found:
        raise ConfigurationError(f"module {module_name!r} defines no tools; name them MODULE:NAME")
    return found
