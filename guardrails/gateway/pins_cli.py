"""``guardrails gateway pins list|diff|approve --store URL``: the operator's side of pinned tools.

``list`` prints one line per pinned tool (upstream, tool, ``pinned`` or
``changed``, the pinned hash and, when changed, the hash seen since); ``diff``
the approved and the seen definition as a unified diff of indented JSON;
``approve`` makes the seen definition the pin (every gateway sharing the store
publishes it at its next pin check). Exit 0 on success, 1 when there is
nothing to show or approve, 2 for a store that cannot be opened.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pins_command", metavar="ACTION", required=True)
    listed = sub.add_parser("list", help="every pinned tool, and whether it changed")
    diff = sub.add_parser("diff", help="what changed in a withheld tool's definition")
    approve = sub.add_parser("approve", help="publish a withheld tool's new definition")
    for action in (listed, diff, approve):
        action.add_argument(
            "--store",
            required=True,
            metavar="URL",
            help="the gateway's store: a SQLite path, sqlite:///, or postgresql:// URL",
        )
    for action in (diff, approve):
        action.add_argument("upstream", help="the upstream's name in the configuration")
        action.add_argument("tool", help="the tool's name as the upstream lists it")
    approve.add_argument("--hash", metavar="SHA256", help="approve only this change (8+ chars)")
    listed.set_defaults(func=_run, show=_list)
    diff.set_defaults(func=_run, show=_diff)
    approve.set_defaults(func=_run, show=_approve)


def _run(args: argparse.Namespace) -> int:
    from ..errors import GuardrailsError
    from ..store import open_store

    url = args.store
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///") - 1 :]
    if url == "memory:":
        print("guardrails gateway pins: a memory: store is the gateway's own", file=sys.stderr)
        return 2
    if "://" not in url:
        # A path that names no file is a mistake, not a new empty store.
        if not Path(url).expanduser().is_file():
            print(f"guardrails gateway pins: {url}: no such store file", file=sys.stderr)
            return 2
        url = str(Path(url).expanduser())
    try:
        store = open_store(url)
    except GuardrailsError as exc:
        print(f"guardrails gateway pins: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    try:
        code: int = args.show(store, args)
        return code
    except GuardrailsError as exc:
        print(f"guardrails gateway pins: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        store.close()


def _list(store: Any, args: argparse.Namespace) -> int:
    from .pins import pins

    found = pins(store)
    for pin in found:
        state = "changed" if pin.seen_hash else "pinned"
        seen = f" -> {pin.seen_hash[:12]}" if pin.seen_hash else ""
        print(f"{pin.upstream}\t{pin.tool}\t{state}\t{pin.hash[:12]}{seen}")
    if not found:
        print("guardrails gateway pins: no tool is pinned in this store", file=sys.stderr)
    return 0


def _diff(store: Any, args: argparse.Namespace) -> int:
    from .pins import pin_of

    pin = pin_of(store, args.upstream, args.tool)
    if pin is None or pin.seen is None or pin.seen_hash is None:
        what = "is not pinned" if pin is None else "has no change waiting"
        print(f"guardrails gateway pins: {args.upstream}/{args.tool} {what}", file=sys.stderr)
        return 1
    lines = difflib.unified_diff(
        _lines(pin.definition),
        _lines(pin.seen),
        fromfile=f"pinned {pin.hash}",
        tofile=f"seen {pin.seen_hash}",
    )
    sys.stdout.writelines(lines)
    return 0


def _approve(store: Any, args: argparse.Namespace) -> int:
    from .pins import approve

    pin = approve(store, args.upstream, args.tool, args.hash)
    print(f"approved {pin.upstream}/{pin.tool} {pin.hash}")
    return 0


def _lines(definition: Mapping[str, Any]) -> list[str]:
    text = json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False)
    return [line + "\n" for line in text.splitlines()]
