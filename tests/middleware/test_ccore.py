"""The compiled admission core against the pure walk: the same value, view and reason.

``canonical_py`` is the reference; ``load_compiled()`` is the C walk, whatever
``GUARDRAILS_PURE`` chose for the pipeline. Every hostile object here counts
the calls of its methods: neither walk may run one.
"""

from __future__ import annotations

import gc
import json
import math
import os
import tracemalloc
from collections import Counter, OrderedDict
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails import Reason
from guardrails.middleware import admission
from guardrails.middleware._frozen import FrozenDict, FrozenList
from guardrails.middleware.admission import INT_BOUND, MAX_DEPTH, canonical_py, load_compiled
from tests._examples import examples
from tests._refcounts import assert_kept, counts

COMPILED = load_compiled()
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="the C extension was not built")
CALLS: Counter[str] = Counter()


def test_the_extension_is_built_where_ci_requires_it() -> None:
    if os.environ.get("GUARDRAILS_REQUIRE_CCORE") == "1":
        assert COMPILED is not None, (
            "GUARDRAILS_REQUIRE_CCORE=1 but guardrails._ccore did not import"
        )
        pure = os.environ.get("GUARDRAILS_PURE") == "1"
        assert admission.COMPILED is not pure
        assert (admission.canonical is COMPILED) is not pure


# -- hostile objects: every method counts its calls ---------------------------------


class Armed:
    """While on, a hostile method counts its call and raises; off, it behaves."""

    on = False

    def __enter__(self) -> None:
        CALLS.clear()
        Armed.on = True

    def __exit__(self, *exc: object) -> None:
        Armed.on = False


def _counted(base: type, dunder: str, name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if Armed.on:
            CALLS[name] += 1
            raise AssertionError(f"{name} ran")
        return getattr(base, dunder)(self, *args, **kwargs)

    return method


_DUNDERS = ("__len__", "__hash__", "__eq__", "__str__", "__iter__", "__repr__", "__index__")


def _hostile(base: type, name: str, *more: str) -> type:
    found = [d for d in (*_DUNDERS, *more) if hasattr(base, d)]
    return type(name, (base,), {d: _counted(base, d, f"{name}.{d}") for d in found})


LoudStr = _hostile(str, "LoudStr")
LoudInt = _hostile(int, "LoudInt")
LoudFloat = _hostile(float, "LoudFloat")
LoudDict = _hostile(dict, "LoudDict", "items", "keys", "values", "__getitem__", "get")
LoudList = _hostile(list, "LoudList", "__getitem__")


class ShiftyKey:
    """A key whose hash changes each time it is asked while armed."""

    def __hash__(self) -> int:
        if Armed.on:
            CALLS["ShiftyKey.__hash__"] += 1
        return id(self) + CALLS["ShiftyKey.__hash__"]

    def __eq__(self, other: object) -> bool:
        if Armed.on:
            CALLS["ShiftyKey.__eq__"] += 1
        return self is other


def _walks() -> list[Any]:
    return [canonical_py] + ([COMPILED] if COMPILED is not None else [])


def _shape(x: Any) -> Any:
    """Types all the way down, so a dict and a FrozenDict never compare equal here."""
    if isinstance(x, dict | MappingProxyType):
        return (type(x).__name__, [(k, _shape(v)) for k, v in x.items()])
    if isinstance(x, list):
        return (type(x).__name__, [_shape(v) for v in x])
    return (type(x).__name__, x)


def _same(a: Any, b: Any) -> None:
    if isinstance(a, Reason) or isinstance(b, Reason):
        assert a is b
        return
    assert _shape(a[0]) == _shape(b[0])
    assert (a[1] is None) is (b[1] is None)
    if a[1] is not None:
        assert _shape(a[1]) == _shape(b[1])


# -- the differential property ---------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**70),
    st.floats(),  # NaN and the infinities included
    st.text(max_size=6),
    st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=3),
    st.sampled_from([0.0, -0.0, 1.0, 1e308, math.inf, math.nan, True, False]),
)
strangers = st.one_of(
    st.builds(LoudStr, st.text(max_size=3)),
    st.builds(LoudInt, st.integers()),
    st.builds(LoudFloat, st.floats(allow_nan=False)),
    st.tuples(st.integers()),
    st.builds(bytes, st.binary(max_size=3)),
    st.frozensets(st.integers(), max_size=2),
    st.just(object()),
)
keys = st.one_of(
    st.text(max_size=4),
    st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=2),
    st.builds(LoudStr, st.text(max_size=2)),
    st.integers(),
    st.builds(ShiftyKey),
)


def _containers(inner: Any) -> Any:
    return st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(LoudList),
        st.dictionaries(keys, inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(LoudDict),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(FrozenDict),
    )


values = st.recursive(st.one_of(scalars, scalars, scalars, strangers), _containers, max_leaves=24)
tops = st.one_of(
    st.dictionaries(keys, values, max_size=6),
    st.dictionaries(st.text(max_size=4), values, max_size=6).map(LoudDict),
    st.dictionaries(st.text(max_size=4), values, max_size=6),
    st.dictionaries(st.text(max_size=4), values, max_size=6),
    values,
)
limits = st.one_of(
    st.integers(0, 40), st.integers(0, 40), st.just(1_000_000), st.integers(-3, 2**70)
)


@pytest.mark.slow
@needs_compiled
def test_the_compiled_walk_agrees_with_the_pure_walk_and_runs_no_user_method() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=examples(1500), deadline=None, suppress_health_check=list(HealthCheck))
    @given(tops, limits)
    def check(arguments: Any, limit: int) -> None:
        with Armed():
            pure, fast = canonical_py(arguments, limit), COMPILED(arguments, limit)
        assert not CALLS
        _same(pure, fast)
        seen[pure.name if isinstance(pure, Reason) else "nested" if pure[1] else "flat"] += 1

    check()
    total = sum(seen.values())
    for branch in ("flat", "nested", "NOT_JSON", "TOO_LARGE", "NOT_AN_OBJECT"):
        assert seen[branch] > total * 0.04, (branch, seen)


json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=20,
)
texts = st.one_of(
    st.dictionaries(st.text(max_size=4), json_like).map(json.dumps),
    json_like.map(json.dumps),
    st.text(max_size=12),
    st.sampled_from(['{"a": 1, "a": 2}', '{"a": [NaN]}', '{"\\ud800": 1}', "", "{}"]),
)


@given(texts, limits)
@settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
def test_json_text_admits_the_same_way_in_both_walks(text: str, limit: int) -> None:
    for sent in (text, text.encode("utf-8", "surrogatepass"), bytearray(text, "utf-8", "replace")):
        results = [walk(sent, limit) for walk in _walks()]
        _same(results[0], results[-1])


# -- the attacks, one by one ------------------------------------------------------------


@pytest.mark.parametrize("walk", _walks(), ids=lambda w: getattr(w, "__module__", "?"))
def test_a_str_subclass_is_not_json_and_its_len_never_runs(walk: Any) -> None:
    cases = [{"q": LoudStr("x")}, {LoudStr("q"): "x"}, {"q": [1, {"r": LoudInt(2)}]}]
    with Armed():
        results = [walk(case, 100) for case in cases]
    assert results == [Reason.NOT_JSON] * 3 and not CALLS


@pytest.mark.parametrize("walk", _walks(), ids=lambda w: getattr(w, "__module__", "?"))
def test_dict_and_list_subclasses_are_read_from_their_storage(walk: Any) -> None:
    arguments = LoudDict(a=LoudList([1, LoudDict(b="c")]), d=2.5)
    with Armed():
        admitted = walk(arguments, 100)
    assert not CALLS
    assert isinstance(admitted, tuple)
    value, view = admitted
    assert _shape(value) == _shape({"a": [1, {"b": "c"}], "d": 2.5})
    assert type(view) is MappingProxyType and type(view["a"]) is FrozenList
    assert type(view["a"][1]) is FrozenDict


@pytest.mark.parametrize("walk", _walks(), ids=lambda w: getattr(w, "__module__", "?"))
def test_a_key_whose_hash_changes_is_not_json_and_never_hashed(walk: Any) -> None:
    arguments = {"a": 1, ShiftyKey(): 2}
    with Armed():
        admitted = walk(arguments, 100)
    assert admitted is Reason.NOT_JSON and not CALLS


@pytest.mark.parametrize("walk", _walks(), ids=lambda w: getattr(w, "__module__", "?"))
def test_a_huge_int_is_one_scalar_and_kept_as_is(walk: Any) -> None:
    huge = INT_BOUND - 1  # the largest integer a double holds as a finite number
    admitted = walk({"n": huge, "m": [-huge]}, 100)
    assert isinstance(admitted, tuple) and admitted[0]["n"] is huge
    assert admitted[0]["m"][0] == -huge
    # Past it an integer is not a finite number (test_admission_bounds.py).
    assert walk({"n": 10**5000}, 100) is Reason.NOT_JSON


def _nest(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize("walk", _walks(), ids=lambda w: getattr(w, "__module__", "?"))
def test_nesting_at_the_depth_bound_is_admitted_and_one_past_it_is_too_large(walk: Any) -> None:
    assert isinstance(walk({"a": _nest(MAX_DEPTH)}, 10_000), tuple)
    assert walk({"a": _nest(MAX_DEPTH + 1)}, 10_000) is Reason.TOO_LARGE
    assert walk({"a": _nest(100_000)}, 10**9) is Reason.TOO_LARGE


@pytest.mark.parametrize("walk", _walks(), ids=lambda w: getattr(w, "__module__", "?"))
def test_a_dict_changed_by_a_finalizer_mid_walk_gives_a_closed_answer(walk: Any) -> None:
    arguments: dict[str, Any] = {f"k{i}": [i] for i in range(200)}

    class Meddler:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            for i in range(50):
                arguments[f"new{i}"] = i

    old = gc.get_threshold()
    gc.set_threshold(1)
    try:
        for _ in range(20):
            Meddler()
            admitted = walk(arguments, 10**6)
            assert admitted is Reason.NOT_AN_OBJECT or (
                isinstance(admitted, tuple) and all(type(k) is str for k in admitted[0])
            )
    finally:
        gc.set_threshold(*old)


# -- reference counts and leaks ----------------------------------------------------------

BIG, TEXT, REAL = 10**30, "".join(["t", "ext"]), float("2.5")
CASES: list[Any] = [
    {"a": BIG, "b": TEXT, "c": REAL, "d": None, "e": True, "f": [BIG, TEXT, REAL]},
    {"a": [1, {"b": ["c", 2.0]}], "d": {"e": []}},
    {"a": [1, {"b": math.nan}]},  # refused deep inside
    {"a": "x" * 50, "b": [1] * 50},  # too large for the limit below
    {"a": {"b": "\ud800"}},
    {"a": [LoudStr("x")]},
    "not an object",
    '{"a": [1, {"b": 2}]}',
    LoudDict(a=[1, 2]),
    {"a": [[[[[[[1]]]]]]] * 3},
]


@pytest.mark.slow
@needs_compiled
def test_reference_counts_are_unchanged_after_many_calls() -> None:
    probes = [CASES[1]["a"], CASES[1]["a"][1], Reason.NOT_JSON, Reason.TOO_LARGE, FrozenDict]
    probes += [BIG, TEXT, REAL]
    probes += [k for case in CASES if isinstance(case, dict) for k in case]
    gc.collect()  # what earlier tests left for the collector (it may hold a probe)
    before = counts(probes)
    for _ in range(1000):
        for case in CASES:
            COMPILED(case, 60)
    gc.collect()
    # The enum members, the class and the one-letter keys are the process's too: within a margin.
    assert_kept(probes, before, 1000, shared=(Reason.NOT_JSON, Reason.TOO_LARGE, FrozenDict))


@pytest.mark.slow
@needs_compiled
def test_no_memory_is_kept_over_100000_calls() -> None:
    for case in CASES:
        COMPILED(case, 60)
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(100_000 // len(CASES) + 1):
            for case in CASES:
                COMPILED(case, 60)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 64_000  # one object kept per call would be megabytes
