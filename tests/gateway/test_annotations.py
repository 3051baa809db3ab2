"""Rules for a class of tools chosen by their MCP annotations, with real upstreams and clients.

The upstream (``servers/annotated.py``) lists ``wipe``, ``read``, ``plain``
and ``liar`` with the annotations a JSON file gives each (``plain`` has
none). A class rule only adds: a hint never takes a tool out of a rule that
names it, a tool without hints is read with the MCP specification's
defaults, and a hint that changes is a changed definition, withheld.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from guardrails.approvals import SENTENCES
from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.annotations import (
    ATTR_ANNOTATION_RULES,
    CLASSES,
    DETAIL,
    Hints,
    classes_of,
    hints_of,
)
from guardrails.store import SQLiteStore
from guardrails.verdicts import Outcome, Reason, model_sentence

from .conftest import PY, ROOT, SERVERS, command_toml, gateway_client, text, write_config

PENDING = SENTENCES[Reason.APPROVAL_PENDING]
UNAVAILABLE = model_sentence(Outcome.UNAVAILABLE)
HINTS = {
    "stop": {"readOnlyHint": True},  # restarts the upstream, whatever the rules
    "wipe": {"destructiveHint": True},
    "read": {"readOnlyHint": True},
    # Says it only reads; its own table asks for approval all the same.
    "liar": {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False},
}
RULES = """
[when.destructive]
approval = "always"

[upstreams.files.tools.liar]
approval = "always"
"""


def upstream(tmp_path: Path, hints: dict[str, Any] = HINTS) -> str:
    path = tmp_path / "hints.json"
    path.write_text(json.dumps(hints))
    command = command_toml([PY, str(SERVERS / "annotated.py"), str(path)])
    return f"[upstreams.files]\ncommand = {command}\nbackoff_initial = 0.05\n"


def in_process(tmp_path: Path, body: str, **options: Any) -> Gateway:
    config = parse_config(
        tomllib.loads('[gateway]\nstore = "audit.db"\npin_interval = 0.05\n' + body),
        base=tmp_path,
    )
    return Gateway(config, secrets={}.get, health_interval=3600, **options)


async def called(client: Client, tool: str) -> str:
    result = await client.call_tool(tool, {"path": "/tmp/x"})
    return text(result)


def audit_details(path: Path) -> dict[str, dict[str, Any]]:
    store = SQLiteStore(str(path))
    try:
        rows = store.audit_rows(kind="tool_call")
    finally:
        store.close()
    return {str(r.tool): json.loads(r.detail or "{}") for r in rows}


@pytest.mark.slow
async def test_a_class_rule_holds_destructive_tools_and_never_relaxes_a_tool_s_own_rule(
    tmp_path: Path, transport: str
) -> None:
    path = write_config(tmp_path, upstream(tmp_path) + RULES)
    async with gateway_client(transport, path, session="s-1") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        answers = {tool: await called(client, tool) for tool in ("wipe", "read", "plain", "liar")}
    assert answers == {
        "wipe": PENDING,  # destructiveHint: held by [when.destructive]
        "read": "read /tmp/x",  # readOnlyHint: not in the class
        "plain": PENDING,  # no annotations: the spec's defaults make it destructive
        "liar": PENDING,  # claims read-only; its own approval still holds
    }
    assert listed["liar"].annotations is not None and listed["liar"].annotations.read_only_hint
    details = audit_details(tmp_path / "audit.db")
    assert details["wipe"][DETAIL] == ["when.destructive"]
    assert details["plain"][DETAIL] == ["when.destructive"]
    assert DETAIL not in details["read"] and DETAIL not in details["liar"]


@pytest.mark.slow
async def test_an_upstream_s_own_class_rules_withhold_and_make_actions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "guardrails.gateway")
    hints = {**HINTS, "read": {"readOnlyHint": True, "openWorldHint": False}}
    body = upstream(tmp_path, hints) + (
        "[upstreams.files.when.open_world]\nwithhold = true\n"
        "[upstreams.files.when.read_only]\naction = true\n"
    )
    gateway = in_process(tmp_path, body)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        refused = await called(client, "wipe")
        answers = [await called(client, tool) for tool in ("read", "liar")]
    # wipe, plain and stop are open-world (the default): not published.
    assert names == {"read", "liar"}
    assert refused == UNAVAILABLE
    assert answers == ["read /tmp/x", "liar /tmp/x"]
    store = SQLiteStore(str(tmp_path / "audit.db"))
    try:
        started = [r.tool for r in store.audit_rows(kind="call_started")]
    finally:
        store.close()
    assert sorted(started) == ["liar", "read"]  # actions: a row before each call
    said = caplog.text
    assert "upstream 'files': tool 'wipe' withheld by upstreams.files.when.open_world" in said


@pytest.mark.slow
async def test_a_class_condition_on_a_parameter_a_tool_lacks_holds_its_every_call(
    tmp_path: Path,
) -> None:
    rule = '[when.writes]\napproval = "path == \'/tmp/x\'"\n[when.open_world]\napproval = "amount > 5"\n'
    gateway = in_process(tmp_path, upstream(tmp_path) + rule)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        closed = {t.name for t in (await client.list_tools()).tools}
        answers = {tool: await called(client, tool) for tool in ("read", "plain", "liar")}
        other = text(await client.call_tool("plain", {"path": "/tmp/y"}))
    assert {"read", "plain", "liar"} <= closed
    # read is open-world (the default) and has no amount: held. liar says it is
    # closed and read-only: neither rule is its. plain writes: held on /tmp/x, and
    # open-world without an amount: held on /tmp/y too.
    assert answers == {"read": PENDING, "plain": PENDING, "liar": "liar /tmp/x"}
    assert other == PENDING


@pytest.mark.slow
async def test_the_rule_that_applied_is_on_the_call_s_span(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gateway = in_process(tmp_path, upstream(tmp_path) + RULES, tracer_provider=provider)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        assert await called(client, "wipe") == PENDING
        assert await called(client, "read") == "read /tmp/x"
    spans = {s.name: s for s in exporter.get_finished_spans()}
    wipe = spans["execute_tool wipe"].attributes or {}
    assert tuple(wipe[ATTR_ANNOTATION_RULES]) == ("when.destructive",)  # type: ignore[arg-type]
    assert ATTR_ANNOTATION_RULES not in (spans["execute_tool read"].attributes or {})


@pytest.mark.slow
async def test_a_changed_hint_is_withheld_like_any_changed_definition(tmp_path: Path) -> None:
    gateway = in_process(tmp_path, upstream(tmp_path) + RULES)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        assert await called(client, "wipe") == PENDING
        # The upstream now says wipe only adds: out of the destructive class, if believed.
        flipped = {**HINTS, "wipe": {"destructiveHint": False}}
        (tmp_path / "hints.json").write_text(json.dumps(flipped))
        async with client.listen(tools_list_changed=True) as changes:
            assert (await client.call_tool("stop", {})).is_error
            with anyio.fail_after(60):
                await changes.__anext__()
        names = {t.name for t in (await client.list_tools()).tools}
        after = await called(client, "wipe")
    assert "wipe" not in names and {"read", "plain", "liar"} <= names
    assert after == UNAVAILABLE
    labels = {"upstream": "files", "action": "withheld"}
    assert gateway.registry.get_sample_value("guardrails_gateway_tool_changes_total", labels) == 1


def test_a_tool_without_annotations_takes_the_specification_s_defaults() -> None:
    from mcp.types import Tool, ToolAnnotations

    source = inspect.getsource(ToolAnnotations)
    fields = re.findall(r'(\w+)_hint: bool \| None = None\s+"""(.*?)"""', source, re.S)
    documented = {field: "Default: true" in doc for field, doc in fields}
    assert all(re.search(r"Default: (true|false)", doc) for _, doc in fields)
    assert documented == {
        "read_only": Hints().read_only,
        "destructive": Hints().destructive,
        "idempotent": Hints().idempotent,
        "open_world": Hints().open_world,
    }
    bare = Tool(name="t", input_schema={"type": "object"})
    assert hints_of(bare) == Hints()
    assert classes_of(bare) == {"all", "writes", "destructive", "not_idempotent", "open_world"}
    reads = Tool(name="r", input_schema={}, annotations=ToolAnnotations(read_only_hint=True))
    assert classes_of(reads) == {"all", "read_only", "open_world"}
    assert classes_of({"readOnlyHint": "yes", "openWorldHint": False}) == {
        "all", "writes", "destructive", "not_idempotent"
    }  # fmt: skip
    assert set(CLASSES) >= {"destructive", "read_only", "writes", "open_world"}


UPSTREAM = '[upstreams.files]\ncommand = ["x"]\n'


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("[when.destrutive]\napproval = 'always'\n", "when.destrutive: unknown key"),
        ("[when.destructive]\naproval = 'always'\n", "when.destructive.aproval: unknown key"),
        ("[when.destructive]\n", "when.destructive: give approval, action or withhold"),
        ("[when.read_only]\napproval = 'never'\n", "when.read_only.approval: a class rule only"),
        ("[when.writes]\napproval = 'alwys'\n", "when.writes.approval:"),
        ("[when.writes]\nwithhold = false\n", "when.writes.withhold: must be true"),
        ("when = 3\n", "when: must be a table"),
        (
            UPSTREAM + "[upstreams.files.when.all]\naction = 'yes'\n",
            "upstreams.files.when.all.action: must be true",
        ),
        (UPSTREAM + "[upstreams.files.when]\nany = {}\n", "upstreams.files.when.any: unknown"),
    ],
)
def test_a_mistake_in_a_class_rule_names_the_file_and_the_key(body: str, where: str) -> None:
    text_ = body if "[upstreams." in body else body + UPSTREAM
    with pytest.raises(ConfigurationError) as caught:
        parse_config(tomllib.loads(text_), source="gw.toml")
    assert str(caught.value).startswith(f"gw.toml: {where}")
    assert "\n" not in str(caught.value)


@pytest.mark.slow
def test_a_typo_in_a_class_rule_stops_the_command_with_one_line_and_status_2(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, upstream(tmp_path) + "[when.destructiv]\napproval = 'always'\n")
    done = subprocess.run(
        [PY, "-m", "guardrails.cli", "gateway", "--config", str(path), "--stdio"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"guardrails gateway: {path}: when.destructiv: unknown key")
