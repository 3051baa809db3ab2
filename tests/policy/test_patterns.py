"""Policy patterns: RE2 syntax checked at load, linear-time matching, and a rule's deadline."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, Tool, Verdict, tool
from guardrails.errors import ConfigurationError
from guardrails.policy import Check, Param, Policy, PolicyError, loads
from guardrails.policy import install as install_module
from guardrails.policy.patterns import MAX_CHARS, MAX_GROUPS, MAX_PROGRAM, Pattern
from tests._examples import examples

ROOT = Path(__file__).resolve().parents[2]


@tool
def note(text: str, ref: str = "") -> str:
    """Write a note."""
    return "noted"


def _rule(path: str = "text", **options: Any) -> Param:
    return Param("note", path, **options)


# -- linear time ----------------------------------------------------------------------


def test_a_backtracking_pattern_answers_at_once_on_a_hostile_value() -> None:
    # Python's re needs about 2**64 steps here (hours); RE2 is linear. In a child
    # process, so that a regression fails this test instead of hanging the suite.
    script = (
        "from guardrails import Guardrails, tool\n"
        "from guardrails.policy import Param, Policy\n"
        "@tool\n"
        "def note(text: str) -> str:\n"
        "    '''Write a note.'''\n"
        "    return 'noted'\n"
        "rails = Guardrails([note], policy=Policy(params=(Param('note', 'text', pattern='(a+)+b'),)))\n"
        "print(rails.call('note', {'text': 'a' * 64}).outcome)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "invalid_args"


def test_the_pattern_decides_as_before_on_ordinary_values() -> None:
    rule = _rule(pattern=r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}")
    assert rule.check("GB33BUKB20201555555555", None, None) == []
    assert rule.check("GB33BUKB2020155555555x", None, None) == [Check.PATTERN]
    assert rule.check("GB33BUKB20201555555555\n", None, None) == [Check.PATTERN]
    assert _rule(pattern=r"(?i)caf[eé]").check("CAFÉ", None, None) == []


def test_a_lone_surrogate_fails_the_pattern_without_raising() -> None:
    rule = _rule(pattern=r".*")
    assert rule.check("a\ud800b", None, None) == [Check.PATTERN]
    assert Pattern(".*").fullmatch_within("\udfff" * 10_000, 1.0) is False


def test_perl_classes_are_ascii_only() -> None:
    # Documented: \d is [0-9] (Python's re also took Arabic-Indic and other digits).
    assert _rule(pattern=r"\d{3}").check("١٢٣", None, None) == [Check.PATTERN]
    assert _rule(pattern=r"\d{3}").check("123", None, None) == []


_ATOMS = st.sampled_from(["a", "b", "ab", ".", "[ab]", "[^a]", "(?:a|b)", "(a+)", "x", "(?:a*)"])
_QUANT = st.sampled_from(["", "*", "+", "?", "{1,3}", "{2}", "*?"])
patterns = st.lists(st.tuples(_ATOMS, _QUANT).map("".join), min_size=1, max_size=5).map("".join)


@settings(max_examples=examples(300))
@given(patterns, st.text("abx\n", max_size=12))
def test_re2_answers_as_pythons_re_on_patterns_both_accept(pattern: str, value: str) -> None:
    # The pattern subset shared by both engines, on short values (where Python's
    # re is fast): the matcher used on the hot path agrees with ``re.fullmatch``
    # and with the package's public API.
    ours = Pattern(pattern)
    expected = re.fullmatch(pattern, value) is not None
    assert ours.fullmatch(value) is expected
    assert ours.fullmatch_within(value, 1.0) is expected
    assert (re2.fullmatch(pattern, value) is not None) is expected


# -- syntax RE2 refuses: a load-time error naming file, table and key --------------------


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a)\1",  # a backreference
        r"(?P<x>a)(?P=x)",  # a named backreference
        r"(?=a)a",  # lookahead
        r"(?!b)a",  # negative lookahead
        r"(?<=a)b",  # lookbehind
        r"(?<!a)b",  # negative lookbehind
        r"a\Z",  # Python's end of text (RE2 spells it \z)
        r"(?>a)",  # an atomic group
        r"a*+",  # a possessive quantifier
        r"a{1001}",  # a repetition count over 1,000
        "(",  # does not compile at all
    ],
)
def test_syntax_re2_refuses_is_one_policy_error_at_load(
    pattern: str, capfd: pytest.CaptureFixture[str]
) -> None:
    text = f"[tools.note.params.text]\npattern = '{pattern}'\n"
    with pytest.raises(PolicyError) as info:
        loads(text, origin="p.toml")
    error = info.value
    assert (error.origin, error.table, error.key) == ("p.toml", "tools.note.params.text", "pattern")
    assert "\n" not in str(error) and "RE2" in str(error)
    assert capfd.readouterr().err == ""  # RE2 logs nothing of its own


def test_a_pattern_holding_a_newline_gives_a_one_line_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        _rule(pattern="(?=x\n)")
    assert "\n" not in str(info.value)


# -- bounds of a pattern: at the bound and one past it ---------------------------------------


def _program_of(size: int) -> str:
    """A pattern that compiles to exactly ``size`` RE2 instructions."""

    # The size grows with ``last``: bisect for the first candidate that reaches ``size``.
    def candidate(last: int) -> str:
        return "x{1000}" * 9 + f"y{{{last}}}"

    def program(last: int) -> int:
        return int(re2.compile(candidate(last), _no_capture()).programsize)

    low, high = 1, 1000
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if program(middle) < size else (low, middle)
    if program(low) != size:
        raise AssertionError(f"no pattern of {size} instructions in the family")
    return candidate(low)


def _no_capture() -> Any:
    options = re2.Options()
    options.never_capture = True
    return options


@pytest.mark.parametrize(
    ("at_bound", "past_bound", "problem"),
    [
        ("a" * MAX_CHARS, "a" * (MAX_CHARS + 1), "characters"),
        ("(a)" * MAX_GROUPS, "(a)" * (MAX_GROUPS + 1), "capture groups"),
        (_program_of(MAX_PROGRAM), _program_of(MAX_PROGRAM + 1), "RE2 instructions"),
    ],
)
def test_pattern_bounds_at_the_bound_and_one_past_it(
    at_bound: str, past_bound: str, problem: str
) -> None:
    _rule(pattern=at_bound)
    with pytest.raises(ConfigurationError, match=problem):
        _rule(pattern=past_bound)
    with pytest.raises(PolicyError) as info:
        loads(f"[tools.note.params.text]\npattern = '{past_bound}'\n")
    assert info.value.key == "pattern" and problem in info.value.problem


@pytest.mark.slow
def test_each_pattern_holds_at_most_1_mib_of_re2_memory() -> None:
    # docs/policy.md, "Patterns": the automata's caches fill as values are
    # matched; 1 MiB each keeps a thousand rules under 1 GiB.
    assert Pattern("[ab]*a[ab]{20}c").compiled.options.max_mem == 1_048_576
    assert _rule(pattern=_program_of(MAX_PROGRAM))._compiled.pattern is not None


def test_a_pattern_of_100000_groups_is_refused_before_it_is_compiled() -> None:
    with pytest.raises(PolicyError, match="at most 1,000 are allowed"):
        loads("[tools.note.params.text]\npattern = '" + "(" * 50_000 + ")" * 50_000 + "'\n")
    with pytest.raises(ConfigurationError, match="characters"):
        _rule(pattern="a" * 20_000_000)


# -- the deadline of a rule ----------------------------------------------------------------


class _Clock:
    """``perf_counter_ns`` that moves ``step`` ns at each read: every evaluation is late."""

    def __init__(self, step: int) -> None:
        self.now, self.step = 0, step

    def __call__(self) -> int:
        self.now += self.step
        return self.now


RULES = [
    pytest.param({"pattern": "[a-z]+"}, id="shortcut-then-check"),
    pytest.param({"kind": "text", "values": ["hello"]}, id="kind"),
    pytest.param({"pattern": "[a-z]+", "grounded_in": ["user"]}, id="provenance"),
]


@pytest.mark.parametrize("options", RULES)
@pytest.mark.parametrize("fail_closed", [False, True])
async def test_a_rule_past_its_deadline_refuses_and_counts_a_timeout_fault(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], fail_closed: bool
) -> None:
    policy = Policy(params=(_rule(timeout=0.5, **options),), fail_closed=fail_closed)
    rails = Guardrails([note], policy=policy)
    monkeypatch.setattr(install_module, "_clock", _Clock(step=10**9))  # 1 s per read
    value = "HELLO"  # passes no shortcut: the check runs, and is timed
    for result in (
        rails.turn(session="s").call("note", {"text": value}),
        await rails.turn(session="s").acall("note", {"text": value}),
    ):
        assert result.outcome is Outcome.INVALID_ARGS and result.params == ("text",)
        assert [(e.guard, e.reason) for e in result.escapes] == [("policy:note.text", "timeout")]
        record = next(v for v in result.verdicts if v.guard == "policy:note.text")
        assert (record.verdict, record.reason) == (Verdict.REJECT, "timeout")
        assert "timeout" in record.evidence["checks"]


def test_a_rule_within_its_deadline_is_not_touched_by_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rails = Guardrails([note], policy=Policy(params=(_rule(pattern="[a-z]+", timeout=0.5),)))
    monkeypatch.setattr(install_module, "_clock", _Clock(step=10**6))  # 1 ms per read
    assert rails.call("note", {"text": "HELLO"}).escapes == ()
    assert rails.call("note", {"text": "hello"}).outcome is Outcome.OK


def test_a_long_match_is_left_on_a_worker_and_the_caller_refuses_at_the_deadline() -> None:
    rule = _rule(pattern="[a-z]+", timeout=0.05)
    pattern = rule._compiled.pattern
    release, entered = threading.Event(), threading.Event()
    real = pattern._match

    def blocked(*args: Any) -> Any:
        entered.set()
        release.wait(30)
        return real(*args)

    pattern._match = blocked  # a match that does not end by itself
    try:
        rails = Guardrails([note], policy=Policy(params=(rule,)))
        long_value = "a" * (pattern.inline_bytes + 1)  # over the inline budget: off the thread
        result = rails.call("note", {"text": long_value})
        assert entered.is_set()
        assert result.outcome is Outcome.INVALID_ARGS
        assert [e.reason for e in result.escapes] == ["timeout"]
        assert rule.check(long_value, None, None) == [Check.TIMEOUT]
    finally:
        release.set()


def test_a_short_value_is_matched_on_the_callers_thread() -> None:
    pattern = Pattern("[a-z]+")
    calls: list[str] = []
    real = pattern._match

    def counted(*args: Any) -> Any:
        calls.append(threading.current_thread().name)
        return real(*args)

    pattern._match = counted
    assert pattern.fullmatch_within("a" * pattern.inline_bytes, 0.001) is True
    assert calls == [threading.current_thread().name]


@pytest.mark.parametrize("timeout", [0, -1, 60.5, float("nan"), "1", True])
def test_a_deadline_out_of_range_is_refused(timeout: Any) -> None:
    with pytest.raises(ConfigurationError, match="timeout must be"):
        _rule(pattern="a", timeout=timeout)


def test_the_deadline_bound_itself_is_allowed_and_read_from_the_file() -> None:
    assert _rule(pattern="a", timeout=60).timeout == 60.0
    policy = loads("[tools.note.params.text]\npattern = 'a'\ntimeout = 0.25\n")
    assert policy.params[0].timeout == 0.25
    with pytest.raises(PolicyError) as info:
        loads("[tools.note.params.text]\npattern = 'a'\ntimeout = 61\n")
    assert info.value.key == "timeout"


def test_a_tool_defined_by_schema_gets_the_same_pattern_rules() -> None:
    schema = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}
    plain = Tool("plain", lambda ref: ref, schema)
    rails = Guardrails([plain], policy=Policy(params=(Param("plain", "ref", pattern="(x+x+)+y"),)))
    # Short enough that a backtracking engine would also answer (linear time is
    # the child-process test's): this one must never hang the suite.
    assert rails.call("plain", {"ref": "x" * 12}).outcome is Outcome.INVALID_ARGS
    assert rails.call("plain", {"ref": "xxy"}).outcome is Outcome.OK
