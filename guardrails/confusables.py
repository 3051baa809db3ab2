"""Look-alike characters: ``guardrails.text.confusables``, at the path it had before."""

from .text.confusables import (
    MARK,
    FoldData,
    data,
    disguises,
    fold,
    fold_words,
    has_lookalikes,
    is_mixed_script,
    lookalike_words,
    match_key,
)

__all__ = [
    "MARK",
    "FoldData",
    "data",
    "disguises",
    "fold",
    "fold_words",
    "has_lookalikes",
    "is_mixed_script",
    "lookalike_words",
    "match_key",
]
