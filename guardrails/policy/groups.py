"""Named groups of sources: ``[sources.groups]``, used as ``"@NAME"`` in ``grounded_in``.

::

    [sources.groups]
    directory = ["user", "list_contacts.email", "search_people.email"]

    [tools.send_mail.params.to]
    grounded_in = ["@directory", "context"]

A group is a list of sources (never another group), read when the file is
loaded: each ``"@NAME"`` becomes the group's sources, so a rule holds plain
source names and a group is local to its file. Its members are checked
against the tools like any source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ._policy_error import PolicyError

__all__ = ["GROUP", "check_group", "expand"]

GROUP = "@"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_group(origin: str, name: str, members: list[str]) -> tuple[str, ...]:
    """A group's members, or ``PolicyError`` naming ``[sources.groups] NAME``."""
    if not _NAME.fullmatch(name):
        raise PolicyError(
            origin, "sources.groups", name, "a group name is 1 to 64 letters, digits, _ or -"
        )
    if not members:
        raise PolicyError(origin, "sources.groups", name, "must name at least one source")
    nested = [m for m in members if m.startswith(GROUP)]
    if nested:
        raise PolicyError(
            origin, "sources.groups", name, f"{nested[0]!r}: a group holds sources, not groups"
        )
    return tuple(members)


def expand(
    origin: str, table: str, key: str, names: Iterable[str], groups: Mapping[str, tuple[str, ...]]
) -> list[str]:
    """``names`` with each ``"@NAME"`` replaced by its group's sources."""
    out: list[str] = []
    for name in names:
        if not name.startswith(GROUP):
            out.append(name)
            continue
        members = groups.get(name[len(GROUP) :])
        if members is None:
            known = sorted(groups)
            raise PolicyError(
                origin,
                table,
                key,
                f"unknown group {name!r}; [sources.groups] defines {known}",
            )
        out.extend(members)
    return list(dict.fromkeys(out))
