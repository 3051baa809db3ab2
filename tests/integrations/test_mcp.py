"""The MCP integration with the real MCP client and server, connected in memory."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Image

from guardrails import Guardrails, Outcome, TurnContext, Verdict, guard, tool
from guardrails.integrations.mcp import GuardedTools, guarded_server
from guardrails.rules import allow_list, trigger
from guardrails.verdicts import model_sentence

SECRET = "postgres://admin:hunter2@10.0.0.5/prod"


@tool(bind={"account_id": "account_id"})
def get_invoices(account_id: str, year: int) -> list[str]:
    """The customer's invoices for a year."""
    return [f"{account_id}/{year}/1"]


@tool
def export_all() -> str:
    """Export every record (admin tenants only)."""
    return "exported"


@tool
def broken() -> str:
    """A tool whose backend is down."""
    raise OSError(SECRET)


def by_meta(ctx: Any) -> TurnContext:
    # Tests stand in for the auth layer: the tenant rides in the request's _meta.
    meta = ctx.meta or {}
    return TurnContext(tenant=meta.get("tenant"), values={"account_id": "acc-42"})


def engine() -> Guardrails:
    tenants = allow_list(
        by_tenant={"acme": ["get_invoices", "broken"], "admin": ["get_invoices", "export_all"]},
        fail_closed=True,
    )
    return Guardrails([get_invoices, export_all, broken], [tenants])


def text(result: Any) -> str:
    [block] = result.content
    return str(block.text)


async def test_tools_list_is_filtered_by_tenant_and_hides_bound_parameters() -> None:
    async with Client(guarded_server(engine(), context=by_meta)) as client:
        acme = await client.list_tools(meta={"tenant": "acme"})
        admin = await client.list_tools(meta={"tenant": "admin"})
        nobody = await client.list_tools(meta={"tenant": "unknown"})
    assert [t.name for t in acme.tools] == ["get_invoices", "broken"]
    assert [t.name for t in admin.tools] == ["get_invoices", "export_all"]
    assert nobody.tools == []
    schema = acme.tools[0].input_schema
    assert "account_id" not in schema["properties"]
    assert schema["required"] == ["year"]


async def test_tools_call_runs_through_tool_call_with_closed_errors() -> None:
    async with Client(guarded_server(engine(), context=by_meta)) as client:
        meta = {"tenant": "acme"}
        ok = await client.call_tool("get_invoices", {"year": 2025}, meta=meta)
        missing = await client.call_tool("get_invoices", {}, meta=meta)
        bound = await client.call_tool(
            "get_invoices", {"year": 2025, "account_id": "acc-666"}, meta=meta
        )
        failed = await client.call_tool("broken", {}, meta=meta)
        not_offered = await client.call_tool("export_all", {}, meta=meta)
        unknown = await client.call_tool("drop_tables", {}, meta=meta)
    assert (ok.is_error, text(ok)) == (False, '["acc-42/2025/1"]')
    assert (missing.is_error, text(missing)) == (
        True,
        model_sentence(Outcome.INVALID_ARGS, ["year"]),
    )
    assert (bound.is_error, text(bound)) == (True, model_sentence(Outcome.INVALID_ARGS))
    assert (failed.is_error, text(failed)) == (True, model_sentence(Outcome.ERROR))
    assert (not_offered.is_error, text(not_offered)) == (
        True,
        model_sentence(Outcome.UNAVAILABLE),
    )
    assert (unknown.is_error, text(unknown)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert SECRET not in str([failed.content])


async def test_middleware_guards_the_tools_of_an_existing_server() -> None:
    app = MCPServer("existing")

    @app.resource("config://version")
    def version() -> str:
        return "1.2.3"

    app.middleware.append(GuardedTools(engine(), context=by_meta))
    async with Client(app) as client:
        listed = await client.list_tools(meta={"tenant": "admin"})
        called = await client.call_tool("broken", {}, meta={"tenant": "admin"})
        resource = await client.read_resource("config://version")
    assert [t.name for t in listed.tools] == ["get_invoices", "export_all"]
    assert (called.is_error, text(called)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert resource.contents[0].text == "1.2.3"  # type: ignore[union-attr]


# -- a step-gated workflow served over MCP ------------------------------------------

STEPS = ("start_building", "confirm_plan", "submit_for_review")
INSTRUCTIONS = {
    "start_building": "Next: write the plan and call confirm_plan.",
    "confirm_plan": "Next: call submit_for_review with the summary.",
    "submit_for_review": "Done: the reviewer has it.",
}


class Phases:
    """Where each session's phase lives: outside the model's context."""

    def __init__(self) -> None:
        self.phase: dict[str, str] = {}

    def of(self, session: str) -> str:
        return self.phase.get(session, STEPS[0])

    def advance(self, session: str, step: str) -> str:
        index = STEPS.index(step)
        if index + 1 < len(STEPS):
            self.phase[session] = STEPS[index + 1]
        else:
            self.phase[session] = "done"
        return INSTRUCTIONS[step]


def workflow_server(phases: Phases) -> Any:
    def step(name: str) -> Any:
        @tool(name=name, bind={"session": "session"}, effect=True)
        def run_step(session: str, note: str = "") -> str:
            return phases.advance(session, name)

        return run_step

    gate = allow_list(by_phase={s: [s] for s in (*STEPS, "done")}, fail_closed=True)
    rails = Guardrails([step(s) for s in STEPS], [gate])

    def context(ctx: Any) -> TurnContext:
        session = (ctx.meta or {}).get("session", "anonymous")
        return TurnContext(session=session, phase=phases.of(session))

    return guarded_server(rails, "workflow", context=context)


async def test_out_of_order_step_is_unavailable_and_never_gets_the_next_instructions() -> None:
    phases = Phases()
    async with Client(workflow_server(phases)) as client:
        meta = {"session": "s-1"}
        listed = await client.list_tools(meta=meta)
        early = await client.call_tool("confirm_plan", {}, meta=meta)
        first = await client.call_tool("start_building", {"note": "go"}, meta=meta)
        again = await client.call_tool("start_building", {}, meta=meta)
        listed_after = await client.list_tools(meta=meta)
        skipped = await client.call_tool("submit_for_review", {}, meta=meta)
        second = await client.call_tool("confirm_plan", {}, meta=meta)
        other_session = await client.call_tool("confirm_plan", {}, meta={"session": "s-2"})
    assert [t.name for t in listed.tools] == ["start_building"]
    assert (early.is_error, text(early)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert (first.is_error, text(first)) == (False, INSTRUCTIONS["start_building"])
    assert (again.is_error, text(again)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert [t.name for t in listed_after.tools] == ["confirm_plan"]
    assert (skipped.is_error, text(skipped)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert (second.is_error, text(second)) == (False, INSTRUCTIONS["confirm_plan"])
    assert other_session.is_error
    refused = [early, again, skipped, other_session]
    for result in refused:
        assert not any(i in text(result) for i in INSTRUCTIONS.values())
    assert phases.phase == {"s-1": "submit_for_review"}


# -- the same, with the library's Workflow and its phase in a store ----------------


def store_workflow_server(store: Any, *, offer_only_current: bool) -> Any:
    from guardrails.rules.workflow import Step, Workflow

    flow = Workflow("build", [Step(s, INSTRUCTIONS[s]) for s in STEPS], store)

    def step(name: str) -> Any:
        @tool(name=name, effect=True)
        def run_step(note: str = "") -> None:
            return None

        return run_step

    guards = [flow.pre_turn_guard()] if offer_only_current else []
    rails = Guardrails([step(s) for s in STEPS], guards, hooks=[flow])

    def context(ctx: Any) -> TurnContext:
        return TurnContext(tenant="acme", session=(ctx.meta or {}).get("session"))

    return guarded_server(rails, "workflow", context=context)


async def test_store_workflow_hook_refuses_out_of_order_steps_over_mcp() -> None:
    from guardrails.store import MemoryStore

    server = store_workflow_server(MemoryStore(), offer_only_current=False)
    async with Client(server) as client:
        meta = {"session": "s-9"}
        listed = await client.list_tools(meta=meta)
        skipped = await client.call_tool("submit_for_review", {}, meta=meta)
        first = await client.call_tool("start_building", {}, meta=meta)
        replayed = await client.call_tool("start_building", {}, meta=meta)
        second = await client.call_tool("confirm_plan", {}, meta=meta)
    # Without the pre_turn rule every step is listed; the hook still holds the order.
    assert [t.name for t in listed.tools] == list(STEPS)
    for refused in (skipped, replayed):
        assert (refused.is_error, text(refused)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert (first.is_error, text(first)) == (False, INSTRUCTIONS["start_building"])
    assert (second.is_error, text(second)) == (False, INSTRUCTIONS["confirm_plan"])


async def test_workflow_phase_survives_a_server_restart(tmp_path: Any) -> None:
    from guardrails.store import SQLiteStore

    path = tmp_path / "phases.db"
    meta = {"session": "s-restart"}
    store = SQLiteStore(path)
    try:
        async with Client(store_workflow_server(store, offer_only_current=True)) as client:
            await client.call_tool("start_building", {}, meta=meta)
    finally:
        store.close()
    store = SQLiteStore(path)
    try:
        async with Client(store_workflow_server(store, offer_only_current=True)) as client:
            listed = await client.list_tools(meta=meta)
            again = await client.call_tool("start_building", {}, meta=meta)
            nxt = await client.call_tool("confirm_plan", {}, meta=meta)
    finally:
        store.close()
    assert [t.name for t in listed.tools] == ["confirm_plan"]
    assert (again.is_error, text(again)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert (nxt.is_error, text(nxt)) == (False, INSTRUCTIONS["confirm_plan"])


def test_default_context_takes_the_tenant_from_the_authenticated_client() -> None:
    from mcp.server.auth.middleware.auth_context import auth_context_var
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    from guardrails.integrations.mcp import default_context

    assert default_context(None) == TurnContext()  # type: ignore[arg-type]
    token = AccessToken(token="t", client_id="acme", scopes=[])
    reset = auth_context_var.set(AuthenticatedUser(token))
    try:
        assert default_context(None).tenant == "acme"  # type: ignore[arg-type]
    finally:
        auth_context_var.reset(reset)


# -- an existing MCPServer's own tools ---------------------------------------------------


async def test_an_existing_servers_own_tools_are_listed_by_pre_turn_and_called_guarded() -> None:
    from guardrails.integrations.mcp import tools_from_server

    app = MCPServer("legacy")

    @app.tool()
    def lookup(customer: str, tenant: str) -> str:
        """Look a customer up."""
        return f"{customer}@{tenant}"

    @app.tool()
    def report(year: int) -> dict[str, int]:
        """A yearly report."""
        return {"year": year, "rows": 3}

    @app.tool()
    def crash() -> str:
        """Fails with a secret in the message."""
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError(SECRET)

    async with Client(app) as client:
        unguarded = await client.call_tool("crash", {})
    assert SECRET in str(unguarded.content)  # what the SDK alone sends to the model

    tools = await tools_from_server(app, {"lookup": {"bind": {"tenant": "tenant"}}})
    rails = Guardrails(tools, [allow_list(by_tenant={"acme": ["lookup", "crash"]})])
    app.middleware.append(GuardedTools(rails, context=by_meta))
    meta = {"tenant": "acme"}
    async with Client(app) as client:
        listed = await client.list_tools(meta=meta)
        found = await client.call_tool("lookup", {"customer": "ada"}, meta=meta)
        bound = await client.call_tool("lookup", {"customer": "ada", "tenant": "evil"}, meta=meta)
        hidden = await client.call_tool("report", {"year": 2025}, meta=meta)
        crashed = await client.call_tool("crash", {}, meta=meta)
    assert [t.name for t in listed.tools] == ["lookup", "crash"]
    assert "tenant" not in listed.tools[0].input_schema["properties"]
    assert (found.is_error, text(found)) == (False, "ada@acme")
    assert (bound.is_error, text(bound)) == (True, model_sentence(Outcome.INVALID_ARGS))
    assert (hidden.is_error, text(hidden)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert (crashed.is_error, text(crashed)) == (True, model_sentence(Outcome.ERROR))


async def test_server_tool_results_reach_the_model_as_the_server_would_send_them() -> None:
    from guardrails.integrations.mcp import tools_from_server

    app = MCPServer("legacy")

    @app.tool()
    def report(year: int) -> dict[str, int]:
        """A yearly report."""
        return {"year": year, "rows": 3}

    async with Client(app) as client:
        unguarded = text(await client.call_tool("report", {"year": 2025}))
    rails = Guardrails(await tools_from_server(app))
    result = await rails.acall("report", {"year": 2025})
    assert (result.outcome, result.content) == (Outcome.OK, unguarded)


def user_said(ctx: Any) -> str | None:
    # Tests stand in for the application: what its user said rides in the request's _meta.
    return (ctx.meta or {}).get("said")


async def async_user_said(ctx: Any) -> str | None:
    return user_said(ctx)


@pytest.mark.parametrize("turn_input", [user_said, async_user_said])
async def test_turn_input_is_what_pre_turn_reads_for_each_request(turn_input: Any) -> None:
    rails = Guardrails(
        [get_invoices, export_all], [trigger(["export"], remove=["export_all"], name="no_export")]
    )
    served = guarded_server(rails, context=by_meta, turn_input=turn_input)
    async with Client(served) as client:
        quiet = await client.list_tools(meta={"said": "my invoices"})
        asked = await client.list_tools(meta={"said": "export everything"})
        refused = await client.call_tool("export_all", {}, meta={"said": "export it"})
        allowed = await client.call_tool("export_all", {}, meta={"said": "hello"})
    assert [t.name for t in quiet.tools] == ["get_invoices", "export_all"]
    assert [t.name for t in asked.tools] == ["get_invoices"]
    assert (refused.is_error, text(refused)) == (True, model_sentence(Outcome.UNAVAILABLE))
    assert (allowed.is_error, text(allowed)) == (False, "exported")


async def test_without_turn_input_pre_turn_reads_no_user_input() -> None:
    seen: list[str] = []

    @guard(at="pre_turn")
    def look(request: Any) -> Verdict:
        seen.append(request.text.raw)
        return Verdict.PASS

    app = MCPServer("existing")
    app.middleware.append(GuardedTools(Guardrails([export_all], [look]), context=by_meta))
    async with Client(app) as client:
        await client.list_tools(meta={"said": "export everything"})
        await client.call_tool("export_all", {}, meta={"said": "export it"})
    assert seen == ["", ""]


# -- results that keep their MCP shape ------------------------------------------------

PNG_B64 = "iVBORw0KGgo="


def _image() -> Any:
    from mcp.types import ImageContent

    return ImageContent(type="image", data=PNG_B64, mime_type="image/png")


async def _answer(value: Any, **engine: Any) -> Any:
    @tool
    def shaped() -> Any:
        """A tool whose result has a shape."""
        return value

    async with Client(guarded_server(Guardrails([shaped], **engine), context=by_meta)) as client:
        return await client.call_tool("shaped", {})


async def test_an_image_a_tool_returns_reaches_the_client_as_an_image() -> None:
    answered = await _answer(_image())
    assert answered.is_error is False
    assert [(b.type, b.data, b.mime_type) for b in answered.content] == [
        ("image", PNG_B64, "image/png")
    ]


async def test_a_json_object_is_also_structured_content() -> None:
    answered = await _answer({"year": 2025, "rows": [1, 2]})
    assert answered.structured_content == {"year": 2025, "rows": [1, 2]}
    assert text(answered) == '{"year":2025,"rows":[1,2]}'
    listed = await _answer([1, 2])  # a JSON array is not an object: text alone
    assert (listed.structured_content, text(listed)) == (None, "[1,2]")


async def test_a_shape_past_the_cap_is_sent_as_the_capped_text() -> None:
    big = {"rows": "x" * 200}
    answered = await _answer(big, max_result_chars=100)
    assert answered.structured_content is None
    assert text(answered).endswith("[guardrails: result truncated]")
    exact = await _answer(big, max_result_chars=len('{"rows":""}') + 200)
    assert exact.structured_content == big


async def test_a_shape_whose_text_a_hook_rewrote_is_sent_as_that_text() -> None:
    class Rewrite:
        def before(self, invocation: Any) -> None:
            return None

        def after(self, invocation: Any, result: Any) -> Any:
            return result._replace(content=result.content + "\n\nNext: call confirm.")

    for value in ({"a": 1}, _image()):
        answered = await _answer(value, hooks=[Rewrite()])
        assert answered.structured_content is None
        assert text(answered).endswith("Next: call confirm.")


def _server_result(content: list[Any], structured: Any) -> Any:
    from mcp.types import CallToolResult

    return CallToolResult(content=content, structured_content=structured, is_error=False)


@pytest.mark.parametrize(
    "blocks, structured, kept",
    [
        (['{"a": 1}'], {"a": 1}, True),
        (['{\n  "a": 1\n}'], {"a": 1}, True),
        (["a is 1"], {"a": 1}, False),  # no text block holds it: not sent
        (['{"a": 2}'], {"a": 1}, False),  # near miss
        (['{"a": 1'], {"a": 1}, False),  # not JSON
        (['[{"a": 1}]'], {"a": 1}, False),
        (["x", '{"a": 1}'], {"a": 1}, True),
    ],
)
def test_server_structured_content_is_kept_only_when_its_text_holds_it(
    blocks: list[str], structured: Any, kept: bool
) -> None:
    from mcp.types import TextContent

    from guardrails.integrations._mcp_results import forwarded

    result = _server_result([TextContent(type="text", text=b) for b in blocks], structured)
    answer = forwarded(result)
    assert (answer.structured == structured) is kept
    assert answer.text == "\n".join(blocks)


async def test_a_server_tools_image_and_structured_content_reach_the_client() -> None:
    from guardrails.integrations.mcp import tools_from_server

    app = MCPServer("legacy")

    @app.tool()
    def chart() -> Image:
        """A chart."""
        return Image(data=b"\x89PNG", format="png")

    @app.tool()
    def report(year: int) -> dict[str, int]:
        """A yearly report."""
        return {"year": year, "rows": 3}

    async with Client(app) as client:
        unguarded = await client.call_tool("report", {"year": 2025})
    rails = Guardrails(await tools_from_server(app))
    app.middleware.append(GuardedTools(rails, context=by_meta))
    async with Client(app) as client:
        image = await client.call_tool("chart", {})
        report_answer = await client.call_tool("report", {"year": 2025})
    assert [(b.type, b.mime_type) for b in image.content] == [("image", "image/png")]
    assert report_answer.structured_content == {"year": 2025, "rows": 3}
    assert text(report_answer) == text(unguarded)


def test_the_header_lookup_lists_nothing_unless_a_schema_declares_a_header() -> None:
    from guardrails import Tool
    from guardrails.integrations.mcp import header_lookup

    plain = Guardrails([get_invoices, export_all])
    lookup = header_lookup(plain)
    # Nothing to compare: the SDK skips its tools/list (and its pre_turn) per call.
    assert lookup is not None and lookup("get_invoices") is None
    assert guarded_server(plain).get_tool_input_schema is not None
    schema = {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    }
    annotated = Tool.from_definition({"name": "route", "inputSchema": schema}, lambda **kw: "ok")
    # A declared header: the SDK lists the caller's tools, so a hidden tool is never compared.
    assert header_lookup(Guardrails([get_invoices, annotated])) is None
    assert guarded_server(Guardrails([annotated])).get_tool_input_schema is None
