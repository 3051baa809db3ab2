"""Phrases of the user's text: the multi-word values it names.

A text argument is matched whole, so a name of several words the user typed
(a hotel, a restaurant, a channel) grounds it only when picked out as one
value. Two kinds of span are, in the user's input and the context's strings
only (trusted text; never a tool's result):

- a **quoted span**: the text between a pair of quotation marks on one line,
  1 to 200 characters: ``"..."``, ``“...”``, ``„...“``, ``«...»``, ``‹...›``,
  ``「...」``, ``『...』``, ``‘...’``, and ``'...'`` when the opening mark
  starts a word (after the start, a space or a bracket) and the closing one
  ends it (before the end, a space or punctuation);
- a **run of capitalised words**: two or more words in a row, on one line,
  each starting with an upper-case letter or a digit (``Room 4B``,
  ``10 Downing Street``), joined by single spaces, with
  these lower-case words allowed between two of them: ``of``, ``the``,
  ``and``, ``de``, ``del``, ``la``, ``le``, ``du``, ``da``, ``di``, ``van``,
  ``von``, ``der``, ``&``. A word ending in ``, ; : . ! ?`` ends the run (the
  mark dropped). Every part of a run of two to eight words that starts and
  ends with a capitalised word counts, so the verb that starts a sentence
  (``Book Luigi's Trattoria``) does not hide the name.

Each span is labelled in the ``text`` normal form. Every scan reads each
character a bounded number of times (linear in the text).
"""

from __future__ import annotations

from .kinds import normalise_text

__all__ = ["MAX_PHRASE", "MAX_RUN", "phrases"]

MAX_PHRASE = 200  # characters of a quoted span
MAX_RUN = 8  # words of a part of a capitalised run
_PAIRS = {
    '"': '"',
    "“": "”",
    "„": "“",
    "«": "»",
    "‹": "›",
    "「": "」",
    "『": "』",
    "‘": "’",
}
_JOINERS = frozenset(
    {"of", "the", "and", "de", "del", "la", "le", "du", "da", "di", "van", "von", "der", "&"}
)
_ENDS = ",;:.!?"
_EDGE = "([{"


def phrases(text: str) -> set[str]:
    """The text keys of the quoted spans and capitalised runs of ``text``."""
    found: set[str] = set()
    if text.__class__ is not str:  # a str subclass: its characters, none of its methods
        text = str.__add__(text, "") if isinstance(text, str) else ""
    for line in str.splitlines(text):
        _quoted(line, found)
        _apostrophes(line, found)
        _runs(line, found)
    found.discard("")
    return found


def _add(span: str, found: set[str]) -> None:
    if 0 < len(span) <= MAX_PHRASE:
        found.add(normalise_text(span))


def _quoted(line: str, found: set[str]) -> None:
    for opening, closing in _PAIRS.items():
        at = line.find(opening)
        while at != -1:
            end = line.find(closing, at + 1)
            if end == -1:
                break  # no closing mark later on the line: none for any later opening
            _add(line[at + 1 : end], found)
            at = line.find(opening, end + 1)


def _apostrophes(line: str, found: set[str]) -> None:
    at = line.find("'")
    while at != -1:
        if at == 0 or line[at - 1].isspace() or line[at - 1] in _EDGE:
            end = at + 1
            while True:
                end = line.find("'", end)
                if end == -1:
                    return
                after = line[end + 1 : end + 2]
                if not after or after.isspace() or after in _ENDS or after in ")]}":
                    break
                end += 1
            _add(line[at + 1 : end], found)
            at = line.find("'", end + 1)
        else:
            at = line.find("'", at + 1)


_OPEN = "\"“„«‹「『‘'([{"
_CLOSE = "\"”“»›」』’')]}"


def _runs(line: str, found: set[str]) -> None:
    run: list[str] = []  # the words of the current run, marks stripped
    for word in line.split(" "):
        if word[:1] in _OPEN:  # an opening mark starts a run of its own
            _parts(run, found)
            run = []
        bare = word.lstrip(_OPEN).rstrip(_ENDS + _CLOSE)
        ends = len(bare) < len(word.lstrip(_OPEN))
        if _capital(bare) or (run and bare in _JOINERS and not ends):
            run.append(bare)
        else:
            _parts(run, found)
            run = []
            continue
        if ends:
            _parts(run, found)
            run = []
    _parts(run, found)


def _parts(run: list[str], found: set[str]) -> None:
    """Every part of two to ``MAX_RUN`` words that starts and ends capitalised."""
    for start, first in enumerate(run):
        if not _capital(first):
            continue
        for stop in range(start + 1, min(start + MAX_RUN, len(run))):
            if _capital(run[stop]):
                _add(" ".join(run[start : stop + 1]), found)


def _capital(word: str) -> bool:
    """A word that may start or end a run: a capital, or a digit (``4B``, ``10``)."""
    head = word[:1]
    return head.isupper() or head.isdigit()
