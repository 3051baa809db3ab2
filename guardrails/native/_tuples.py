"""Named tuples built from their fields without ``tuple.__new__``'s call path.

The pipeline builds a few named tuples per call (the invocation, guard records,
the result, the audit row, the flagged result); ``tuple.__new__(cls, items)``
spends more on its call than on the tuple. With the compiled core, ``make``
and ``replaced`` allocate and fill the tuple in C (``_csrc/tuples.c``); the
Python twins below are the reference, and the fallback.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._compiled import CORE

__all__ = ["make", "make_py", "replaced", "replaced_py"]

_T = TypeVar("_T", bound=tuple[Any, ...])


def make_py(cls: type[_T], items: tuple[Any, ...], /) -> _T:
    """An instance of the tuple subclass ``cls`` holding ``items`` (an exact tuple)."""
    return tuple.__new__(cls, items)


def replaced_py(value: _T, index: int, item: Any, /) -> _T:
    """A copy of ``value`` (of a tuple subclass) with ``value[index]`` replaced by ``item``."""
    fields = list(value)
    fields[index] = item
    return tuple.__new__(type(value), fields)


if CORE is None:
    make, replaced = tuple.__new__, replaced_py
else:
    make, replaced = CORE.make, CORE.replaced
