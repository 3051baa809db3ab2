"""Admission at its bounds: JSON text nested past MAX_DEPTH is refused before it is
parsed, integers outside a double's finite range are not finite numbers, and the
dict behind the guards' read-only view is never the one the tool is given.

Each is checked on both walks (``canonical_py`` and the compiled core), at the
bound and one past it (docs/tool_call.md, "Admission").
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Invocation, Outcome, Reason, Secret, Tool, Verdict
from guardrails._json_depth import deeper_than
from guardrails.middleware.admission import INT_BOUND, MAX_DEPTH, canonical_py, load_compiled

ROOT = Path(__file__).resolve().parents[2]
COMPILED = load_compiled()
WALKS = [canonical_py] + ([COMPILED] if COMPILED is not None else [])
OPEN = {"type": "object", "properties": {"q": {"type": "string"}, "data": {}}}


def _nested(levels: int) -> str:
    """An object whose ``data`` nests arrays so that the text has ``levels`` levels."""
    inner = levels - 1
    return '{"data": ' + "[" * inner + "]" * inner + "}"


# -- depth, found before parsing ---------------------------------------------------------


@pytest.mark.parametrize("walk", WALKS)
def test_json_text_at_the_depth_bound_is_admitted_and_one_past_it_is_too_large(walk: Any) -> None:
    at_bound = walk(_nested(MAX_DEPTH + 1), 10_000_000)
    assert isinstance(at_bound, tuple)
    assert walk(_nested(MAX_DEPTH + 2), 10_000_000) is Reason.TOO_LARGE
    # The same bound as a dict the caller built: the text and the value agree.
    value = json.loads(_nested(MAX_DEPTH + 1))
    assert isinstance(walk(value, 10_000_000), tuple)
    assert walk(json.loads(_nested(MAX_DEPTH + 2)), 10_000_000) is Reason.TOO_LARGE


@pytest.mark.parametrize("walk", WALKS)
def test_brackets_inside_strings_do_not_count_as_depth(walk: Any) -> None:
    deep_text = '"\\"' + "[{" * 5_000 + '\\\\"'  # an escaped quote, then brackets, then \\
    admitted = walk('{"q": ' + deep_text + ', "data": [[1]]}', 10_000_000)
    assert isinstance(admitted, tuple) and admitted[0]["q"].startswith('"[{[{')


_DEEP_PROGRAM = """
import sys
sys.setrecursionlimit(1_000_000)
from guardrails import Guardrails, Tool
from guardrails.integrations.pydantic_ai import _raw
from guardrails.middleware.post_run import _structured

levels = 99_950
text = '{"data": ' + "[" * levels + "]" * levels + "}"
tool = Tool("t", lambda **k: "ran", {"type": "object", "properties": {"data": {}}})
rails = Guardrails([tool])
result = rails.call("t", text)
print(result.outcome, result.reason)
print(_structured(text)[1])
print(type(_raw(text)).__name__)
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_deep_json_text_is_refused_without_recursing_when_the_recursion_limit_is_raised(
    pure: str,
) -> None:
    env = {**os.environ, "GUARDRAILS_PURE": pure, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _DEEP_PROGRAM], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[:3] == ["invalid_args too_large", "too_deep", "str"]


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_tricky_text = st.text(alphabet='[]{}"\\ab\n\u00e9', max_size=8)
_values = st.recursive(
    st.none() | st.integers() | _tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky_text, inner, max_size=3),
    max_leaves=40,
)
REACHED: Counter[str] = Counter()


@pytest.mark.slow
@settings(max_examples=400, deadline=None)  # every run: counted by the reach check
@given(_values, st.integers(0, 12), st.sampled_from(["str", "bytes", "indent"]))
def test_deeper_than_agrees_with_the_parsed_value(value: Any, levels: int, form: str) -> None:
    text: str | bytes = json.dumps(value, indent=1 if form == "indent" else None)
    if form == "bytes":
        text = text.encode("utf-8")
    brackets = text.count("[") + text.count("{") if isinstance(text, str) else 0
    if isinstance(text, bytes):
        brackets = text.count(b"[") + text.count(b"{")
    if brackets > levels:  # the branch past the quick count
        REACHED["scanned"] += 1
    REACHED["all"] += 1
    assert deeper_than(text, levels) is (_depth(value) > levels)


@pytest.mark.slow
def test_the_generated_values_reach_the_scan_past_the_quick_count() -> None:
    test_deeper_than_agrees_with_the_parsed_value()
    # Share of examples that go past the bracket count to the scan (about 0.6).
    assert REACHED["scanned"] / REACHED["all"] > 0.3, REACHED


# -- integers outside a double's finite range --------------------------------------------


@pytest.mark.parametrize("walk", WALKS)
@pytest.mark.parametrize("sign", [1, -1])
def test_an_integer_that_rounds_to_infinity_is_not_json_and_one_below_is_admitted(
    walk: Any, sign: int
) -> None:
    below = sign * (INT_BOUND - 1)
    assert float(below) == sign * sys.float_info.max
    with pytest.raises(OverflowError):
        float(sign * INT_BOUND)
    for wrap in (lambda n: {"n": n}, lambda n: {"n": [1, n]}, lambda n: {"n": {"m": n}}):
        assert isinstance(walk(wrap(below), 10_000_000), tuple)
        assert walk(wrap(sign * INT_BOUND), 10_000_000) is Reason.NOT_JSON
        assert walk(wrap(sign * 10**5000), 10_000_000) is Reason.NOT_JSON


@pytest.mark.parametrize("walk", WALKS)
def test_integers_in_json_text_past_the_range_are_not_json(walk: Any) -> None:
    assert walk('{"n": 1' + "0" * 400 + "}", 10_000_000) is Reason.NOT_JSON
    # Past the interpreter's limit on an integer's digits: the same answer.
    assert walk('{"n": 1' + "0" * 5000 + "}", 10_000_000) is Reason.NOT_JSON
    assert walk('{"n": 1' + "0" * 300 + "}", 10_000_000) == ({"n": 10**300}, None)


SCHEMAS = [{"maximum": 5}, {"minimum": 5}, {"multipleOf": 7}, {"type": "integer"}, {}]


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("n", [10**5000, -(10**5000), INT_BOUND], ids=["huge", "-huge", "bound"])
def test_a_huge_integer_is_refused_the_same_whatever_the_schema(schema: Any, n: int) -> None:
    runs: list[Any] = []
    tool = Tool("t", lambda **k: runs.append(k), {"type": "object", "properties": {"n": schema}})
    result = Guardrails([tool]).call("t", {"n": n})
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.NOT_JSON)
    assert runs == []


# -- the tool's copy is never the guards' ------------------------------------------------------


def _through_the_referents(call: Invocation) -> Verdict:
    for view in (call.arguments, call.model_arguments):
        for found in gc.get_referents(view):
            if type(found) is dict:
                found["q"] = "changed by a guard"
                found["extra"] = 1
    return Verdict.PASS


class _ReachingHook:
    """A call hook that does what ``_through_the_referents`` does, in ``before``."""

    def before(self, invocation: Invocation) -> None:
        _through_the_referents(invocation)

    def after(self, invocation: Invocation, result: Any) -> Any:
        return result


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("bound", [False, True])
@pytest.mark.parametrize("who", ["guard", "hook"])
async def test_a_guard_reaching_the_dict_behind_its_view_does_not_change_what_the_tool_gets(
    driver: str, bound: bool, who: str
) -> None:
    received: list[dict[str, Any]] = []

    def tool(**kwargs: Any) -> str:
        received.append(dict(kwargs))
        return "ran"

    schema = {"type": "object", "properties": {"q": {"type": "string"}, "key": {}}}
    options: dict[str, Any] = {"bind": {"key": Secret("api")}, "effect": True} if bound else {}
    rails = Guardrails(
        [Tool("t", tool, schema, **options)],
        [_through_the_referents] if who == "guard" else [],
        hooks=[_ReachingHook()] if who == "hook" else [],
        secrets=lambda _: "s",
    )
    arguments = {"q": "as sent"}
    if driver == "sync":
        result = rails.call("t", arguments)
    else:
        result = await rails.acall("t", arguments)
    assert result.outcome is Outcome.OK
    assert received == [{"q": "as sent", **({"key": "s"} if bound else {})}]
    assert arguments == {"q": "as sent"}
