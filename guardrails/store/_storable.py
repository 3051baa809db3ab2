"""Make any audit row storable: every column becomes a value SQLite and PostgreSQL accept.

A row is built from what the model sent (tool names, call ids) and what guards
returned (reasons), so a column may hold a lone surrogate, a NUL, a megabyte,
a ``str`` subclass with hostile methods, or no string at all. ``storable``
rewrites each column deterministically and lists what it did in ``altered``
(JSON: column -> actions), so the row is written and the change is visible:

- text: a ``str`` subclass is read as plain ``str`` (none of its methods run);
  lone surrogates become ``\\udXXX`` and NUL becomes ``\\x00`` (``escaped``);
  past ``TEXT_LIMIT`` (``JSON_LIMIT`` for JSON and error columns) the value is
  cut (``truncated``); a value that is not text becomes ``<not text: Type>``
  (``not_text``);
- numbers: anything but an ``int`` (``float`` for ``at`` and ``cost``) becomes
  NULL (``not_number``); an integer outside 64 bits or a non-finite float too
  (``out_of_range``); ``at`` is never NULL (0.0 instead).

Only built-in ``str``/``int``/``float`` code runs on the values.

``storable_py`` is the reference. With the compiled core, ``storable`` first
asks it (``chain_text``, ``_csrc/audit_row.c``) whether every column is
storable as it is, by this module's plan (``core_plan``), in one pass: nearly
every row is, and comes back at once; any other goes to ``storable_py``.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ..native._compiled import CORE
from ._base import AuditRow

__all__ = [
    "ACTIONS",
    "ESCAPED",
    "JSON_LIMIT",
    "NOT_NUMBER",
    "NOT_TEXT",
    "OUT_OF_RANGE",
    "TEXT_LIMIT",
    "TRUNCATED",
    "core_plan",
    "storable",
    "storable_py",
]

# What ``altered`` can say about a column (public: post-mortems query them).
ESCAPED = "escaped"
TRUNCATED = "truncated"
NOT_TEXT = "not_text"
NOT_NUMBER = "not_number"
OUT_OF_RANGE = "out_of_range"
ACTIONS = (ESCAPED, TRUNCATED, NOT_TEXT, NOT_NUMBER, OUT_OF_RANGE)

TEXT_LIMIT = 1024
"""Longest identifier or code kept (tool, call id, tenant, reason, ...), in characters."""
JSON_LIMIT = 65_536
"""Longest JSON or error text kept (verdicts, escapes, detail, error), in characters."""

_INT64 = 2**63
_JSON_COLUMNS = frozenset({"verdicts", "escapes", "detail", "error", "altered"})
_INT_COLUMNS = frozenset({"duration_us", "tokens_in", "tokens_out"})
_FLOAT_COLUMNS = frozenset({"at", "cost"})
_FIELDS = AuditRow._fields
_ALTERED = _FIELDS.index("altered")
_type_name = type.__dict__["__qualname__"].__get__


def storable_py(row: AuditRow) -> AuditRow:
    """``row`` with every column storable; unchanged (the same object) when it already was."""
    changes: dict[str, list[str]] | None = None
    values: list[Any] = list(row)
    dirty = False
    for index, (column, shape, limit) in enumerate(_PLAN):  # not the id: the store gives it
        value = values[index]
        kind = type(value)
        if shape is _TEXT:
            if value is None and column != "kind":
                continue
            if kind is str and value.isascii() and "\x00" not in value and len(value) <= limit:
                continue
        elif (
            (value is None and column != "at")
            or (shape is _INT and kind is int and -_INT64 <= value < _INT64)
            or (shape is _FLOAT and kind is float and math.isfinite(value))
        ):
            continue
        values[index], actions = _fix(column, value)
        dirty = dirty or values[index] is not value
        if actions:
            changes = {} if changes is None else changes
            changes[column] = actions
    if not dirty:
        return row
    if changes is not None:
        values[_ALTERED] = json.dumps(changes, sort_keys=True)
    return AuditRow._make(values)


_TEXT, _INT, _FLOAT = "text", "int", "float"


def _shape(column: str) -> str:
    return _INT if column in _INT_COLUMNS else _FLOAT if column in _FLOAT_COLUMNS else _TEXT


def _limit(column: str) -> int:
    return JSON_LIMIT if column in _JSON_COLUMNS else TEXT_LIMIT


_PLAN = tuple((c, _shape(c), _limit(c)) for c in _FIELDS[:-1])
_NEVER_NULL = frozenset({"kind", "at"})


def core_plan() -> tuple[bytes, tuple[int, ...]]:
    """What the compiled core (``chain_link``, ``chain_text``) checks of each column: its
    shape (``t``ext, ``i``nteger, ``f``loat; upper case when NULL is rewritten) and its
    text limit. A row passing every check is one ``storable`` returns unchanged."""
    shapes = bytes(
        ord(shape[0].upper() if column in _NEVER_NULL else shape[0]) for column, shape, _ in _PLAN
    )
    return shapes, tuple(limit for _, _, limit in _PLAN)


def _fix(column: str, value: Any) -> tuple[Any, list[str]]:
    if column in _INT_COLUMNS:
        return _integer(value)
    if column in _FLOAT_COLUMNS:
        number, actions = _real(value)
        if number is None and column == "at":
            return 0.0, actions or [NOT_NUMBER]
        return number, actions
    if value is None:
        return ("", [NOT_TEXT]) if column == "kind" else (None, [])
    return _text(value, _limit(column))


def _integer(value: Any) -> tuple[int | None, list[str]]:
    if value is None:
        return None, []
    kind = type(value)  # never isinstance: it may read a hostile __class__
    if not issubclass(kind, int) or issubclass(kind, bool):
        return None, [NOT_NUMBER]
    number = int.__int__(value)
    if not -_INT64 <= number < _INT64:
        return None, [OUT_OF_RANGE]
    return number, ([] if type(value) is int else [NOT_NUMBER])


def _real(value: Any) -> tuple[float | None, list[str]]:
    if value is None:
        return None, []
    kind = type(value)
    if issubclass(kind, bool) or not issubclass(kind, int | float):
        return None, [NOT_NUMBER]
    try:
        number = int.__int__(value) if issubclass(kind, int) else float.__float__(value)
        number = float(number)
    except OverflowError:
        return None, [OUT_OF_RANGE]
    if not math.isfinite(number):
        return None, [OUT_OF_RANGE]
    return number, ([] if type(value) in (int, float) else [NOT_NUMBER])


def _text(value: Any, limit: int) -> tuple[str, list[str]]:
    actions: list[str] = []
    if issubclass(type(value), str):
        text = str.__str__(value)  # a plain copy: the subclass's own methods never run
    else:
        text = f"<not text: {_type_name(type(value))}>"
        actions.append(NOT_TEXT)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
            actions.append(ESCAPED)
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
        if ESCAPED not in actions:
            actions.append(ESCAPED)
    if len(text) > limit:
        text = text[:limit]
        actions.append(TRUNCATED)
    return text, actions


def _storable_core(row: AuditRow) -> AuditRow:
    """``storable_py``, answered in one C pass for a row storable as it is."""
    if _chain_text(row) is not None:
        return row
    return storable_py(row)


if CORE is None:
    storable = storable_py
else:
    # The core's row functions check columns by this plan; _chain hashes with them too.
    CORE.configure_chain(AuditRow, *core_plan(), hashlib.sha256, True)
    _chain_text = CORE.chain_text
    storable = _storable_core
