"""Addresses and links found in text: emails, URLs with a scheme, hosts written bare.

Each scan finds its anchor with a pattern that starts with a literal (``@``,
``://``, a dot between a host character and a letter) and reads only that
anchor's token; a run already read is skipped. The links of one run of
link characters are read so that their characters add up to at most twice
the run (``links``). See docs/policy.md, "What is found in text".
"""

from __future__ import annotations

import re

from ._punct import TRAILING, URL_STOPS, strip_trailing
from ._scan import EMAIL, HOST, URL, Scan, run_end
from .kinds import domain_of, normalise_email, split_url

__all__ = ["emails", "hosts", "links"]


def _email_keys(candidate: str) -> tuple[str, ...]:
    address = normalise_email(candidate)
    return () if address is None else (EMAIL + address, HOST + domain_of(address))


def _url_keys(candidate: str) -> tuple[str, ...]:
    parts = split_url(candidate)
    return () if parts is None else (URL + parts[2], HOST + parts[1])


def _sentence_cut(host: str) -> str | None:
    """``host`` without a capitalised word run into it after a lower-case top label.

    ``www.example.com.They`` is ``www.example.com`` followed by a sentence
    that lacks its space; both spellings are kept.
    """
    rest, dot, last = host.rpartition(".")
    if not dot or not last.isascii() or not last.isalpha() or not last[0].isupper():
        return None
    if not last[1:].islower() and last[1:]:
        return None
    top = rest.rpartition(".")
    if not top[1] or not top[2].isascii() or not top[2].isalpha() or not top[2].islower():
        return None
    return rest


# The characters RFC 5322 allows in a local part, less "/", "=", "?" and "&",
# which in text separate a path, a key or a query from an address.
_LOCAL_CHARS = r"\w.!#$%'*+^`{|}~-"
# Read back from the "@", at most as far as 64 characters and as many
# opening marks before them: a run that reaches the bound is too long.
_LOCAL_REV = re.compile(f"[{_LOCAL_CHARS}]{{1,129}}")
# Quotes, brackets and dots that open an address in prose: not part of it.
_LOCAL_OPENERS = "'`{|}."
_AT = re.compile(f"@(?<=[{_LOCAL_CHARS}]@)(?=[\\w-]{{1,63}}\\.[\\w-])")
_DOMAIN = re.compile(r"[\w-]{1,63}(?:\.[\w-]{1,63})+")


def emails(scan: Scan) -> None:
    """Addresses: a local part, an ``@`` and a domain, read back and forth from the ``@``."""
    text = scan.text
    for anchor in _AT.finditer(text):
        at = anchor.start()
        run = scan.left(_LOCAL_REV, at)
        local = text[at - run : at].lstrip(_LOCAL_OPENERS)
        domain = _DOMAIN.match(text, at + 1)
        if run == 129 or not 0 < len(local) <= 64 or domain is None:
            continue
        end = domain.end()
        if scan.joined_after(end) or text[end : end + 1] == "@":
            continue  # a label longer than 63, or more of one token
        host = domain.group()
        scan.add(f"{local}@{host}", _email_keys)
        cut = _sentence_cut(host)
        if cut is not None:
            scan.add(f"{local}@{cut}", _email_keys)


_URL_TAIL = re.compile(f"[^\\s{re.escape(URL_STOPS)}]+")
# "://" after a scheme character and before a letter or digit.
_SCHEME_AT = re.compile(r"://(?<=[A-Za-z0-9+.-]://)(?=\w)")
_SCHEME_REV = re.compile(r"[A-Za-z0-9+.-]{1,33}")
_SCHEME_LEAD = "0123456789+.-"


def links(scan: Scan) -> None:
    """Links with a scheme, each read once from its scheme to where it ends.

    A run of link characters may hold several links (``https://a.example/?u=
    https://b.example/x``): the first spans the run, and each later one ends
    where the next one's scheme begins, or at the run's end.
    """
    text = scan.text
    anchors = [m.start() for m in _SCHEME_AT.finditer(text)]
    runs = [at - scan.left(_SCHEME_REV, at) for at in anchors]
    stop = -1  # where the current run of link characters ends
    for i, at in enumerate(anchors):
        if at >= stop:
            tail = _URL_TAIL.match(text, at + 3)
            stop = at + 3 if tail is None else tail.end()
            end = stop
        else:
            end = runs[i + 1] if i + 1 < len(anchors) and anchors[i + 1] < stop else stop
        start = runs[i]
        scheme_start = at - len(text[start:at].lstrip(_SCHEME_LEAD))
        if at - start > 32 or scheme_start == at or scan.joined_before(start):
            continue
        _found_link(scan, text[scheme_start:end], at - scheme_start + 3)


def _found_link(scan: Scan, link: str, host_at: int) -> None:
    """A link found (its host starts at ``host_at``), and the link without a sentence run into it."""
    if link[-1] in _TRAILING:
        link = strip_trailing(link)
    scan.add(link, _url_keys)
    dot = link.rfind(".")
    if dot <= host_at or not link[dot + 1 : dot + 2].isupper():
        return
    authority = link[host_at:]
    if any(c in authority for c in "/?#:@"):
        return  # a path, a port or user information: no sentence ran into the host
    cut = _sentence_cut(authority)
    if cut is not None:
        scan.add(link[:host_at] + cut, _url_keys)


# A bare host (``example.org/news``) is anchored on a dot between a host
# character and a letter, which prose rarely has (a sentence's dot is
# followed by a space).
_DOT_LETTER = re.compile(r"\.(?<=[A-Za-z0-9-]\.)[A-Za-z]")
_HOST_REV = re.compile(r"[A-Za-z0-9.-]{1,254}")
_HOST_RUN = re.compile(r"[A-Za-z0-9.-]*")
_NOT_BEFORE_HOST = "@/:._-"
_TRAILING = frozenset(TRAILING)


def hosts(scan: Scan) -> None:
    """Hosts written without a scheme, with their path: each run of host characters once."""
    text = scan.text
    size = scan.size
    pos = 0
    while (anchor := _DOT_LETTER.search(text, pos)) is not None:
        dot = anchor.start()
        start = dot - scan.left(_HOST_REV, dot)
        end = pos = run_end(_HOST_RUN, text, dot)
        if dot - start > 253 or text[start] in ".-":
            continue
        before = text[start - 1] if start else " "
        if before.isalnum() or before in _NOT_BEFORE_HOST:
            continue  # part of a word, an address or a link
        after = text[end] if end < size else " "
        if after.isalnum() or after in "_@":
            continue  # the local part of an address, or part of a word
        if after == "/" and text[end - 1] != ".":
            tail = _URL_TAIL.match(text, end)
            end = pos = end if tail is None else tail.end()
        _found_link(scan, text[start:end], 0)
