"""``guardrails audit verify|checkpoint <store-url>``: check the audit log's hash chain,
and export its head to keep elsewhere.

``verify`` prints one line and exits 0 when the chain holds, 1 when a row was
changed, removed or inserted out of order (the line names the first such
row), when the chain no longer holds the head of a checkpoint (``--against``:
a rewritten history, a deleted tail), when the chain head table was
overwritten, or when the checkpoint's signature does not match; and 2 when
the store or the checkpoint cannot be opened or read. ``checkpoint`` prints
(or writes, ``-o``) the head as JSON, signed when ``--key`` names a key file,
and exits 0, 1 when the chain does not verify, 2 when it cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_arguments"]

_STORE_HELP = "a SQLite path or sqlite:///path, or a postgresql:// URL"
_KEY_HELP = "a file holding an HMAC key (readable by its owner only), to sign or check with"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="audit_command", metavar="COMMAND", required=True)
    check = commands.add_parser(
        "verify", help="check the hash chain; name the first row changed, removed or reordered"
    )
    check.add_argument("store", help=_STORE_HELP)
    check.add_argument(
        "--against",
        metavar="CHECKPOINT",
        help="a checkpoint file: the chain must still hold its head (no rewrite, no deleted tail)",
    )
    check.add_argument("--key", metavar="FILE", help=_KEY_HELP)
    check.set_defaults(func=_verify)
    anchor = commands.add_parser(
        "checkpoint", help="export the chain head (rows, hash, time) as JSON to keep elsewhere"
    )
    anchor.add_argument("store", help=_STORE_HELP)
    anchor.add_argument("--key", metavar="FILE", help=_KEY_HELP)
    anchor.add_argument("-o", "--output", metavar="FILE", help="write it here (default: stdout)")
    anchor.set_defaults(func=_checkpoint)


def _verify(args: argparse.Namespace) -> int:
    from ..store.checkpoint import CheckpointError, SignatureMismatch, check, read, read_key
    from ..store.verify import verify

    try:
        key = read_key(args.key) if args.key else None
        against = read(_read_text(args.against), key) if args.against else None
    except SignatureMismatch as exc:
        print(f"tampered: {exc}")
        return 1
    except CheckpointError as exc:
        print(f"guardrails audit verify: {exc}", file=sys.stderr)
        return 2
    found = _with_store(
        "verify", args.store, lambda s: verify(s) if against is None else check(s, against)
    )
    if found is None:
        return 2
    line = found.line()
    if against is not None and found.ok:
        signed = "signed " if against.signed else ""
        line += f"; it holds the {signed}checkpoint of {against.at} (row {against.last_id})"
    print(line)
    return 0 if found.ok else 1


def _checkpoint(args: argparse.Namespace) -> int:
    from ..store.checkpoint import CheckpointError, export, read_key

    try:
        key = read_key(args.key) if args.key else None
    except CheckpointError as exc:
        print(f"guardrails audit checkpoint: {exc}", file=sys.stderr)
        return 2
    text = _with_store("checkpoint", args.store, lambda s: export(s, key))
    if text is None:
        return 2
    if isinstance(text, CheckpointError):
        print(f"guardrails audit checkpoint: {text}", file=sys.stderr)
        return 1
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _with_store(command: str, url: str, work: Any) -> Any:
    """``work(store)`` on the store at ``url``; None (and a line) when it cannot be opened or
    read; a ``CheckpointError`` that ``work`` raised is returned as a value."""
    from ..store import StoreError, open_store
    from ..store.checkpoint import CheckpointError

    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else url
    if "://" not in path and not os.path.isfile(path):
        print(f"guardrails audit {command}: no store at {path!r}", file=sys.stderr)
        return None
    try:
        store = open_store(url)
        try:
            return work(store)
        finally:
            store.close()
    except CheckpointError as exc:
        return exc
    except StoreError as exc:
        print(f"guardrails audit {command}: {exc}", file=sys.stderr)
        return None


def _read_text(path: str) -> str:
    from ..store.checkpoint import CheckpointError

    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read the checkpoint {path!r}: {exc}") from exc
