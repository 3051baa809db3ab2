"""Named tuples built in C against ``tuple.__new__``: the same object, nothing of the items run.

``make_py`` (``tuple.__new__``) and ``replaced_py`` are the reference. The compiled
``make`` and ``replaced`` must give an instance of the same class with the same
items (the same objects), tracked by the garbage collector as the reference's are,
refuse what is not a tuple subclass and an exact tuple, and keep no reference.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.context import Invocation, ToolResult, TurnContext, VerdictRecord
from guardrails.native import _tuples
from guardrails.native._compiled import load
from guardrails.store import AuditRow
from tests._examples import examples
from tests._hostile import Shifty

CORE = load()
needs_compiled = pytest.mark.skipif(CORE is None, reason="the C extension was not built")


class Loud:
    """An item whose every comparison, hash and conversion raises."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __len__(self) -> int:
        raise RuntimeError("len")

    def __index__(self) -> int:
        raise RuntimeError("index")


class Pair(NamedTuple):
    a: Any
    b: Any


class Open(tuple[Any, ...]):
    """A tuple subclass with an instance dict."""


_ITEMS = st.lists(
    st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=4),
        st.builds(Loud),
        st.builds(Shifty),
        st.builds(lambda: TurnContext(tenant="t")),
    ),
    max_size=30,
)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return (
        type(a) is type(b)
        and len(a) == len(b)
        and all(x is y for x, y in zip(tuple.__iter__(a), tuple.__iter__(b), strict=True))
    )


@needs_compiled
def test_make_is_tuple_new_for_any_items_and_runs_none_of_them() -> None:
    assert CORE is not None

    @settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
    @given(_ITEMS, st.sampled_from([Open, ToolResult, AuditRow, Invocation, Pair]))
    def check(items: list[Any], cls: type[tuple[Any, ...]]) -> None:
        made = CORE.make(cls, tuple(items))
        assert _same(made, _tuples.make_py(cls, tuple(items)))
        assert gc.is_tracked(made) == gc.is_tracked(tuple.__new__(cls, tuple(items)))
        if items:
            index = len(items) // 2
            item = Loud()
            assert _same(CORE.replaced(made, index, item), _tuples.replaced_py(made, index, item))
        assert all(s.asked == 0 for s in items if type(s) is Shifty)

    check()


@needs_compiled
def test_a_made_named_tuple_behaves_as_one() -> None:
    assert CORE is not None
    record = CORE.make(VerdictRecord, ("g", "tool_call", "pass", None, None, 5, True))
    assert record == VerdictRecord("g", "tool_call", "pass", None, None, 5, True)  # type: ignore[arg-type]
    assert record._replace(guard="h").guard == "h" and record.duration_ns == 5
    result = ToolResult("c1", "t", "ok", "", "pass")  # type: ignore[arg-type]
    flagged = CORE.replaced(result, ToolResult._fields.index("flags"), ("audited",))
    assert flagged == result._replace(flags=("audited",)) and type(flagged) is ToolResult
    opened = CORE.make(Open, (1, 2))
    opened.note = "kept"  # type: ignore[attr-defined]
    assert opened == (1, 2) and opened.note == "kept"  # type: ignore[attr-defined]


@needs_compiled
@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.make(tuple, (1,)), TypeError),
        (lambda c: c.make(list, (1,)), TypeError),
        (lambda c: c.make("ToolResult", (1,)), TypeError),
        (lambda c: c.make(Pair, [1, 2]), TypeError),
        (lambda c: c.make(Pair, Pair(1, 2)), TypeError),
        (lambda c: c.make(Pair), TypeError),
        (lambda c: c.replaced((1, 2), 0, 3), TypeError),
        (lambda c: c.replaced(Pair(1, 2), 2, 3), IndexError),
        (lambda c: c.replaced(Pair(1, 2), -1, 3), IndexError),
        (lambda c: c.replaced(Pair(1, 2), True, 3), TypeError),
        (lambda c: c.replaced(Pair(1, 2), 2**70, 3), OverflowError),
        (lambda c: c.replaced(Pair(1, 2), 0), TypeError),
    ],
    ids=[
        "tuple itself",
        "not a tuple class",
        "not a class",
        "a list of items",
        "a named tuple of items",
        "no items",
        "a plain tuple to replace in",
        "index past the end",
        "negative index",
        "bool index",
        "index past 64 bits",
        "no item",
    ],
)
def test_misuse_raises_instead_of_building_anything(call: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        call(CORE)


def _many(times: int) -> None:
    assert CORE is not None
    items = ("c1", "t", "ok", "", "pass", (), (), None, (), None, None, 0, False, (), True)
    for _ in range(times):
        made = CORE.make(ToolResult, items)
        CORE.replaced(made, 13, ("audited",))
        CORE.make(Open, items)
        with pytest.raises(IndexError):
            CORE.replaced(made, 15, None)


@needs_compiled
@pytest.mark.slow
def test_reference_counts_and_memory_are_unchanged_after_many_calls() -> None:
    probe = ("a-probe", 1.5)
    items = (probe, "x")
    _many(1)
    gc.collect()
    before = sys.getrefcount(probe), sys.getrefcount(items), sys.getrefcount(Pair)
    assert CORE is not None
    for _ in range(1000):
        CORE.replaced(CORE.make(Pair, items), 1, probe)
    gc.collect()
    assert (sys.getrefcount(probe), sys.getrefcount(items), sys.getrefcount(Pair)) == before
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        _many(25_000)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 64_000
