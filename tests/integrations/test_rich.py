"""Rich results: the native value is sent only when tool_call passed its stand-in on unchanged."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, Secret, Tool
from guardrails.context import ToolResult
from guardrails.integrations._rich import Rich, binary_note, sent, url_note
from guardrails.verdicts import Verdict

NATIVE = object()


def result(outcome: Outcome, content: str) -> ToolResult:
    return ToolResult("c1", "chart", outcome, content, Verdict.PASS)


def test_the_notes_name_the_media_type_and_size_never_the_bytes() -> None:
    assert binary_note("image/png", 70) == "[image/png, 70 bytes]"
    assert binary_note(None, 3) == "[application/octet-stream, 3 bytes]"
    assert binary_note("", 0) == "[application/octet-stream, 0 bytes]"
    assert url_note("image/png", "https://example.invalid/a.png") == (
        "[image/png: https://example.invalid/a.png]"
    )


# Half the draws hand back the stand-in itself, so both branches are reached about
# equally (native: ok and unchanged, about 1 draw in 10; the rest are text).
@given(
    text=st.text(max_size=20),
    other=st.text(max_size=20),
    same=st.booleans(),
    outcome=st.sampled_from(list(Outcome)),
)
def test_native_only_for_an_ok_result_whose_content_is_the_stand_in(
    text: str, other: str, same: bool, outcome: Outcome
) -> None:
    content = text if same else other
    answer = sent(result(outcome, content), Rich(text, NATIVE))
    if outcome is Outcome.OK and content == text:
        assert answer is NATIVE
    else:
        assert answer == content


def test_near_misses_are_sent_as_text() -> None:
    stand_in = "spending:\n[image/png, 70 bytes]"
    rich = Rich(stand_in, NATIVE)
    assert sent(result(Outcome.OK, stand_in), rich) is NATIVE
    assert sent(result(Outcome.OK, stand_in + " "), rich) == stand_in + " "
    assert sent(result(Outcome.OK, stand_in[:-1]), rich) == stand_in[:-1]
    assert sent(result(Outcome.ERROR, stand_in), rich) == stand_in
    assert sent(result(Outcome.OK, stand_in), None) == stand_in


def test_a_stand_in_with_a_secret_in_it_is_redacted_and_sent_as_text() -> None:
    kept: list[Rich] = []

    def report(api_key: str) -> str:
        text = f"key {api_key}\n[image/png, 3 bytes]"
        kept.append(Rich(text, NATIVE))
        return text

    schema = {"type": "object", "properties": {"api_key": {"type": "string"}}}
    tool = Tool("report", report, schema, bind={"api_key": Secret("k")}, effect=True)
    rails = Guardrails([tool], secrets={"k": "sk-secret-1"}.__getitem__)
    done = rails.call("report", {})
    assert done.ok and "sk-secret-1" not in done.content
    assert sent(done, kept[-1]) == done.content  # never the native value, which holds the key
