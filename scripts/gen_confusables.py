r"""Regenerate ``guardrails/text/_confusables.json`` from ICU's UTS #39 data.

Source: ICU's ``SpoofChecker.getSkeleton`` (Unicode's confusables.txt as ICU
compiles it) and ICU's Script_Extensions, through PyICU. PyICU builds against
the system ICU: on Debian, ``apt-get install libicu-dev pkg-config g++`` then
``pip install pyicu``. A newer ICU gives newer Unicode data; run this script
again after upgrading it and commit the result (never edit the JSON by hand).

    python scripts/gen_confusables.py            # writes the file
    python scripts/gen_confusables.py --check    # exits 1 if it would change

What is written, for characters outside ASCII only (ASCII is what look-alikes
imitate, and is never folded: ``m``/``rn`` or ``0``/``o`` in plain ASCII text
are ordinary spelling, not an attack):

- ``fold``: character -> the text it folds to. A character is listed when it
  is a word character (``\w``), its own normal form (NFKC + casefold, as
  ``guardrails.text.normalise`` leaves it), and its skeleton differs from it.
  When its skeleton is the skeleton of an ASCII word character, it folds to
  that character (Cyrillic ``е`` -> ``e``; a look-alike of ``m``, whose
  skeleton is ``rn``, -> ``m``); otherwise to the normal form of its skeleton.
- ``uncommon``: the characters of ``fold`` that UTS #39 lists neither as
  Recommended nor as Inclusion (in modern use in no language: small capitals,
  phonetic letters such as ``ɑ`` and ``ɡ``). A word holding one is a disguise even when
  all its letters are of one script.
- ``scripts``: ranges ``[first, last, "Latn"]`` of code points and their
  Script_Extensions (short names, space-separated). Code points not listed
  are Common, Inherited or unassigned: they go with any script.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
import unicodedata
from pathlib import Path

import icu

OUT = Path(__file__).resolve().parent.parent / "guardrails" / "text" / "_confusables.json"
_ANY = {"Zyyy", "Zinh", "Zzzz"}
_WORD = re.compile(r"\w")
# Preferred targets first: letters, then digits and underscore.
_ASCII = string.ascii_lowercase + string.digits + "_"


def _normalise(text: str) -> str:
    # As guardrails.text.normalise, without importing the package (its own
    # invisible-character set is removed there before folding, and none of
    # those characters is listed here: they are not word characters).
    return unicodedata.normalize("NFKC", text).casefold()


def _is_char(cp: int) -> bool:
    return not (0xD800 <= cp <= 0xDFFF) and unicodedata.category(chr(cp)) != "Cn"


def fold_table(checker: icu.SpoofChecker) -> dict[str, str]:
    def skeleton(text: str) -> str:
        return str(checker.getSkeleton(0, text))

    by_skeleton: dict[str, str] = {}
    for ch in _ASCII:
        by_skeleton.setdefault(skeleton(ch), ch)
    table: dict[str, str] = {}
    for cp in range(0x80, 0x110000):
        if not _is_char(cp):
            continue
        ch = chr(cp)
        if _normalise(ch) != ch or not _WORD.fullmatch(ch):
            continue  # never part of a normalised word
        sk = skeleton(ch)
        target = by_skeleton.get(sk) or _normalise(sk)
        if target != ch and not any(c.isspace() for c in target):
            table[ch] = target
    # One pass must be enough: fold(fold(x)) == fold(x).
    for ch, target in list(table.items()):
        for _ in range(4):
            again = _normalise("".join(table.get(c, c) for c in target))
            if again == target:
                break
            target = again
        table[ch] = target
    return dict(sorted(table.items()))


def script_ranges() -> list[list[object]]:
    ranges: list[list[object]] = []
    for cp in range(0x110000):
        codes = icu.Script.getScriptExtensions(cp)
        names = sorted({icu.Script(c).getShortName() for c in codes} - _ANY)
        key = " ".join(names)
        if not key:
            continue
        if ranges and ranges[-1][1] == cp - 1 and ranges[-1][2] == key:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, key])
    return ranges


def uncommon(fold: dict[str, str]) -> str:
    """The look-alikes that no language writes today (not Recommended nor Inclusion in UTS #39)."""
    common = icu.UnicodeSet(icu.SpoofChecker.getRecommendedUnicodeSet())
    common.addAll(icu.SpoofChecker.getInclusionUnicodeSet())
    return "".join(ch for ch in fold if not common.contains(ch))


def build() -> str:
    fold = fold_table(icu.SpoofChecker())
    data = {
        "source": f"ICU {icu.ICU_VERSION} (Unicode {icu.UNICODE_VERSION}) via PyICU {icu.VERSION}",
        "fold": fold,
        "uncommon": uncommon(fold),
        "scripts": script_ranges(),
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), indent=0) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file would change")
    args = parser.parse_args()
    text = build()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        return 0 if current == text else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
