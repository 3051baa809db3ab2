"""Read-only containers: how guards see nested arguments.

Guards read the arguments through these; the tool receives a separate copy of
the validated value, so nothing a guard does to its view reaches the tool. A
guard that tries to change its view gets ``TypeError`` (counted as an escape,
``raised``). They are ``dict`` and ``list`` subclasses, so ``isinstance``
checks, ``json.dumps`` and comparisons work as on the plain value; a copy
(``copy.copy``, ``copy.deepcopy``, ``dict(view)``, ``list(view)``) is an
ordinary, mutable container.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList"]


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError("tool arguments are read-only in a guard")


class FrozenList(list[Any]):
    """A list that refuses every change."""

    __slots__ = ()
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        import copy

        return [copy.deepcopy(item, memo) for item in self]


class FrozenDict(dict[str, Any]):
    """A dict that refuses every change."""

    __slots__ = ()
    pop = popitem = setdefault = update = clear = _refuse
    __setitem__ = __delitem__ = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self),)

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        import copy

        return {key: copy.deepcopy(value, memo) for key, value in self.items()}
