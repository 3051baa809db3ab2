"""``guardrails example``: a small guarded tool-call example, and what each call returned."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Run a small guarded tool-call example and print what each call returned."
    parser.set_defaults(func=_example)


def _example(args: argparse.Namespace) -> int:
    from ..examples.quickstart import main as quickstart

    quickstart()
    return 0
