"""Literal triggers: MB/s of ``TermSet.find`` at 10, 1,000 and 10,000 terms over 100 KB and 1 MB.

Each operation is one whole scan as pre_turn does it: normalise the text
(NFKC + casefold), split it into words, match every term. The floor is one
``str.lower()`` pass over the same text: no matcher can be faster than reading
the text once. The text is English-like (ASCII words, capitals, punctuation);
other rows use text with non-ASCII characters: a curly quote, dash or accent
every 10 KB; accents and full-width letters throughout; and "mixed", where
one word in five is Portuguese, Spanish, German, Russian or Chinese/Japanese
(10,000 such words drawn uniformly: a pessimistic vocabulary). "mixed" is
timed warm (the memo of normalised tokens filled by earlier scans, as in a
service), cold (memo emptied before each scan), and cold with look-alike
folding switched off: the difference is what folding costs. pyahocorasick
rows match the same terms as whole words over the same normalised words
(``Text.word_bytes``), so they do the same work. The words are looked up by
the compiled core's scan when it is built; "pure" rows time the pure-Python
path (as with ``GUARDRAILS_PURE=1``) in the same run.
``word_boundary=False`` rows use pyahocorasick when it is installed and a
trie-shaped regular expression otherwise (see the ``note`` column).

Run: ``python benchmarks/run.py --only bench_triggers`` (add ``--quick``);
``python benchmarks/bench_triggers.py --cpu`` times the 1 MB cases by the
process's CPU time instead of the wall clock (steadier on a shared machine).
"""

from __future__ import annotations

import random
import re
import statistics
import string
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import budget, per_op_ns, row

import guardrails.text as text_module
from guardrails.rules import TermSet
from guardrails.text import Text

GROUP = "pre_turn triggers"
SIZES = {"100KB": 100_000, "1MB": 1_000_000}
TERM_COUNTS = (10, 1_000, 10_000)


def _vocabulary(rng: random.Random, count: int) -> list[str]:
    letters = string.ascii_lowercase
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(count)]


def _text(rng: random.Random, words: list[str], size: int, accented: bool = False) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(words)
        roll = rng.random()
        if roll < 0.08:
            word = word.capitalize() + ","
        elif roll < 0.12:
            word += "."
        elif accented and roll < 0.2:
            word = word.replace("e", "é").upper() if roll < 0.16 else "ＲＥＦＵＮＤ" + word
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


# Letters that make words of each language, accented or in another script.
_SCRIPTS = {
    "pt": ("abcdefgilmnoprstuv", "ãõáéêíóôúç", ("ção", "ões", "ão")),
    "es": ("abcdefgilmnoprstuv", "áéíóúñü", ("ción", "ño", "¿", "¡")),
    "de": ("abcdefghiklmnorstuwz", "äöüß", ("sch", "ß")),
    "ru": ("абвгдеёжзийклмнопрстуфхцчшщыьэюя", "", ()),
    "cjk": (
        "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可",
        "のはをにがでとたしてるいうかなアイウエオカキク",
        (),
    ),
}


def _foreign_words(rng: random.Random, per_language: int) -> list[str]:
    """Words of Portuguese, Spanish, German, Russian and Chinese/Japanese shape.

    Every word holds at least one non-ASCII character; capitals and the
    Spanish opening marks come as in real text.
    """
    out: list[str] = []
    for language, (letters, marks, extras) in _SCRIPTS.items():
        for _ in range(per_language):
            if language == "cjk":
                word = "".join(rng.choices(letters + marks, k=rng.randint(2, 4)))
                if word.isascii():
                    word += rng.choice(letters)
            else:
                body = rng.choices(letters, k=rng.randint(3, 9))
                if marks:
                    body[rng.randrange(len(body))] = rng.choice(marks)
                word = "".join(body)
                if extras and rng.random() < 0.3:
                    extra = rng.choice(extras)
                    word = extra + word if extra in "¿¡" else word + extra
                if rng.random() < 0.2:
                    word = word.capitalize()
            out.append(word)
    return out


def _mixed_text(rng: random.Random, words: list[str], foreign: list[str], size: int) -> str:
    """English-like text in which one word in five is one of ``foreign``."""
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(foreign) if rng.random() < 0.2 else rng.choice(words)
        roll = rng.random()
        if roll < 0.08:
            word = word.capitalize() + ","
        elif roll < 0.12:
            word += "."
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


def _terms(rng: random.Random, count: int) -> list[str]:
    # Terms drawn from another vocabulary, so they rarely occur: the common case
    # (nothing forbidden) is the one that must stay fast. One in ten is two words.
    pool = _vocabulary(rng, count * 2)
    return [f"{pool[i]} {pool[-i - 1]}" if i % 10 == 9 else pool[i] for i in range(count)]


def _substring_note() -> str:
    try:
        import ahocorasick  # noqa: F401
    except ImportError:
        return "trie regex (pyahocorasick not installed)"
    return "pyahocorasick"


def _pyahocorasick(terms: TermSet) -> Any:
    """pyahocorasick over the same normalised words: whole words as `` word `` patterns.

    The text is normalised as the library does (``Text.word_bytes``, decoded:
    pyahocorasick takes ``str``) and padded so that every word has a space on
    both sides; adjacent words share a space, so overlapping matches are
    reported. None when pyahocorasick is not installed.
    """
    try:
        import ahocorasick
    except ImportError:
        return None
    automaton = ahocorasick.Automaton()
    for key in terms.terms:
        words = " ".join(re.findall(r"\w+", key))
        automaton.add_word(f" {words} ", key)
    automaton.make_automaton()

    def find(raw: str) -> set[str]:
        words = Text(raw).word_bytes.decode("utf-8", "surrogatepass")
        return {key for _, key in automaton.iter(f" {words} ")}

    return find


def _pure(terms: list[str]) -> TermSet | None:
    """``TermSet(terms)`` on the pure-Python path (as with ``GUARDRAILS_PURE=1``),
    or None when this version of the library has no compiled word scan."""
    try:
        import guardrails.text._wordscan as wordscan
    except ImportError:
        return None
    saved = wordscan.CORE
    wordscan.CORE = None
    try:
        return TermSet(terms)
    finally:
        wordscan.CORE = saved


def _memo() -> Any:
    """The module holding the memo of normalised tokens and the call that folds.

    (This file also times older versions of the library, where both were in
    ``guardrails.text`` and folding was asked of ``has_lookalikes``.)
    """
    try:
        import guardrails.text._normal as normal_module
    except ImportError:
        return text_module, "has_lookalikes", lambda _text: False
    return normal_module, "disguises", lambda _words: {}


def _cold(find: Any, text: str) -> Any:
    """``find(text)`` with the memo of normalised non-ASCII tokens emptied first."""
    module, _, _ = _memo()

    def run() -> Any:
        module._KNOWN.clear()
        return find(text)

    return run


def _no_folding(find: Any, text: str) -> Any:
    """``find(text)``, cold, with look-alike folding switched off: what folding costs."""
    module, name, off = _memo()

    def run() -> Any:
        module._KNOWN.clear()
        saved = getattr(module, name)
        setattr(module, name, off)
        try:
            return find(text)
        finally:
            setattr(module, name, saved)

    return run


Cases = tuple[dict[str, Any], dict[str, int], dict[str, str]]


def _cases() -> Cases:
    """The cases (zero-argument callables), the bytes each reads, and notes."""
    rng = random.Random(20_261_129)
    words = _vocabulary(rng, 50_000)
    texts = {label: _text(rng, words, size) for label, size in SIZES.items()}
    accented = _text(rng, words, SIZES["1MB"], accented=True)
    # English with the odd curly quote and dash: one non-ASCII character per 10 KB.
    plain = texts["1MB"]
    curly = "".join(
        plain[i : i + 10_000] + (" “quoted” — " if i % 20_000 else " café ")
        for i in range(0, len(plain), 10_000)
    )
    # One word in five Portuguese, Spanish, German, Russian or Chinese/Japanese.
    mixed = _mixed_text(rng, words, _foreign_words(rng, 2_000), SIZES["1MB"])
    drawn = {n: _terms(rng, n) for n in TERM_COUNTS}
    sets = {n: TermSet(drawn[n]) for n in TERM_COUNTS}
    pure = _pure(drawn[10_000])
    # Substring mode is slower without pyahocorasick: 100 KB only.
    substring = {n: TermSet(_terms(rng, n), word_boundary=False) for n in TERM_COUNTS}
    note = _substring_note()
    big = sets[10_000]
    aho = _pyahocorasick(big)

    cases: dict[str, Any] = {}
    sizes: dict[str, int] = {}
    notes: dict[str, str] = {}

    def case(name: str, fn: Any, text: str, note: str = "") -> None:
        cases[name] = fn
        sizes[name] = len(text.encode("utf-8"))
        if note:
            notes[name] = note

    for label, text in texts.items():
        case(f"floor: str.lower() {label}", lambda t=text: t.lower(), text)
        for n, terms in sets.items():
            case(f"words, {n:,} terms, {label}", lambda ts=terms, t=text: ts.find(t), text)
    case(
        "words, 10,000 terms, 1MB non-ASCII",
        lambda: big.find(accented),
        accented,
        "accents and full-width letters throughout",
    )
    case(
        "words, 10,000 terms, 1MB mostly ASCII",
        lambda: big.find(curly),
        curly,
        "a curly quote, dash or accent every 10 KB",
    )
    fifth = "1 word in 5 pt/es/de/ru/zh-ja"
    case("words, 10,000 terms, 1MB mixed", lambda: big.find(mixed), mixed, fifth)
    # (Guarded, so that this file can also time an older version of the library.)
    if hasattr(_memo()[0], "_KNOWN"):
        case(
            "words, 10,000 terms, 1MB mixed, cold",
            _cold(big.find, mixed),
            mixed,
            fifth + "; memo of normalised tokens emptied before each scan",
        )
        case(
            "words, 10,000 terms, 1MB mixed, cold, no folding",
            _no_folding(big.find, mixed),
            mixed,
            fifth + "; as cold, look-alike folding switched off",
        )
    if pure is not None:
        on_pure = "pure-Python path (GUARDRAILS_PURE=1)"
        case("words, 10,000 terms, 1MB, pure", lambda: pure.find(plain), plain, on_pure)
        case(
            "words, 10,000 terms, 1MB mixed, cold, pure",
            _cold(pure.find, mixed),
            mixed,
            fifth + "; memo emptied; " + on_pure,
        )
    if aho is not None:
        case(
            "pyahocorasick, 10,000 terms, 1MB",
            lambda: aho(plain),
            plain,
            "same normalised words, whole words",
        )
        case(
            "pyahocorasick, 10,000 terms, 1MB mixed",
            lambda: aho(mixed),
            mixed,
            fifth + "; same normalised words, whole words",
        )
    for n, terms in substring.items():
        case(
            f"substring, {n:,} terms, 100KB",
            lambda ts=terms: ts.find(texts["100KB"]),
            texts["100KB"],
            note,
        )
    # A compiled alternation of the terms, the usual first attempt, for scale.
    alternation = re.compile("|".join(map(re.escape, sorted(sets[1_000].terms, key=len))))
    case(
        "regex alternation, 1,000 terms, 100KB",
        lambda: alternation.findall(texts["100KB"].lower()),
        texts["100KB"],
        "reference, not used by the library",
    )

    return cases, sizes, notes


def run(quick: bool = False) -> list[dict[str, Any]]:
    cases, sizes, notes = _cases()
    samples = per_op_ns(cases, budget(quick))
    rows = []
    for name, values in samples.items():
        median_ns = statistics.median(values)
        floor_ns = statistics.median(
            samples["floor: str.lower() 1MB" if "1MB" in name else "floor: str.lower() 100KB"]
        )
        rows.append(
            row(
                GROUP,
                name,
                median_ns / 1e3,
                mb_per_s=round(sizes[name] / 1e6 / (median_ns / 1e9), 1),
                ratio=round(median_ns / floor_ns, 1),
                rounds=len(values),
                **({"note": notes[name]} if name in notes else {}),
            )
        )
    return rows


def cpu_table(rounds: int = 21) -> str:
    """MB/s by the process's CPU time (median of interleaved rounds), as a Markdown table.

    On a shared machine wall-clock medians move with other work; the CPU
    time this process spends moves much less (cache sharing still shows).
    """
    cases, sizes, _ = _cases()
    cases = {k: v for k, v in cases.items() if "1MB" in k}
    for fn in cases.values():
        fn()  # warm-up, as per_op_ns does
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.process_time()
            fn()
            samples[name].append(time.process_time() - start)
    lines = ["| case | CPU ms | MB/s (CPU) |", "| --- | ---: | ---: |"]
    for name, values in samples.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median * 1e3:,.2f} | {sizes[name] / 1e6 / median:,.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--cpu" in sys.argv:
        print(cpu_table())
    else:
        for r in run(quick="--quick" in sys.argv):
            print(f"{r['name']:<52} {r['median_us']:>12.1f} µs {r['mb_per_s']:>8.1f} MB/s")
