"""Composite values by template: literal words and grounded placeholders.

A rule with ``template = "Lunch with {contact}"`` (or a list of templates)
accepts a text value when it is, word for word, one template's literal
words with each placeholder filled by one to ``MAX_SLOT_WORDS`` whole words
that together are a grounded value:

- ``{email}``, ``{url}``, ``{host}``, ``{iban}``, ``{phone}``, or a kind of
  the policy's own: a value of that kind (its normal form) seen in the
  rule's ``grounded_in`` sources;
- ``{text}``: a value seen in ``grounded_in`` as text or as any built-in kind;
- ``{NAME}`` of a group of sources (``[sources.groups] NAME``): a value seen
  in that group's sources, as text or as any built-in kind.

Words are split on whitespace; a literal word matches a value word when
their ``text`` normal forms are equal (punctuation included). A fill that is
not grounded is tried once more without the punctuation at its two edges.
Matching is a walk over (template position, word) pairs, each fill asked
once: bounded by ``MAX_VALUE`` characters, ``MAX_PLACEHOLDERS`` per template.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigurationError
from ._grounding import KINDS, grounded_anywhere
from ._punct import EDGES
from ._seen import Seen
from .custom_kinds import CustomKind
from .kinds import Kind, normalise_text, normaliser

__all__ = [
    "MAX_PLACEHOLDERS",
    "MAX_SLOT_WORDS",
    "MAX_TEMPLATES",
    "MAX_VALUE",
    "Template",
    "placeholder_names",
]

MAX_TEMPLATES = 16
MAX_PLACEHOLDERS = 4  # per template
MAX_SLOT_WORDS = 32  # words one placeholder may take
MAX_VALUE = 512  # characters of a value (longer lines are never labelled whole)
_MAX_CHARS = 500  # characters of one template
_SLOT = re.compile(r"\{([^{}]*)\}")  # the policy's own text, never a value
# The reason codes (``checks.Check`` values; that module imports this one).
_UNKNOWN, _NO_MATCH = "provenance_unknown", "template_not_matched"

# A slot: (the kind's key prefix and normaliser, or None for any text value;
# the source names it is grounded in).
_Slot = tuple[tuple[str, Any] | None, frozenset[str]]
_Token = str | _Slot


def placeholder_names(templates: Iterable[str]) -> list[str]:
    """The names written between braces in ``templates``, in order, once each."""
    return list(dict.fromkeys(m.group(1) for t in templates for m in _SLOT.finditer(t)))


class Template:
    """The template check of one rule, prepared once."""

    __slots__ = ("forms", "need_names")

    def __init__(
        self,
        templates: str | Iterable[str],
        grounded: frozenset[str] | None,
        placeholders: Mapping[str, Any],
    ) -> None:
        given = [templates] if isinstance(templates, str) else list(templates)
        if not given or len(given) > MAX_TEMPLATES:
            raise ConfigurationError(f"template must be 1 to {MAX_TEMPLATES} templates")
        self.forms = tuple(_parse(t, grounded, placeholders) for t in given)
        self.need_names = frozenset(
            name for form in self.forms for t in form if not isinstance(t, str) for name in t[1]
        )

    def failures(self, value: str, seen: Seen | None) -> list[str]:
        """``[]`` when a template matches ``value``; else the reason code."""
        if seen is not None and len(value) <= MAX_VALUE:
            words = value.split()
            memo: dict[tuple[int, int, int], bool] = {}
            if any(_matches(form, words, seen, memo) for form in self.forms):
                return []
        partial = seen.partial & seen.mask_of(self.need_names) if seen is not None else 0
        return [_UNKNOWN if partial else _NO_MATCH]


def _parse(
    text: Any, grounded: frozenset[str] | None, placeholders: Mapping[str, Any]
) -> tuple[_Token, ...]:
    if text.__class__ is not str or not text.strip() or len(text) > _MAX_CHARS:
        raise ConfigurationError(f"template must be text of 1 to {_MAX_CHARS} characters")
    tokens: list[_Token] = []
    for word in text.split():
        slot = _SLOT.fullmatch(word)
        if slot is None:
            if "{" in word or "}" in word:
                raise ConfigurationError(
                    f"template {word!r}: a placeholder is a word of its own, {{NAME}}"
                )
            tokens.append(normalise_text(word))
        else:
            tokens.append(_slot(slot.group(1), grounded, placeholders))
    count = sum(not isinstance(t, str) for t in tokens)
    if not 1 <= count <= MAX_PLACEHOLDERS:
        raise ConfigurationError(
            f"template {text!r} must have 1 to {MAX_PLACEHOLDERS} placeholders"
        )
    return tuple(tokens)


def _slot(name: str, grounded: frozenset[str] | None, placeholders: Mapping[str, Any]) -> _Slot:
    given = placeholders.get(name)
    if isinstance(given, CustomKind) or (given is None and name in {k.value for k in Kind}):
        if grounded is None:
            raise ConfigurationError(
                f"template placeholder {{{name}}} is a kind: the rule needs grounded_in"
            )
        if isinstance(given, CustomKind):
            return (f"{name}\x00", given.normalise), grounded
        if name == Kind.TEXT:
            return None, grounded
        return (f"{name}\x00", normaliser(Kind(name))), grounded
    if given is None:
        raise ConfigurationError(
            f"template placeholder {{{name}}} is neither a kind nor a group of [sources.groups]"
        )
    return None, frozenset(given)


def _matches(
    form: tuple[_Token, ...], words: list[str], seen: Seen, memo: dict[tuple[int, int, int], bool]
) -> bool:
    """Whether ``words`` are ``form``: each position reached once per template token."""
    reach = {0}
    size = len(words)
    for token in form:
        after: set[int] = set()
        if isinstance(token, str):
            after.update(i + 1 for i in reach if i < size and normalise_text(words[i]) == token)
        else:
            for i in sorted(reach):
                for j in range(i + 1, min(size, i + MAX_SLOT_WORDS) + 1):
                    if _filled(token, words, i, j, seen, memo):
                        after.add(j)
        if not after:
            return False
        reach = after
    return size in reach


def _filled(
    slot: _Slot,
    words: list[str],
    i: int,
    j: int,
    seen: Seen,
    memo: dict[tuple[int, int, int], bool],
) -> bool:
    at = (id(slot), i, j)
    known = memo.get(at)
    if known is None:
        fill = " ".join(words[i:j])
        known = _grounded(slot, fill, seen) or (
            (bare := fill.strip(EDGES)) != fill and bool(bare) and _grounded(slot, bare, seen)
        )
        memo[at] = known
    return known


def _grounded(slot: _Slot, fill: str, seen: Seen) -> bool:
    kind, names = slot
    need = seen.mask_of(names)
    if kind is None:
        return grounded_anywhere(fill, seen, need, KINDS)
    prefix, normalise = kind
    norm = normalise(fill)
    return norm is not None and bool(seen.lookup(prefix + norm) & need)
