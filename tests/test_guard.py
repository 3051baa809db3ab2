from __future__ import annotations

import pytest

from guardrails import (
    ChokePoint,
    ConfigurationError,
    DuplicateNameError,
    Guard,
    Guardrails,
    Invocation,
    Verdict,
    guard,
    tool,
)


@tool
def echo(q: str) -> str:
    return q


def test_guard_works_bare_and_with_options_and_stays_callable() -> None:
    @guard
    def plain(call: Invocation) -> Verdict:
        return Verdict.PASS

    @guard(name="custom", at=["pre_turn", "tool_call"], fail_closed=True, timeout=1.0)
    def configured(subject: object) -> Verdict:
        return Verdict.REJECT

    assert isinstance(plain, Guard) and plain.name == "plain"
    assert configured.name == "custom" and configured.fail_closed
    assert configured.choke_points == {ChokePoint.PRE_TURN, ChokePoint.TOOL_CALL}
    assert configured(None) is Verdict.REJECT


def test_a_class_with_call_is_a_guard() -> None:
    class Minimum:
        def __init__(self, floor: int) -> None:
            self.floor = floor

        def __call__(self, call: Invocation) -> Verdict:
            return Verdict.PASS if len(call.arguments["q"]) >= self.floor else Verdict.REJECT

    rails = Guardrails([echo], [Guard(Minimum(3), name="minimum")])
    assert rails.call("echo", {"q": "hi"}).outcome == "unavailable"
    assert rails.call("echo", {"q": "hello"}).outcome == "ok"


def test_duplicate_guard_names_are_refused_naming_both_places() -> None:
    def a(call: Invocation) -> Verdict:
        return Verdict.PASS

    with pytest.raises(DuplicateNameError, match="'same'"):
        Guardrails([echo], [guard(a, name="same"), guard(a, name="same")])


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(DuplicateNameError, match="'echo'"):
        Guardrails([echo, echo])


@pytest.mark.parametrize(
    "options",
    [{"outcome": "ok"}, {"outcome": "error"}, {"at": "nowhere"}, {"at": []}, {"timeout": 0}],
)
def test_bad_guard_options_fail_at_construction(options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        guard(lambda c: Verdict.PASS, **options)  # type: ignore[call-overload]


def test_guard_for_an_unknown_tool_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="'ghost'"):
        Guardrails([echo], [guard(lambda c: Verdict.PASS, name="g", tools=["ghost"])])


def test_a_guard_name_that_is_not_a_str_is_a_configuration_error() -> None:
    from guardrails import ConfigurationError, guard

    with pytest.raises(ConfigurationError, match="name must be a str"):
        guard(name=b"g")(lambda call: None)  # type: ignore[call-overload]


def test_a_reject_that_could_not_decide_is_a_fault_and_other_escapes_on_a_reject_drop() -> None:
    from prometheus_client import CollectorRegistry

    from guardrails import EscapeReason, GuardResult
    from guardrails.observe.metrics import PrometheusRecorder

    @guard
    def cannot_say(call: Invocation) -> GuardResult:
        return GuardResult.rejected("record_partial", escape=EscapeReason.NOT_CONFIGURED)

    @guard
    def odd(call: Invocation) -> GuardResult:
        return GuardResult.rejected("no", escape=EscapeReason.PASS_ON_RETRY)

    registry = CollectorRegistry()
    rails = Guardrails([echo], [cannot_say, odd], recorder=PrometheusRecorder(registry))
    result = rails.call("echo", {"q": "x"})
    assert result.outcome == "unavailable" and result.verdict is Verdict.REJECT
    assert [(e.guard, e.reason) for e in result.escapes] == [("cannot_say", "not_configured")]
    labels = {"guard": "cannot_say", "choke_point": "tool_call", "reason": "not_configured"}
    assert registry.get_sample_value("guardrails_fail_closed_faults_total", labels) == 1.0
    # The engine binds its recorders: the guard's escape series is exposed, at zero.
    assert registry.get_sample_value("guardrails_fail_open_escapes_total", labels) == 0.0
