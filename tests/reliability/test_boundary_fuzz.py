"""The boundary under mixed attack: hostile Python objects, hostile JSON text, and
guards and tools that raise, hang, block the loop, swallow cancellation, mutate
their input or return junk, through both drivers.

Promises checked on every example: no exception leaves ``call``/``acall``; what
the model sees is the tool's answer or a fixed sentence, never a planted
secret or exception text; the tool runs only on arguments that an
independent reference admits and the schema accepts, and receives exactly
them (whatever the guards did); every guard fault is counted as an escape of
that guard; a fail-closed guard that faulted stops the call.

Default run: the ``reliability`` profile (derandomized). Long run (10,000
examples): ``GUARDRAILS_FUZZ=long python -m pytest tests/reliability -m fuzz``.
The share of examples reaching each branch is written to the ledger
(``boundary_fuzz`` family) and quoted in docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import json
import math
import os
import time
from collections import Counter
from decimal import Decimal
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import (
    Guardrails,
    GuardResult,
    Outcome,
    Reason,
    Secret,
    Tool,
    ToolResult,
    Verdict,
    guard,
)

from .conftest import SECRET_MARK

pytestmark = pytest.mark.fuzz

LONG = os.environ.get("GUARDRAILS_FUZZ") == "long"
PROFILE = settings(
    settings.get_profile("reliability-long" if LONG else "reliability"),
    max_examples=10_000 if LONG else 200,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "q": {"type": "string", "maxLength": 40},
        "n": {"type": "integer"},
        "data": {},
    },
    "required": ["q"],
}
DECLARED = ("data", "n", "q")
HANG = 0.03  # how long a faulty callable overstays
DEADLINE = 0.005  # the deadline it overstays


# -- hostile values ---------------------------------------------------------------------


class LenRaises(str):
    def __len__(self) -> int:
        raise RuntimeError(SECRET_MARK)


class EqRaises(str):
    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        raise RuntimeError(SECRET_MARK)


class ShiftyHash(str):
    """A key whose hash works once (to be inserted), then raises."""

    def __init__(self, value: str) -> None:
        self.calls = 0

    def __hash__(self) -> int:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError(SECRET_MARK)
        return str.__hash__(self)


class FakeDict:
    """Claims to be a dict."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return dict

    def items(self) -> Any:
        raise RuntimeError(SECRET_MARK)


class Mode(enum.IntEnum):
    A = 1


def _gen() -> Any:
    yield SECRET_MARK


HOSTILE_VALUES = st.sampled_from(
    [
        "object",
        "set",
        "bytes",
        "bytearray",
        "decimal",
        "nan",
        "inf",
        "-inf",
        "tuple",
        "generator",
        "intenum",
        "complex",
        "len_raises",
        "eq_raises",
        "surrogate",
    ]
)


def hostile_value(kind: str) -> Any:
    return {
        "object": lambda: object(),
        "set": lambda: {1, 2},
        "bytes": lambda: SECRET_MARK.encode(),
        "bytearray": lambda: bytearray(b"x"),
        "decimal": lambda: Decimal("1.5"),
        "nan": lambda: math.nan,
        "inf": lambda: math.inf,
        "-inf": lambda: -math.inf,
        "tuple": lambda: (1, SECRET_MARK),
        "generator": _gen,
        "intenum": lambda: Mode.A,
        "complex": lambda: 1j,
        "len_raises": lambda: LenRaises(SECRET_MARK),
        "eq_raises": lambda: EqRaises("x"),
        "surrogate": lambda: "\ud800" + SECRET_MARK,
    }[kind]()


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
    st.just(SECRET_MARK),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


ARGUMENT_KINDS = [
    "valid",
    "schema",
    "hostile",
    "valid",
    "text",
    "extra_key",
    "valid",
    "hostile_key",
    "valid",
    "bad_text",
    "valid",
    "not_object",
    "valid",
    "hostile",
]


@st.composite
def arguments(draw: st.DrawFn) -> Any:
    """What the model (or a hostile caller) sends."""
    kind = draw(st.sampled_from(ARGUMENT_KINDS))
    base: dict[str, Any] = {"q": draw(st.text(max_size=12))}
    if draw(st.booleans()):
        base["n"] = draw(st.integers(-5, 5))
    if draw(st.booleans()):
        base["data"] = draw(json_values)
    if kind == "valid":
        return base
    if kind == "extra_key":
        return {**base, draw(st.sampled_from(["zz", "extra", SECRET_MARK])): draw(json_scalars)}
    if kind == "schema":
        return {**base, "n": draw(st.sampled_from(["1", 1.5, None, [1]]))}
    if kind == "hostile":
        value = hostile_value(draw(HOSTILE_VALUES))
        where = draw(st.sampled_from(["top", "list", "dict"]))
        wrapped = value if where == "top" else [1, value] if where == "list" else {"k": value}
        return {**base, "data": wrapped}
    if kind == "hostile_key":
        key = draw(st.sampled_from(["shifty", "eq", "int", "none", "surrogate"]))
        made: Any = {
            "shifty": lambda: ShiftyHash("shifty"),
            "eq": lambda: EqRaises("eqkey"),
            "int": lambda: 1,
            "none": lambda: None,
            "surrogate": lambda: "\udfff",
        }[key]()
        return {**base, made: 1}
    if kind == "text":
        return json.dumps(base)
    if kind == "bad_text":
        return draw(
            st.sampled_from(
                [
                    '{"q": "x", "data": NaN}',
                    '{"q": "x", "data": -Infinity}',
                    '{"q": "x", "q": "y"}',
                    '{"q": "\\ud800"}',
                    '{"q": "x", "data": {"a": 1, "a": 2}}',
                    '{"q": ',
                    LenRaises('{"q": "x"}'),
                    b'{"q": "x", "data": Infinity}',
                ]
            )
        )
    return draw(st.sampled_from([None, [], 42, "[1]", FakeDict(), (("q", "x"),)]))


# -- the independent reference ------------------------------------------------------------


class NotAdmitted(Exception):
    pass


def reference(value: Any) -> Any:
    """What admission must accept: exact JSON types, finite numbers, no lone surrogates."""
    cls = type(value)
    if cls is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotAdmitted
            out[reference(key)] = reference(item)
        return out
    if cls is list:
        return [reference(item) for item in value]
    if cls is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise NotAdmitted from None
        return value
    if cls is float and not math.isfinite(value):
        raise NotAdmitted
    if cls is int and not -(2**1024 - 2**970) < value < 2**1024 - 2**970:
        raise NotAdmitted  # rounds to infinity as a double: not a finite number
    if cls in (int, float, bool, type(None)):
        return value
    raise NotAdmitted


def reference_text(text: Any) -> Any:
    if type(text) not in (str, bytes):
        raise NotAdmitted

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in pairs}) != len(pairs):
            raise NotAdmitted
        return dict(pairs)

    def constant(_: str) -> Any:
        raise NotAdmitted

    if not text:
        return {}  # docs/tool_call.md: the empty text is {}
    try:
        parsed = json.loads(text, object_pairs_hook=unique, parse_constant=constant)
    except ValueError:
        raise NotAdmitted from None
    return reference(parsed)


def admitted_by_reference(args: Any, extra: str) -> dict[str, Any] | None:
    try:
        value = reference_text(args) if type(args) in (str, bytes) else reference(args)
    except (NotAdmitted, RuntimeError):
        return None
    if type(value) is not dict:
        return None
    if extra == "drop":
        value = {k: v for k, v in value.items() if k in DECLARED}
    if not jsonschema.Draft202012Validator(SCHEMA).is_valid(value):
        return None
    if extra == "reject" and not set(value) <= set(DECLARED):
        return None
    return value


# -- guards and tools that misbehave ----------------------------------------------------------

GUARD_KINDS = [
    "pass",
    "pass",
    "reject",
    "raise",
    "base_exception",
    "hang",
    "block",
    "swallow",
    "mutate",
    "junk",
    "junk_result",
]
FAULTS = {"raise", "base_exception", "hang", "block", "swallow", "mutate", "junk", "junk_result"}


class Custom(BaseException):
    pass


def make_guard(kind: str, index: int, fail_closed: bool, junk: int) -> Any:
    name = f"g{index}_{kind}"
    if kind in ("pass", "reject"):
        verdict = Verdict.PASS if kind == "pass" else Verdict.REJECT
        return guard(name=name, fail_closed=fail_closed)(lambda call: verdict)
    if kind == "raise":

        def raises(call: Any) -> Verdict:
            raise RuntimeError(SECRET_MARK)

        return guard(name=name, fail_closed=fail_closed)(raises)
    if kind == "base_exception":

        async def base(call: Any) -> Verdict:
            raise Custom(SECRET_MARK)

        return guard(name=name, fail_closed=fail_closed)(base)
    if kind == "hang":

        def hangs(call: Any) -> Verdict:
            time.sleep(HANG)
            return Verdict.PASS

        return guard(name=name, fail_closed=fail_closed, timeout=DEADLINE)(hangs)
    if kind == "block":

        async def blocks(call: Any) -> Verdict:
            time.sleep(HANG)
            return Verdict.PASS

        return guard(name=name, fail_closed=fail_closed, timeout=DEADLINE)(blocks)
    if kind == "swallow":

        async def swallows(call: Any) -> Verdict:
            try:
                await asyncio.sleep(HANG)
            except asyncio.CancelledError:
                await asyncio.sleep(HANG)
            return Verdict.PASS

        return guard(name=name, fail_closed=fail_closed, timeout=DEADLINE)(swallows)
    if kind == "mutate":

        def mutates(call: Any) -> Verdict:
            args = call.arguments
            target = args.get("data")
            if isinstance(target, list):
                target.append(SECRET_MARK)
            elif isinstance(target, dict):
                target["q"] = SECRET_MARK
            else:
                args["q"] = SECRET_MARK  # type: ignore[index]
            return Verdict.PASS  # pragma: no cover - every branch above raises

        return guard(name=name, fail_closed=fail_closed)(mutates)
    answers: list[Any] = [
        None,
        "pass",
        True,
        GuardResult(Verdict.PASS, reason=object()),  # type: ignore[arg-type]
        GuardResult(Verdict.NOT_EVALUATED, escape=EqRaises("raised")),  # type: ignore[arg-type]
        GuardResult(Verdict.REJECT, params=LenRaises("q")),  # type: ignore[arg-type]
        GuardResult("pass"),  # type: ignore[arg-type]
        GuardResult(Verdict.PASS, reason=LenRaises(SECRET_MARK)),
    ]
    answer = answers[junk % len(answers)]
    return guard(name=name, fail_closed=fail_closed)(lambda call: answer)


class Impl:
    """The tool: records what it received, then misbehaves as told."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.received: list[dict[str, Any]] = []

    def record(self, kwargs: dict[str, Any]) -> None:
        self.received.append(copy.deepcopy(kwargs))
        if self.kind == "mutate":
            kwargs.clear()
            if isinstance(kwargs.get("data"), list):  # pragma: no cover
                kwargs["data"].append(1)


def make_tool(kind: str, extra: str) -> tuple[Tool, Impl]:
    impl = Impl(kind)

    async def run(**kwargs: Any) -> Any:
        impl.record(kwargs)
        if kind == "raise":
            raise RuntimeError(SECRET_MARK)
        if kind == "block":
            time.sleep(HANG)
        if kind == "junk":
            return {SECRET_MARK: object()}
        return "done"

    def run_sync(**kwargs: Any) -> Any:
        impl.record(kwargs)
        if kind == "raise":
            raise RuntimeError(SECRET_MARK)
        if kind == "junk":
            return {SECRET_MARK: object()}
        return "done"

    fn = run if kind == "block" else run_sync
    timeout = DEADLINE if kind == "block" else None
    return Tool("t", fn, SCHEMA, extra=extra, timeout=timeout), impl  # type: ignore[arg-type]


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 3))
    guards = [
        (draw(st.sampled_from(GUARD_KINDS)), draw(st.booleans()), draw(st.integers(0, 7)))
        for _ in range(count)
    ]
    return {
        "arguments": draw(arguments()),
        "guards": guards,
        "tool": draw(st.sampled_from(["ok", "ok", "raise", "junk", "mutate", "block"])),
        "extra": draw(st.sampled_from(["reject", "allow", "drop"])),
        "driver": draw(st.sampled_from(["sync", "async"])),
        "secret": draw(st.booleans()),
    }


# -- the property -------------------------------------------------------------------------------


def run_scenario(scenario: dict[str, Any], ledger: Any) -> set[str]:
    """One example: run it, check every promise, return the branches it reached."""
    spec, impl = make_tool(scenario["tool"], scenario["extra"])
    if scenario["secret"]:
        schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "key": {}}}
        spec = Tool(
            "t", spec.fn, schema, extra=spec.extra, timeout=spec.timeout,
            bind={"key": Secret("api")}, effect=True,
        )  # fmt: skip
    guards = [make_guard(k, i, fc, j) for i, (k, fc, j) in enumerate(scenario["guards"])]
    rails = Guardrails([spec], guards, secrets=lambda name: SECRET_MARK + "-secret")
    args = scenario["arguments"]
    snapshot = _snapshot(args)
    try:
        if scenario["driver"] == "sync":
            result = rails.call("t", args)
        else:
            result = asyncio.run(rails.acall("t", args))
    except BaseException as exc:  # the promise under test: nothing escapes
        ledger.add("boundary_fuzz", raised=1)
        raise AssertionError(f"{type(exc).__name__} escaped the call") from None

    assert isinstance(result, ToolResult) and result.outcome in set(Outcome)
    assert ledger.check("boundary_fuzz", result, DECLARED, planted=("Traceback",)) == []
    if result.outcome is not Outcome.OK:
        assert SECRET_MARK not in result.content
    expected = admitted_by_reference(args, scenario["extra"])
    ran = bool(impl.received)
    branches = {f"outcome:{result.outcome}", f"reason:{result.reason}"}

    # The tool runs only on what the reference admits, and receives exactly that.
    if ran:
        received = dict(impl.received[0])
        received.pop("key", None)
        assert expected is not None and _same(received, expected)
    elif expected is None:
        assert result.outcome is Outcome.INVALID_ARGS
    assert _snapshot(args) == snapshot  # the caller's value is never changed

    admitted = result.reason not in _ADMISSION_REASONS
    if admitted and guards:
        escaped = {e.guard for e in result.escapes}
        for (kind, fail_closed, _), g in zip(scenario["guards"], guards, strict=True):
            if kind in FAULTS:
                # Every fault is counted, as an escape of that guard.
                assert g.name in escaped, (kind, result.escapes)
                branches.add(f"guard_fault:{kind}")
                ledger.add("boundary_fuzz", faults_injected=1, faults_counted=1)
                if fail_closed:
                    assert not ran
                    branches.add("fail_closed_stopped")
            elif kind == "pass":
                assert g.name not in escaped
    if ran:
        branches.add(f"tool:{scenario['tool']}")
        if scenario["tool"] == "block":
            assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.TIMEOUT)
            assert "late_result" in result.flags
    return branches


_ADMISSION_REASONS = {
    Reason.NOT_AN_OBJECT,
    Reason.NOT_JSON,
    Reason.TOO_LARGE,
    Reason.SCHEMA,
    Reason.MISSING_REQUIRED,
    Reason.UNDECLARED_PARAMETER,
    Reason.BOUND_ARGUMENT_SUPPLIED,
}


def _same(a: Any, b: Any) -> bool:
    """Equal, with exact types at every depth (True is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _snapshot(value: Any) -> str:
    return repr(value) if type(value) in (dict, list, str, bytes) else type(value).__name__


def test_the_boundary_holds_under_mixed_attack(ledger: Any) -> None:
    reached: Counter[str] = Counter()
    examples = 0

    @PROFILE
    @given(scenarios())
    def attack(scenario: dict[str, Any]) -> None:
        nonlocal examples
        examples += 1
        reached.update(run_scenario(scenario, ledger))

    attack()
    for branch, count in reached.items():
        ledger.note("boundary_fuzz", f"share:{branch}", round(count / examples, 3))
    ledger.add("boundary_fuzz", examples=examples)
    # The generator reaches every branch it is meant to attack.
    expected = {
        "reason:not_json",
        "reason:not_an_object",
        "reason:schema",
        "reason:undeclared_parameter",
        "outcome:ok",
        "outcome:error",
        "tool:block",
        "fail_closed_stopped",
        *(f"guard_fault:{kind}" for kind in FAULTS),
    }
    assert expected <= set(reached), (examples, sorted(expected - set(reached)), reached)
