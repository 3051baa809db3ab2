"""The conformance table as Markdown: the generated part of docs/integrations/conformance.md.

``python -m tests.conformance.render`` writes it into the page (between the
markers); ``test_table.py`` fails when the page and the table disagree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conformance import table as tb

PAGE = Path(__file__).parents[2] / "docs" / "integrations" / "conformance.md"
BEGIN = "<!-- generated from tests/conformance/table.py: python -m tests.conformance.render -->"
END = "<!-- end of the generated table -->"


def _code(text: str) -> str:
    return "`" + text.replace("\n", "\\n") + "`"


def content(value: tb.Content) -> str:
    if isinstance(value, tb.Text):
        return _code(value.text)
    if isinstance(value, tb.Truncated):
        return f"its first {value.limit} characters, ending {_code(tb.TRUNCATION_MARKER)}"
    if isinstance(value, tb.Json):
        text = json.dumps(value.value, separators=(",", ":"))
        return f"{_code(text)} as JSON text (and as structured content where the format has it)"
    note = "" if value.note is None else f", and a text block starting {_code(value.note)}"
    return f"an image block ({_code(value.mime)}){note}"


def _call(call: tb.Call) -> str:
    arguments = ", ".join(f"{k}={json.dumps(v)}" for k, v in call.arguments.items())
    return f"`{call.name}({arguments})`"


def _asks(row: tb.Row) -> str:
    return "; then ".join(" and ".join(_call(c) for c in step) for step in row.steps)


def _span(call: tb.Call, answer: tb.Answer) -> str:
    tool = "_unknown" if answer.reason == "unknown_tool" else call.name
    if answer.fault is not None:
        return f"`execute_tool {tool}`, ERROR, `error.type` {answer.fault}"
    if answer.outcome != "ok":
        return f"`execute_tool {tool}`, `error.type` {answer.outcome}"
    return f"`execute_tool {tool}`"


def answers(row: tb.Row, expected: tb.Expected) -> list[str]:
    """One Markdown line per call: outcome, content, body, audit row, span."""
    lines = []
    for call, answer in zip(row.calls, expected.answers, strict=True):
        reason = "" if answer.reason is None else f", {answer.reason}"
        body = "ran" if answer.ran else "not run"
        seen = (
            f"audit `tool_call` {call.name}, {answer.outcome}{reason}; span {_span(call, answer)}"
        )
        if not answer.audited:
            seen = "no audit row, no span"
        elif answer.passes == 2:
            seen = f"twice, at the pause and on resumption: {seen}"
        lines.append(f"**{answer.outcome}**: {content(answer.content)}; body {body}; {seen}")
    return lines


def _rows() -> list[str]:
    out = [
        "| row | the model asks | each call: what the model receives, body, audit row, span "
        "| escapes / faults |",
        "| --- | --- | --- | --- |",
    ]
    for row in tb.ROWS:
        cell = "<br>".join(answers(row, row.expected))
        if row.note:
            cell += f"<br>{row.note}"
        totals = f"{row.expected.escapes} / {row.expected.faults}"
        out.append(f"| {row.id}: {row.title} | {_asks(row)} | {cell} | {totals} |")
    return out


def _differences() -> list[str]:
    out = [
        "| entry point | row | what it answers instead | why (also in its page) |",
        "| --- | --- | --- | --- |",
    ]
    for entry in tb.ENTRY_POINTS.values():
        for row_id, difference in entry.differences.items():
            row = tb.ROW[row_id]
            if difference.expected is None:
                instead = "does not apply"
            else:
                instead = "<br>".join(answers(row, difference.expected))
                instead += f" ({difference.expected.escapes} / {difference.expected.faults})"
            out.append(
                f"| {entry.title} | {row_id} | {instead} | {difference.reason} (`{entry.docs}`) |"
            )
    return out


def _entries() -> list[str]:
    out = [
        "| entry point | error flag | structured content | the model's call id on the audit "
        "row and span | page |",
        "| --- | --- | --- | --- | --- |",
    ]
    for entry in tb.ENTRY_POINTS.values():
        flag = "yes" if entry.error_flag else "none in the format"
        structured = "yes" if entry.structured else "none in the format"
        ids = "yes" if entry.no_call_ids is None else f"no: {entry.no_call_ids}"
        out.append(f"| {entry.title} | {flag} | {structured} | {ids} | `{entry.docs}` |")
    return out


def render() -> str:
    """The generated part of the page, markers included."""
    parts = [
        BEGIN,
        "",
        "### The rows",
        "",
        *_rows(),
        "",
        "### Where an entry point answers otherwise",
        "",
        *_differences(),
        "",
        "### The entry points held to the table",
        "",
        *_entries(),
        "",
        END,
    ]
    return "\n".join(parts)


def generated(page: str) -> str:
    """The generated part of ``page`` (markers included); empty when the markers are missing."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        return ""
    return page[start : end + len(END)]


def write() -> None:
    page = PAGE.read_text()
    old = generated(page)
    if not old:
        raise SystemExit(f"{PAGE}: the markers are missing")
    PAGE.write_text(page.replace(old, render()))


if __name__ == "__main__":
    write()
    sys.exit(0)
