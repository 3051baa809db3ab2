"""docs/gateway.md says what the code does: series names, sentences, the missing-extra line."""

from __future__ import annotations

import re
from pathlib import Path

from guardrails.gateway import metrics
from guardrails.verdicts import Outcome, model_sentence

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text()


def test_the_series_table_names_every_gateway_series_and_its_reasons() -> None:
    documented = set(re.findall(r"^\| `(guardrails_gateway_\w+)`", PAGE, re.M))
    exported = {
        metrics.AUTH_REFUSALS,
        metrics.UPSTREAM_FAILURES,
        metrics.UPSTREAM_RESTARTS,
        metrics.UPSTREAM_UP,
        metrics.TOOL_CHANGES,
        metrics.TOOLS_WITHHELD,
        metrics.TENANT_REFUSALS,
        metrics.HTTP_REFUSALS,
        metrics.TOOL_CLASHES,
    }
    assert documented == exported
    for reason in (
        *metrics.FAILURES,
        *metrics.CHANGES,
        *metrics.LIMITS,
        *metrics.REFUSED_REQUESTS,
    ):
        assert f"`{reason}`" in PAGE


def test_the_outcome_table_quotes_the_fixed_sentences() -> None:
    section = PAGE.split("## What the client sees", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| [^|]+ \| `(\w+)` \| ([^|]+) \|$", section, re.M)
    assert {outcome for outcome, _ in rows} == {o.value for o in Outcome}
    for outcome, answer in rows:
        if outcome == "ok":
            continue
        sentence = model_sentence(Outcome(outcome))
        if outcome == "invalid_args":
            assert answer.strip().startswith(sentence.rstrip("."))
        else:
            assert answer.strip() == sentence


def test_the_missing_extra_line_is_the_one_the_command_prints() -> None:
    assert "guardrails gateway: needs the mcp extra: pip install 'guardrails-kit[mcp]'\n" in PAGE


def test_the_pages_complete_configurations_are_valid() -> None:
    import tomllib

    from guardrails.gateway import parse_config

    blocks = re.findall(r"```toml\n(.*?)```", PAGE, re.S)
    complete = [b for b in blocks if "[upstreams." in b]
    assert complete
    for block in complete:
        parse_config(tomllib.loads(block))


def test_the_fault_table_quotes_the_logged_lines() -> None:
    section = PAGE.split("## Faults:", 1)[1].split("\n## ", 1)[0]
    for line in (
        "exited with status N; restarting in Ds",
        "did not answer its health check in time; restarting in Ds",
        "an answer longer than its bound was discarded",
        "is not published: the name 'TOOL' is upstream 'OWNER''s",
        "a tenant reached its max_sessions (N); a session refused",
        "refused an HTTP request for its Host header",
        "refused an HTTP request for its Origin header",
        "exited with status N before it was listed",
        "tool 'TOOL' changed (HASH); withheld until approved (guardrails gateway pins approve)",
        "oauth: the JWKS could not be read (TYPE)",
    ):
        assert line in section, line


def _reference() -> dict[str, set[str]]:
    """``table -> keys`` as the configuration reference documents them."""
    section = PAGE.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, set[str]] = {}
    table = None
    for line in section.splitlines():
        heading = re.match(r"^`\[([\w.]+)\]`", line)
        if heading:
            table = heading.group(1)
            documented[table] = set()
            if line.startswith("`[limits]` and `[tenants.NAME.limits]`"):
                table = "limits"  # one table of keys for both
                documented[table] = set()
        elif table is not None and line.startswith("| `"):
            first = line.split("|")[1]
            documented[table] |= set(re.findall(r"`(\w+)`", first))
    return documented


def test_the_configuration_reference_documents_exactly_the_keys_the_reader_accepts() -> None:
    from guardrails.gateway.config import KEYS

    documented = _reference()
    accepted = {table: set(keys) for table, keys in KEYS.items() if table != ""}
    # A workflow's steps are documented inline: `{ tool = "...", instructions = "..." }`.
    steps = accepted.pop("workflows.NAME.steps")
    assert documented == accepted
    assert all(f'{key} = "..."' in PAGE for key in steps)


def test_the_logged_sentences_are_the_ones_the_page_quotes() -> None:
    assert "`upstream 'NAME': its tool list changed; publishing it again`" in PAGE
    assert "`upstream 'NAME': its new tool list is not published (...)`" in PAGE
    assert '`_meta["guardrails/user"]`' in PAGE
    assert "`oauth: the JWKS could not be read (TYPE)`" in PAGE
    pins = PAGE.split("## Pinned tools", 1)[1].split("\n## ", 1)[0]
    for sentence in (
        "`upstream 'NAME': tool 'TOOL' pinned (HASH)`",
        "`upstream 'NAME': tool 'TOOL' changed (HASH); withheld until approved "
        "(guardrails gateway pins approve)`",
        "`upstream 'NAME': tool 'TOOL' changed (HASH); published as its new pin (pin = auto)`",
    ):
        assert sentence in pins.replace("\n  ", " ")
