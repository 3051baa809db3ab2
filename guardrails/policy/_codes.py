"""IBANs and phone numbers found in text, read in its shape.

The shape of a text (``SHAPE``) has ASCII letters as ``a`` and digits as
``0``: IBANs are anchored on ``aa00`` (``str.find``), phone numbers on a
digit; each is read as a whole token and put through its kind's normaliser.
"""

from __future__ import annotations

import re

from ._scan import IBAN, PHONE, Scan
from .kinds import IBAN_LENGTHS, normalise_iban, normalise_phone

__all__ = ["SHAPE", "ibans", "phones"]


def _iban_keys(candidate: str) -> tuple[str, ...]:
    iban = normalise_iban(candidate)
    return () if iban is None else (IBAN + iban,)


def _phone_keys(candidate: str) -> tuple[str, ...]:
    number = normalise_phone(candidate)
    return () if number is None else (PHONE + number,)


# ASCII letters as ``a``, digits as ``0``, the separators IBANs and phone
# numbers allow kept, every other ASCII character ``_``; the rest as it is.
SHAPE = str.maketrans(
    {
        **{chr(c): "_" for c in range(128)},
        **{chr(c): "a" for c in range(65, 91)},
        **{chr(c): "a" for c in range(97, 123)},
        **{chr(c): "0" for c in range(48, 58)},
        **{c: c for c in " ().-/+"},
    }
)
_IBAN_BODY = {n: re.compile(f"(?:[ -]?[a0]){{{n - 4}}}") for n in set(IBAN_LENGTHS.values())}
# Outside the registry (15 to 34 characters): unbroken, or in groups of four.
_IBAN_RUN = re.compile(r"[a0]{11,30}")
_IBAN_GROUPS = re.compile(r"(?:[ -][a0]{4}){0,6}([ -][a0]{4})(?:([ -][a0]{1,3}))?")
_PHONE_SHAPE = re.compile(r"0[0 ().\/-]{5,22}0")
_WORDISH = frozenset("a0")


def ibans(scan: Scan, shape: str) -> None:
    """IBANs, spaced or not: two letters and two digits no letter or digit precedes."""
    text = scan.text
    # str.find, not a pattern: re's search for a literal prefix is slow when
    # its characters ("a") are everywhere.
    at = shape.find("aa00")
    while at != -1:
        after = at + 1
        if not (at and shape[at - 1] in _WORDISH) and not scan.joined_before(at):
            length = IBAN_LENGTHS.get(text[at : at + 2].upper())
            for end in _iban_ends(shape, at, length):
                # The token ends there: an IBAN is not the start of a longer code.
                if not scan.joined_after(end) and scan.add(text[at:end], _iban_keys):
                    # Nor is a group of a spaced IBAN the start of another.
                    after = max(after, end)
        at = shape.find("aa00", after)


def _iban_ends(shape: str, at: int, length: int | None) -> list[int]:
    """Where an IBAN starting at ``at`` may end (each one whose checksum holds is found).

    A registered country's IBAN has its length, spaced in any grouping. Any
    other is unbroken, or printed in groups of four with a shorter last
    group, which may be a word after it (then the IBAN ends one group before).
    """
    if length is not None:
        body = _IBAN_BODY[length].match(shape, at + 4)
        return [] if body is None else [body.end()]
    ends = []
    run = _IBAN_RUN.match(shape, at + 4)
    if run is not None:
        ends.append(run.end())
    groups = _IBAN_GROUPS.match(shape, at + 4)
    if groups is not None:
        ends.append(groups.end())
        last = max(groups.start(1), groups.start(2))
        if last - at >= 15:
            ends.append(last)
    return ends


def phones(scan: Scan, shape: str) -> None:
    for match in _PHONE_SHAPE.finditer(shape):
        start, end = match.span()
        if start and shape[start - 1] in "+(":
            start -= 1
        if not scan.joined_before(start) and not scan.joined_after(end):
            scan.add(scan.text[start:end], _phone_keys)
