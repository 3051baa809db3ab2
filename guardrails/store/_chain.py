"""The audit log's hash chain: each row's hash covers the previous row's hash and its own content.

``hash(n) = sha256(hash(n-1) | n | content(row n))`` in hex, with ``""`` before
the first row. ``content`` is a canonical text of the storable row: each
column in ``AUDIT_COLUMNS`` order, tagged with its type and, for text, its
length, so no two different rows share a content. The stores compute the hash
inside the transaction that writes the row, after reading the previous one, so
concurrent writers extend one chain. ``verify`` recomputes it.

``content_py`` is the reference text. It runs on every append the compiled
core does not take, so it is compiled too: one f-string per shape of row
(which columns are text, numbers or NULL), built from that shape alone and
kept in a bounded table. Its text is the text of ``_encode`` column by
column (``tests/store/test_chain.py`` checks both against each other).

``sealed`` is what an append needs of a row: the row made storable and its
hash. With the compiled core, a row that is storable already (nearly every
row) is checked, written and hashed in one pass in C (``chain_link``,
``_csrc/audit_row.c``), without building the content text, and ``content``
writes the text of such a row in C (``chain_text``); any other row goes
through ``sealed_py`` (``storable_py``, ``content_py``, ``link``) and
``content_py``, the references, which ``tests/store/test_chain_core.py``
compares them with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from ..native._compiled import CORE
from ._base import AuditRow
from ._storable import storable_py

__all__ = ["GENESIS", "content", "content_py", "link", "sealed", "sealed_py"]

GENESIS = ""
"""The hash before the first row."""

_COLUMNS = len(AuditRow._fields) - 1  # every column but the id
_PIECES: dict[type, str] = {  # one column of the f-string, by the value's exact type
    type(None): "~",
    str: "s{len(r[%d])}:{r[%d]}",
    int: "i{r[%d]}",
    float: "f{r[%d].hex()}",
}
_SHAPES_KEPT = 4096  # distinct shapes compiled; past that, the column loop
_compiled: dict[tuple[type, ...], Callable[[tuple[Any, ...]], str]] = {}
_sha256 = hashlib.sha256


def content_py(row: AuditRow) -> str:
    """The canonical text of a storable row's columns (not its id)."""
    shape = tuple(map(type, row))
    encode = _compiled.get(shape)
    if encode is None:
        encode = _compile(shape)
        if encode is None:
            return "|".join([_encode(value) for value in row[:_COLUMNS]])
    return encode(row)


def _compile(shape: tuple[type, ...]) -> Callable[[tuple[Any, ...]], str] | None:
    """The f-string of one shape, or None when a column is not storable or the table is full."""
    if len(shape) != _COLUMNS + 1 or len(_compiled) >= _SHAPES_KEPT:
        return None
    pieces = []
    for index, kind in enumerate(shape[:_COLUMNS]):
        piece = _PIECES.get(kind)
        if piece is None:
            return None  # the loop raises the TypeError that names it
        pieces.append(piece.replace("%d", str(index)))
    # Built from the fixed pieces and column indexes only, never from a value.
    source = 'lambda r: f"' + "|".join(pieces) + '"'
    encode: Callable[[tuple[Any, ...]], str] = eval(source, {"__builtins__": {}, "len": len})
    _compiled[shape] = encode
    return encode


def _encode(value: Any) -> str:
    kind = type(value)
    if value is None:
        return "~"
    if kind is str:
        return f"s{len(value)}:{value}"
    if kind is int:
        return f"i{value}"
    if kind is float:
        return f"f{value.hex()}"
    raise TypeError(f"not a storable column value: {kind.__name__}")


def link(previous: str, row_id: int, text: str) -> str:
    """The hash of row ``row_id`` whose content is ``text``, after a row hashed ``previous``."""
    return _sha256(f"{previous}|{row_id}|{text}".encode()).hexdigest()


def sealed_py(row: AuditRow, previous: str, row_id: int) -> tuple[AuditRow, str]:
    """``row`` made storable, and its hash as row ``row_id`` after a row hashed ``previous``."""
    row = storable_py(row)
    return row, link(previous, row_id, content_py(row))


def _sealed_core(row: AuditRow, previous: str, row_id: int) -> tuple[AuditRow, str]:
    """``sealed_py`` in one pass of the compiled core, for a row ``storable`` keeps."""
    digest = _chain_link(row, previous, row_id)
    if digest is None:  # a row to rewrite, or anything unusual: the reference decides
        return sealed_py(row, previous, row_id)
    return row, digest


def _content_core(row: AuditRow) -> str:
    """``content_py``, written in C for a row ``storable`` keeps."""
    text = _chain_text(row)
    return content_py(row) if text is None else text


if CORE is None:
    sealed, content = sealed_py, content_py
else:  # configured by _storable, with its plan
    _chain_link, _chain_text = CORE.chain_link, CORE.chain_text
    sealed, content = _sealed_core, _content_core
