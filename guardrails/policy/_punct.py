"""The punctuation prose puts around a value: quotes, brackets, sentence marks.

``QUOTES`` is Unicode's Quotation_Mark set (PropList.txt): every kind of
quotation mark, opening and closing. ``WIDE`` is the brackets and sentence
marks of CJK and full-width text, which take no space before the next word.
A value found in text never starts or ends with any of them (``EDGES``); a
link's tail stops at them (``URL_STOPS``), and prose's own marks after a
link are dropped (``strip_trailing``), except a closing bracket that closes
one opened inside the link (``https://en.wikipedia.org/wiki/Mercury_(planet)``).
"""

from __future__ import annotations

__all__ = ["EDGES", "QUOTES", "TRAILING", "URL_STOPS", "WIDE", "strip_trailing"]

QUOTES = (
    "\"'\u00ab\u00bb\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2039\u203a\u2e42"
    "\u300c\u300d\u300e\u300f\u301d\u301e\u301f\ufe41\ufe42\ufe43\ufe44\uff02\uff07\uff62\uff63"
)
WIDE = (
    "\u3001\u3002\u3008\u3009\u300a\u300b\u3010\u3011\u3014\u3015\u3016\u3017\u3018\u3019"
    "\u301a\u301b\uff01\uff08\uff09\uff0c\uff0e\uff1a\uff1b\uff1f\uff3b\uff3d\uff5b\uff5d\uff61\uff64"
    "\u2026\u00a1\u00bf"
)
EDGES = "`.,;:!?()[]{}<>" + QUOTES + WIDE
# Characters a link's tail never holds: ASCII ones a URL must escape
# (RFC 3986), and non-ASCII quotes and wide punctuation.
URL_STOPS = "<>\"'`{}|\\^[]" + QUOTES[2:] + WIDE

_OPENS = {")": "(", "]": "[", "}": "{"}
# What ``strip_trailing`` may take off the end of a link.
TRAILING = ".,;:!?)]}" + QUOTES + WIDE


def strip_trailing(url: str) -> str:
    """``url`` without the punctuation after it, keeping brackets it opened itself."""
    bare = url.rstrip(TRAILING)
    if len(bare) == len(url):
        return url
    # Give back closing brackets, left to right, while each closes one opened inside.
    balance = {close: bare.count(open_) - bare.count(close) for close, open_ in _OPENS.items()}
    end = len(bare)
    for char in url[len(bare) :]:
        if balance.get(char, 0) <= 0:
            break
        balance[char] -= 1
        end += 1
    return url[:end]
