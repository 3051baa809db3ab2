"""Literal triggers: forbidden subjects in the user's text. A pre_turn rule.

Terms and text are compared after the removal of invisible characters, NFKC
and casefold (``ＲＥＦＵＮＤ``, ``Refund`` and ``refund`` are one term), and a
disguised word is compared as what it imitates (``rеfund`` with a Cyrillic
``е``; see ``guardrails.confusables``). By default a term matches whole words
only (``refund`` does not match ``refundable``). The text's words are
computed once per turn (``Text``); every form of every word of every term sits
in one set, whose ASCII forms are compiled into a table the compiled core
walks the text against without a Python object per word (``Text.present``,
``guardrails.text._wordscan``; a chunk at a time with ``bytes.split`` and set
lookups on the pure-Python path). A multi-word term (``credit card``)
is indexed by its first word and confirmed by one regular-expression search
only when all its words occur; its words may be separated by anything that is
not a word character. The cost grows with the text, hardly with the number of
terms (see benchmarks/bench_triggers.py).

``word_boundary=False`` matches terms anywhere, inside words too. It uses
``pyahocorasick`` when installed (``pip install 'guardrails-kit[fast]'``) and a
trie-shaped regular expression otherwise, which is several times slower.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..context import GuardResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..text import Text, normalise
from ..text._wordscan import WordTable
from ..text.confusables import MARK, fold, fold_words, match_key
from ..verdicts import ChokePoint, Verdict
from .effects import Restrict

if TYPE_CHECKING:
    from ..middleware._pre_turn_request import PreTurnRequest

__all__ = ["TermSet", "Trigger", "trigger"]

_WORDS = re.compile(r"\w+")


class TermSet:
    """A set of terms compiled once; ``find(text)`` returns the terms found."""

    __slots__ = (
        "_ascii_keys",
        "_keys",
        "_multi",
        "_scan",
        "_single",
        "_substring",
        "terms",
        "word_boundary",
    )

    def __init__(self, terms: Iterable[str], *, word_boundary: bool = True) -> None:
        if isinstance(terms, str):
            raise ConfigurationError("terms must be a list of strings, not one string")
        originals: dict[str, str] = {}
        for term in terms:
            if not isinstance(term, str):
                raise ConfigurationError(f"term {term!r} is not a string")
            key = normalise(term).strip()
            if not key:
                raise ConfigurationError(f"term {term!r} is empty")
            originals.setdefault(key, term)
        self.terms: dict[str, str] = originals  # normalised -> as given
        self.word_boundary = word_boundary
        # Words are UTF-8 bytes, as in Text.word_bytes. Single-word terms: each
        # form the word may take in the text -> the term as given.
        self._single: dict[bytes, list[str]] = {}
        # Multi-word terms by every form of their first word: (the forms of
        # each word, the term as given).
        self._multi: dict[bytes, list[tuple[_Form, str]]] = {}
        self._scan: Any = None
        self._substring: dict[str, str] = {}
        if word_boundary:
            self._compile_words()
        else:
            # A disguised term (a stray look-alike in it) is also looked for folded.
            self._substring = {fold_words(key): term for key, term in originals.items()}
            self._substring.update(originals)
            self._scan = _substring_scanner(list(self._substring))
        # Every form of every word of every term: the one set the text's words
        # are checked against.
        self._keys = frozenset(self._single).union(
            *(alts for forms in self._multi.values() for form, _ in forms for alts in form)
        )
        # The ones an ASCII word of the text can equal: half as many to probe.
        # Compiled for the C scan when the core is built (``guardrails.text._wordscan``).
        self._ascii_keys = WordTable(
            (k for k in self._keys if k.isascii() and k[:1] != _MARK), tracked=self._multi
        )

    def _compile_words(self) -> None:
        for key, original in self.terms.items():
            words = _WORDS.findall(key)
            if not words:
                raise ConfigurationError(
                    f"term {original!r} has no word characters; use word_boundary=False"
                )
            form = tuple(_forms(w) for w in words)
            if len(form) == 1:
                for alt in form[0]:
                    self._single.setdefault(alt, []).append(original)
            else:
                for alt in form[0]:
                    self._multi.setdefault(alt, []).append((form, original))

    def __len__(self) -> int:
        return len(self.terms)

    def find(self, text: str | Text) -> frozenset[str]:
        """The terms (as given) that occur in ``text``."""
        if not isinstance(text, Text):
            text = Text(text)
        if not self.word_boundary:
            found = self._scan(text.normalised)
            if text.folded is not text.normalised:
                found |= self._scan(text.folded)
            return frozenset(self._substring[k] for k in found)
        # Which forms of the terms' words occur at all: C loops of hash lookups.
        present = text.present(self._keys, self._ascii_keys)
        if not present:
            return frozenset()
        single = self._single
        found = {term for w in present if w in single for term in single[w]}
        multi = self._multi
        for first in present.intersection(multi) if multi else ():
            for form, original in multi[first]:
                # Confirmed only when each of its words occurs somewhere; then
                # one regular-expression search finds them in sequence.
                if (
                    original not in found
                    and all(not present.isdisjoint(a) for a in form)
                    and text.has_sequence(form)
                ):
                    found.add(original)
        return frozenset(found)


_MARK = MARK.encode()


# The forms one word of a term may take in Text.word_bytes, most likely first.
_Form = tuple[tuple[bytes, ...], ...]


def _forms(word: str) -> tuple[bytes, ...]:
    """The word as single-script text holds it, and as a disguised (folded) word."""
    folded = fold(word)
    plain = folded if match_key(word) != word else word
    forms = dict.fromkeys((plain, MARK + folded))
    return tuple(f.encode("utf-8", "surrogatepass") for f in forms)


def _substring_scanner(keys: list[str]) -> Any:
    try:
        import ahocorasick
    except ImportError:
        return _regex_scanner(keys)
    automaton = ahocorasick.Automaton()
    for key in keys:
        automaton.add_word(key, key)
    automaton.make_automaton()
    return lambda text: {key for _, key in automaton.iter(text)}


def _regex_scanner(keys: list[str]) -> Any:
    # A lookahead finds, at every position, the longest term starting there;
    # every shorter term found there or inside it is one of its substrings,
    # listed once here, so the result is every term that occurs (as with
    # Aho-Corasick).
    pattern = re.compile(f"(?=({_trie_pattern(keys)}))")
    known = set(keys)
    inside = {
        key: {key[i:j] for i in range(len(key)) for j in range(i + 1, len(key) + 1)} & known
        for key in keys
    }

    def scan(text: str) -> set[str]:
        found: set[str] = set()
        for longest in set(pattern.findall(text)):
            found |= inside[longest]
        return found

    return scan


def _trie_pattern(keys: list[str]) -> str:
    """A regular expression shaped as a trie of ``keys`` (no backtracking between terms)."""
    trie: dict[str, Any] = {}
    for key in keys:
        node = trie
        for ch in key:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        # Longer continuations first, the end of a term ("") last, so the
        # longest term at a position wins; findall then reports it.
        branches = [re.escape(ch) + emit(child) for ch, child in node.items() if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return f"(?:{emit(trie)})"


class Trigger:
    """The rule behind ``trigger``: a callable on a ``PreTurnRequest``."""

    __slots__ = ("refuse", "remove", "terms")

    def __init__(
        self,
        terms: Iterable[str] | TermSet,
        *,
        remove: Iterable[str] = (),
        refuse: str | None = None,
        word_boundary: bool = True,
    ) -> None:
        self.terms = (
            terms if isinstance(terms, TermSet) else TermSet(terms, word_boundary=word_boundary)
        )
        if isinstance(remove, str):
            raise ConfigurationError("trigger: remove must be a list of tool names")
        self.remove = frozenset(remove)
        self.refuse = refuse
        if not self.remove and not refuse:
            raise ConfigurationError("trigger: give the tools to remove, a refusal code, or both")

    def __call__(self, request: PreTurnRequest) -> GuardResult | Verdict:
        found = self.terms.find(request.text)
        if not found:
            return Verdict.PASS
        matched = sorted(found)
        if self.refuse:
            return GuardResult.rejected(self.refuse, evidence={"terms": matched})
        return GuardResult.rejected(
            "forbidden_subject", evidence=Restrict(remove=self.remove, detail={"terms": matched})
        )


def trigger(
    terms: Iterable[str] | TermSet,
    *,
    remove: Iterable[str] = (),
    refuse: str | None = None,
    word_boundary: bool = True,
    name: str = "trigger",
    fail_closed: bool = False,
    observe: bool = False,
) -> Guard:
    """A pre_turn guard: when a term occurs in the user's text, remove tools or refuse.

    ``remove`` names the tools that would act on the subject; ``refuse`` is the
    code the caller shows when the turn is refused instead.
    """
    rule = Trigger(terms, remove=remove, refuse=refuse, word_boundary=word_boundary)
    return Guard(rule, name=name, at=ChokePoint.PRE_TURN, fail_closed=fail_closed, observe=observe)
