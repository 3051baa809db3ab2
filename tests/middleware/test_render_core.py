"""The compiled rendering of results against the json module: the same text, the same errors.

``_ccore.json_text(value, fallback)`` writes exact JSON types itself and hands
anything else to ``fallback`` (``_render._encode``, the json module's C
encoder); ``_ccore.render(value, max_chars)`` is ``_render.render_py`` with
that writer inside, and hands what it does not write to ``render_py``. The references are ``_encode`` (text, exception
type and message) and ``json.dumps(..., ensure_ascii=False,
separators=(",", ":"), allow_nan=False)`` (text and exception type). Hostile
objects count their method calls while armed: the compiled walk must run none
of them before it hands over.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import sys
import tracemalloc
from collections import Counter, OrderedDict
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.middleware import _render
from guardrails.middleware._render import TRUNCATION_MARKER, _encode, render_py
from guardrails.native._compiled import load
from tests._examples import examples
from tests._refcounts import assert_kept, counts

CORE = load()
if CORE is not None:  # as _render does, whatever GUARDRAILS_PURE chose for the pipeline
    CORE.configure_render(render_py, TRUNCATION_MARKER)
needs_compiled = pytest.mark.skipif(CORE is None, reason="the C extension was not built")
CALLS: Counter[str] = Counter()


def test_the_writer_serves_where_ci_requires_it() -> None:
    if os.environ.get("GUARDRAILS_REQUIRE_CCORE") == "1":
        assert CORE is not None
        pure = os.environ.get("GUARDRAILS_PURE") == "1"
        assert _render.COMPILED is not pure
        assert (_render.render is render_py) is pure


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def outcome(write: Any, value: Any) -> tuple[str, Any]:
    """("text", text) or ("raises", exception type, message)."""
    try:
        return ("text", write(value))
    except (TypeError, ValueError, RecursionError) as exc:
        return ("raises", (type(exc), str(exc)))


# -- hostile objects ---------------------------------------------------------------------


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


_DUNDERS = ("__len__", "__hash__", "__eq__", "__str__", "__iter__", "__repr__", "__float__")


def _hostile(base: type, name: str, *more: str) -> type:
    found = [d for d in (*_DUNDERS, *more) if hasattr(base, d)]
    return type(name, (base,), {d: _counted(base, d, f"{name}.{d}") for d in found})


LoudStr = _hostile(str, "LoudStr")
LoudInt = _hostile(int, "LoudInt", "__index__")
LoudFloat = _hostile(float, "LoudFloat")
LoudDict = _hostile(dict, "LoudDict", "items", "keys", "values", "__getitem__")
LoudList = _hostile(list, "LoudList", "__getitem__")


class Colour(IntEnum):
    RED = 1


class ShiftyKey:
    """A key whose hash changes and whose equality mutates the dict it sits in."""

    home: dict[Any, Any] | None = None

    def __hash__(self) -> int:
        CALLS["ShiftyKey.__hash__"] += Armed.on
        return id(self) + CALLS["ShiftyKey.__hash__"]

    def __eq__(self, other: object) -> bool:
        CALLS["ShiftyKey.__eq__"] += Armed.on
        if self.home is not None:
            self.home.clear()
        return self is other


def handed_over(value: Any) -> str:
    """The fallback of the tests: disarms (the json encoder may read what it likes), records."""
    CALLS["handed over"] += 1
    Armed.on = False
    return _encode(value)


def compiled(value: Any) -> str:
    assert CORE is not None
    text: str = CORE.json_text(value, handed_over)
    return text


# -- the differential property -------------------------------------------------------------

text = st.one_of(
    st.text(max_size=8),
    st.text(st.characters(max_codepoint=0x7F), max_size=8),  # controls, quotes, backslashes
    st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=3),
    st.text(st.characters(min_codepoint=0x80, max_codepoint=0x10FFFF), min_size=1, max_size=4),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**70) | st.integers(-(2**70), -(2**63) + 1),
    st.floats(),  # NaN and the infinities included: ValueError
    text,
    st.sampled_from([0.0, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 2**63, -(2**63)]),
    st.sampled_from([25.0, -1.0, 1e15, 9999999999999998.0, -9999999999999998.0, 2.0**53, -1e16]),
    st.integers(-(10**17), 10**17).map(float),  # whole numbers either side of 1e16
)
strangers = st.one_of(
    st.builds(LoudStr, st.text(max_size=3)),
    st.builds(LoudInt, st.integers()),
    st.builds(LoudFloat, st.floats()),
    st.just(Colour.RED),
    st.builds(bytes, st.binary(max_size=3)),
    st.frozensets(st.integers(), max_size=2),
    st.just(object()),
    st.integers(4299, 4301).map(lambda n: 10**n),  # at and past the digit limit
)
keys = st.one_of(
    text,
    text,
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.builds(LoudStr, st.text(max_size=2)),
    st.builds(LoudFloat, st.floats(allow_nan=False)),
    st.tuples(st.integers()),
    st.builds(ShiftyKey),
)


def _containers(inner: Any) -> Any:
    return st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.lists(inner, max_size=3).map(LoudList),
        st.dictionaries(keys, inner, max_size=4),
        st.dictionaries(text, inner, max_size=4),
        st.dictionaries(text, inner, max_size=3).map(LoudDict),
        st.dictionaries(text, inner, max_size=3).map(OrderedDict),
    )


values = st.recursive(
    st.one_of(scalars, scalars, scalars, scalars, strangers), _containers, max_leaves=20
)


def _traits(value: Any, depth: int = 0) -> set[str]:
    """Which branches of the writer a value reaches."""
    cls = type(value)
    found: set[str] = set()
    if cls is float:
        found.add("float")
    elif cls is str and not value.isascii():
        found.add("non-ASCII text")
    elif cls is dict or cls is list or cls is tuple:
        if depth:
            found.add("nested container")
        items = list(value.items()) if cls is dict else [(None, v) for v in value]
        for key, item in items:
            if cls is dict and type(key) is not str:
                found.add("non-str key")
            found |= _traits(item, depth + 1)
    elif cls not in (int, bool, type(None), str):
        found.add("stranger")
    return found


@pytest.mark.slow
@needs_compiled
def test_the_compiled_writer_agrees_with_json_and_runs_no_user_method() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=examples(2000), deadline=None, suppress_health_check=list(HealthCheck))
    @given(values)
    def check(value: Any) -> None:
        with Armed():
            fast = outcome(compiled, value)
        handed = CALLS.pop("handed over", 0)
        assert not +CALLS, CALLS  # no user method before the hand-over
        assert fast == outcome(_encode, value)
        reference = outcome(dumps, value)
        assert fast[0] == reference[0]
        if fast[0] == "text":
            assert fast[1] == reference[1] and fast[1].isascii() is reference[1].isascii()
        else:
            assert fast[1][0] is reference[1][0]
        seen.update(_traits(value))
        seen["handed over" if handed else "written in C"] += 1
        seen[fast[0]] += 1

    check()
    total = seen["handed over"] + seen["written in C"]
    for branch in ("float", "non-ASCII text", "nested container", "non-str key", "stranger"):
        assert seen[branch] > total * 0.05, (branch, seen)
    for branch in ("handed over", "written in C", "text", "raises"):
        assert seen[branch] > total * 0.1, (branch, seen)


# -- the attacks, one by one -----------------------------------------------------------------


@needs_compiled
def test_subclasses_are_written_by_the_json_encoder_and_no_method_of_theirs_runs_first() -> None:
    value = {
        "s": LoudStr("x"),
        "i": LoudInt(7),
        "f": LoudFloat(2.5),
        "e": Colour.RED,
        LoudStr("k"): [LoudList([1]), LoudDict(a=1)],
    }
    with Armed():
        text = compiled(value)
    assert CALLS.pop("handed over") == 1 and not +CALLS
    assert text == dumps(value) == '{"s":"x","i":7,"f":2.5,"e":1,"k":[[1],{"a":1}]}'


@needs_compiled
def test_a_key_whose_hash_and_equality_mutate_the_dict_is_never_asked() -> None:
    key = ShiftyKey()
    value: dict[Any, Any] = {"a": 1, key: 2}
    key.home = value
    with Armed():
        got = outcome(compiled, value)
    assert CALLS["ShiftyKey.__hash__"] == CALLS["ShiftyKey.__eq__"] == 0
    assert got == (
        "raises",
        (TypeError, "keys must be str, int, float, bool or None, not ShiftyKey"),
    )
    assert len(value) == 2


@needs_compiled
@pytest.mark.parametrize(
    "value",
    [
        {"a": math.nan},
        [1, -math.inf],
        {math.inf: 1},
        {(1,): 2},
        {"a": object()},
        {"n": 10**4300},
        [1, {"b": b"x"}],
    ],
    ids=["nan", "inf", "inf key", "tuple key", "object", "huge int", "bytes"],
)
def test_what_json_refuses_raises_the_same_exception_with_the_same_words(value: Any) -> None:
    got = outcome(compiled, value)
    assert got[0] == "raises" and got == outcome(_encode, value)
    assert got[1][0] is outcome(dumps, value)[1][0]


@needs_compiled
def test_ints_are_written_as_int_repr_at_and_past_64_bits_and_at_the_digit_limit() -> None:
    edges = [0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64, 10**4299, -(10**4299)]
    value = {"n": edges, 2**64: 1, -(2**63): 2, True: 3, None: 4, 1.5: 5, -0.0: 6}
    assert compiled(value) == dumps(value)
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # no limit: json writes the whole number, so must we
    try:
        assert compiled([10**5000]) == dumps([10**5000])
    finally:
        sys.set_int_max_str_digits(old)


@needs_compiled
def test_every_control_character_quote_and_surrogate_is_written_as_json_writes_it() -> None:
    every = "".join(map(chr, range(0x80))) + "\u2028\u2029\ud800\udfff\U0001f600\xe9\uffff"
    value = {every: [every, every[::-1]], "\ud800": "\udc00"}
    assert compiled(value) == dumps(value)


@needs_compiled
@pytest.mark.parametrize("size", [1, 1023, 1024, 1025, 5000])
def test_text_of_every_width_in_every_order_gives_the_same_string(size: int) -> None:
    widths = ["a" * size, "\xe9" * size, "\u4e2d" * size, "\U0001f600" * size, 'q"\n' * size]
    for i in range(len(widths)):
        order = widths[i:] + widths[:i]
        for value in ([order], {s: s for s in order}, order[:2], [order[0], 5, order[1]]):
            text = compiled(value)
            assert text == dumps(value) and text.isascii() is dumps(value).isascii()
            assert hash(text) == hash(dumps(value))


@needs_compiled
def test_nesting_and_cycles_end_as_the_json_encoder_ends_them() -> None:
    deep: Any = 1
    for i in range(200):
        deep = [deep] if i % 2 else {"k": deep}
    assert compiled(deep) == dumps(deep)
    cycle: list[Any] = [1]
    cycle.append(cycle)
    loop: dict[str, Any] = {}
    loop["me"] = [loop]
    for value in (cycle, loop):
        assert outcome(compiled, value)[0] == "raises"
        assert outcome(compiled, value)[1][0] is RecursionError
        assert outcome(_encode, value)[1][0] is RecursionError


def _at_depth(frames: int, call: Any) -> Any:
    return call() if frames == 0 else _at_depth(frames - 1, call)


@needs_compiled
def test_at_the_recursion_limit_the_compiled_path_gives_the_text_or_error_the_json_path_does() -> (
    None
):
    assert CORE is not None
    old = sys.getrecursionlimit()

    def both(value: Any, frames: int) -> tuple[Any, Any]:
        fast = _at_depth(frames, lambda: outcome(lambda v: CORE.render(v, 10**9), value))
        pure = _at_depth(frames, lambda: outcome(lambda v: render_py(v, 10**9), value))
        direct = _at_depth(frames, lambda: outcome(lambda v: CORE.json_text(v, _encode), value))
        plain = _at_depth(frames, lambda: outcome(lambda v: _encode(v), value))
        assert direct[0] == plain[0] and (direct[0] == "raises" or direct[1] == plain[1])
        return fast, pure

    results: Counter[str] = Counter()
    frame, here = sys._getframe(), 0
    while frame is not None:
        frame, here = frame.f_back, here + 1
    sys.setrecursionlimit(here + 330)  # the same room whatever the caller's stack
    try:
        for depth in range(260, 360, 3):
            nested: Any = [1]
            for _ in range(depth):
                nested = [nested]
            for frames in range(0, 12, 2):
                fast, pure = both(nested, frames)
                assert fast[0] == pure[0] and (fast[0] == "raises" or fast[1] == pure[1])
                results[fast[0]] += 1
    finally:
        sys.setrecursionlimit(old)
    assert results["text"] and results["raises"], results


@needs_compiled
def test_a_dict_changed_by_a_finalizer_mid_write_gives_json_text_or_the_encoders_error() -> None:
    value: dict[str, Any] = {f"k{i}": [i, "v" * 10] for i in range(300)}

    class Meddler:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            for i in range(50):
                value[f"new{i}"] = [i]
            value.pop("k3", None)

    old = gc.get_threshold()
    gc.set_threshold(1)
    try:
        for _ in range(20):
            Meddler()
            got = outcome(lambda v: CORE.json_text(v, _encode), value)  # type: ignore[union-attr]
            if got[0] == "text":
                assert type(json.loads(got[1])) is dict
            else:  # the json encoder's own answer to a dict changed under it
                assert got[1][0] in (RuntimeError, ValueError)
    finally:
        gc.set_threshold(*old)


def test_render_of_a_dict_result_is_the_encoders_text_on_either_path() -> None:
    result = {"status": "sent", "amount": 25.0, "to": "Zoë", "ids": [1, 2], "ok": True}
    expected = '{"status":"sent","amount":25.0,"to":"Zoë","ids":[1,2],"ok":true}'
    assert _render.render(result, 1000) == render_py(result, 1000) == (expected, False)
    cut = (expected[: 40 - len(TRUNCATION_MARKER)] + TRUNCATION_MARKER, True)
    assert _render.render(result, 40) == render_py(result, 40) == cut


class Model:
    """Renders itself, as a pydantic model does."""

    def model_dump_json(self) -> str:
        return '{"model":true}'


limits = st.one_of(
    st.integers(-3, 120),
    st.sampled_from([0, 1, len(TRUNCATION_MARKER), 2**62, 2**63, 2**70, -(2**70), True, 3.0]),
)
results = st.one_of(
    values,
    st.text(max_size=200),
    st.builds(LoudStr, st.text(max_size=50)),
    st.just(Model()),
    st.none(),
    st.lists(st.text(max_size=30), max_size=8),
)


@needs_compiled
@settings(max_examples=examples(600), deadline=None, suppress_health_check=list(HealthCheck))
@given(results, limits)
def test_the_compiled_render_agrees_with_render_py(value: Any, max_chars: Any) -> None:
    assert CORE is not None
    fast = outcome(lambda v: CORE.render(v, max_chars), value)
    assert fast == outcome(lambda v: render_py(v, max_chars), value)


# -- reference counts and leaks ----------------------------------------------------------------

BIG, TEXT, REAL, WIDE = 10**30, "".join(["t", "ext"]), float("2.5"), "".join(["\u4e2d", "x"])
CASES: list[Any] = [
    {"a": BIG, "b": TEXT, "c": REAL, "d": None, "e": True, "f": [BIG, TEXT, REAL, WIDE]},
    {WIDE: [1, {"b": ["c", 2.0]}], 5: {"e": []}, 1.5: (TEXT,)},
    {"a": [1, {"b": math.nan}]},  # handed over deep inside, and refused there
    {"a": [LoudStr("x")], "b": BIG},  # handed over, written
    {"a": "x" * 3000 + WIDE},  # past the stack buffer, widened
    {(1,): 2},
    [[[[[[[1]]]]]]] * 3,
]


def _quietly(value: Any) -> None:
    assert CORE is not None
    with contextlib.suppress(TypeError, ValueError):
        CORE.json_text(value, _encode)
    with contextlib.suppress(TypeError, ValueError):
        CORE.render(value, 40)  # most of them cut


@needs_compiled
@pytest.mark.slow
def test_reference_counts_are_unchanged_after_many_calls() -> None:
    probes = [BIG, TEXT, REAL, WIDE, CASES[1][WIDE], CASES[1][WIDE][1], _encode]
    probes += [k for case in CASES if isinstance(case, dict) for k in case]
    # Small ints and one-character strings are shared by the whole interpreter (immortal
    # from Python 3.12: left out), and checked within a margin before (``assert_kept``).
    probes = [p for p in probes if sys.getrefcount(p) < 1_000_000]
    gc.collect()  # what earlier tests left for the collector (it may hold a probe)
    before = counts(probes)
    for _ in range(1000):
        for case in CASES:
            _quietly(case)
    gc.collect()
    assert_kept(probes, before, 1000)


@pytest.mark.slow
@needs_compiled
def test_no_memory_is_kept_over_100000_calls() -> None:
    for case in CASES:
        _quietly(case)
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(100_000 // len(CASES) + 1):
            for case in CASES:
                _quietly(case)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 64_000  # one object kept per call would be megabytes
