"""``guardrails approvals list|show|approve|deny --store URL``: decide requests from a shell.

Exit status: 0 done; 1 the request does not exist or is no longer pending
(already decided, used or expired); 2 the store cannot be opened or read, or
the command was given wrongly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..store._approval_rows import APPROVAL_STATUSES, ApprovalRecord

__all__ = ["add_arguments"]

_STORE_HELP = (
    "the store the gate writes to: a SQLite path or sqlite:///path, or a postgresql:// URL"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="approvals_command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="requests, newest first (default: pending ones)")
    listing.add_argument(
        "--status",
        choices=[*sorted(APPROVAL_STATUSES), "all"],
        default="pending",
        help="which requests to list (default: pending)",
    )
    listing.add_argument("--limit", type=int, default=100, help="at most this many (default: 100)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(func=_list)
    show = commands.add_parser("show", help="one request, as JSON")
    show.add_argument("id", help="the request id (from list)")
    show.set_defaults(func=_show)
    for verb, does in (("approve", "let the call run once"), ("deny", "refuse the call")):
        decide = commands.add_parser(verb, help=f"decide a pending request: {does}")
        decide.add_argument("id", help="the request id (from list)")
        decide.add_argument("--by", required=True, help="who decides (recorded and audited)")
        decide.add_argument("--reason", default=None, help="why (recorded and audited)")
        decide.set_defaults(func=_decide, verb=verb)
    for sub in (listing, show, *commands.choices.values()):
        if not any(a.dest == "store" for a in sub._actions):
            sub.add_argument("--store", required=True, metavar="URL", help=_STORE_HELP)


def _list(args: argparse.Namespace) -> int:
    status = None if args.status == "all" else args.status
    return _run(args, lambda book: _print_list(book.list(status, limit=args.limit), args.json))


def _show(args: argparse.Namespace) -> int:
    return _run(args, lambda book: print(json.dumps(_plain(book.show(args.id)), indent=2)))


def _decide(args: argparse.Namespace) -> int:
    def decide(book: Any) -> None:
        method = book.approve if args.verb == "approve" else book.deny
        done = method(args.id, by=args.by, reason=args.reason)
        print(f"{done.id} {done.status} by {done.decided_by}")

    return _run(args, decide)


def _run(args: argparse.Namespace, action: Any) -> int:
    from ..errors import UsageError
    from ..store import StoreError, open_store
    from .api import ApprovalError, Approvals

    store = None
    missing = _missing(args.store)
    if missing is not None:
        print(f"guardrails approvals: {args.store}: {missing}", file=sys.stderr)
        return 2
    try:
        store = open_store(args.store)
        action(Approvals(store))
        return 0
    except ApprovalError as exc:
        print(f"guardrails approvals: {exc}", file=sys.stderr)
        return 1
    except (StoreError, UsageError, OSError) as exc:
        print(f"guardrails approvals: {exc}", file=sys.stderr)
        return 2
    finally:
        if store is not None:
            store.close()


def _missing(url: str) -> str | None:
    """Why ``url`` names no store the gate writes to (None: it may). A path that names no
    file is a mistake (a typo, a key=value DSN), never a new empty store."""
    if url == "memory:":
        return "a memory: store lives in its own process only"
    path = url.removeprefix("sqlite://")
    if "://" in path or Path(path).expanduser().is_file():
        return None
    return "no such store file"


def _print_list(records: list[ApprovalRecord], as_json: bool) -> None:
    for r in records:
        if as_json:
            print(json.dumps(_plain(r)))
        else:
            # tenant and session as JSON: a control character in them cannot rewrite the terminal
            where = f"{json.dumps(r.tenant)}  {json.dumps(r.session)}"
            print(f"{r.id}  {r.status:<8}  {where}  {r.tool}  {r.arguments}")


def _plain(record: ApprovalRecord) -> dict[str, Any]:
    return record._asdict()
