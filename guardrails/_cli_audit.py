"""``guardrails audit verify <store-url>``: check the audit log's hash chain.

Prints one line and exits 0 when the chain holds, 1 when a row was changed,
removed or inserted out of order (the line names the first such row), and 2
when the store cannot be opened or read.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="audit_command", metavar="COMMAND", required=True)
    check = commands.add_parser(
        "verify", help="check the hash chain; name the first row changed, removed or reordered"
    )
    check.add_argument("store", help="a SQLite path or sqlite:///path, or a postgresql:// URL")
    check.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    from .store import StoreError, open_store
    from .store.verify import verify

    url: str = args.store
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else url
    if "://" not in path and not os.path.isfile(path):
        print(f"guardrails audit verify: no store at {path!r}", file=sys.stderr)
        return 2
    try:
        store = open_store(url)
        try:
            found = verify(store)
        finally:
            store.close()
    except StoreError as exc:
        print(f"guardrails audit verify: {exc}", file=sys.stderr)
        return 2
    print(found.line())
    return 0 if found.ok else 1
