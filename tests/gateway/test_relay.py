"""An upstream's questions (elicitation) and sampling during a call, relayed to the
client that made the call, or refused as the upstream's configuration says.

The upstream (``servers/asking.py``) asks through the SDK's resolvers: over
2026-07-28 it answers ``input_required``, which the gateway hands to a
client of that protocol (its retry is a guarded call of its own) or resolves
itself by asking an older client. With ``--legacy`` it sends the older
mid-call requests, relayed only when one call is in flight.
"""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from guardrails.audit import AuditLog
from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.upstream import MAX_ROUNDS, _http
from guardrails.verdicts import Outcome, Reason, model_sentence

from .conftest import (
    GATEWAY_ENV,
    PY,
    ROOT,
    SECRET,
    SERVERS,
    TOKENS,
    command_toml,
    http_gateway,
    text,
    write_config,
)

ASKING = [PY, str(SERVERS / "asking.py")]
ERROR = model_sentence(Outcome.ERROR)
QUESTION = "Your name? (key [redacted])"


def upstream(extra: str = "", *, legacy: bool = False) -> str:
    command = [*ASKING, "--legacy"] if legacy else ASKING
    return f"""
[upstreams.asking]
command = {command_toml(command)}
env = {{ ASKING_KEY = "${{PAY_KEY}}" }}
{extra}
"""


class User:
    """A client's elicitation and sampling callbacks: each request noted, answered as ``name``."""

    def __init__(self, name: str = "ann") -> None:
        self.name = name
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: Any) -> Any:
        from mcp.types import ElicitResult

        self.asked.append(params.message)
        return ElicitResult(action="accept", content={"name": self.name})

    async def sample(self, context: Any, params: Any) -> Any:
        from mcp.types import CreateMessageResult, TextContent

        self.asked.append(params.messages[0].content.text)
        content = TextContent(type="text", text=f"word of {self.name}")
        return CreateMessageResult(role="assistant", content=content, model="m")

    def client(self, target: Any, mode: str = "auto") -> Client:
        return Client(
            target,
            cache=None,
            mode=mode,  # type: ignore[arg-type]
            elicitation_callback=self.elicit,
            sampling_callback=self.sample,
        )


@asynccontextmanager
async def running(tmp_path: Path, body: str) -> AsyncIterator[Gateway]:
    toml = '[gateway]\nstore = "audit.db"\n' + body
    config = parse_config(tomllib.loads(toml), base=tmp_path)
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get, health_interval=3600)
    async with gateway.running():
        yield gateway


def rows(gateway: Gateway, kind: str = "tool_call") -> list[tuple[Any, ...]]:
    assert gateway.store is not None
    log = AuditLog(gateway.store).rows(kind=kind)
    return [(r.tool, r.outcome, r.reason) for r in log]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.slow
async def test_the_question_reaches_the_caller_without_the_upstreams_secret(
    tmp_path: Path, mode: str
) -> None:
    user = User()
    async with running(tmp_path, upstream()) as gateway, user.client(gateway.server(), mode) as c:
        answer = await c.call_tool("greet", {"greeting": "hi"})
        calls = rows(gateway)
    assert text(answer) == "hi ann" and not answer.is_error
    assert user.asked == [QUESTION] and SECRET not in repr(user.asked)
    # A 2026-07-28 client answers and retries: two rounds; an older one is asked by the gateway.
    asked = [("greet", "unavailable", "input_required")] if mode == "auto" else []
    assert calls == [*asked, ("greet", "ok", None)]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.slow
async def test_sampling_is_refused_unless_the_upstream_says_relay(
    tmp_path: Path, mode: str
) -> None:
    user = User()
    async with running(tmp_path, upstream()) as gateway, user.client(gateway.server(), mode) as c:
        refused = await c.call_tool("draft", {"topic": "t"})
    assert refused.is_error and text(refused) == ERROR and user.asked == []
    relayed = upstream('sampling = "relay"')
    async with running(tmp_path, relayed) as gateway, user.client(gateway.server(), mode) as c:
        answer = await c.call_tool("draft", {"topic": "t"})
    assert text(answer) == "t: word of ann" and user.asked == ["a word ([redacted])"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.slow
async def test_refuse_and_a_client_without_the_capability_answer_as_before(
    tmp_path: Path, mode: str
) -> None:
    user = User()
    refuse = upstream('elicitation = "refuse"')
    async with running(tmp_path, refuse) as gateway, user.client(gateway.server(), mode) as c:
        refused = await c.call_tool("greet", {"greeting": "hi"})
    async with (
        running(tmp_path, upstream()) as gateway,
        Client(gateway.server(), cache=None, mode=mode) as plain,  # type: ignore[arg-type]
    ):
        undeclared = await plain.call_tool("greet", {"greeting": "hi"})
    for answer in (refused, undeclared):
        assert answer.is_error and text(answer) == ERROR
    assert user.asked == []


@pytest.mark.slow
async def test_the_retry_is_a_call_guarded_again(tmp_path: Path) -> None:
    from mcp.types import ElicitResult, InputRequiredResult

    async with running(tmp_path, upstream()) as gateway, User().client(gateway.server()) as c:
        first = await c.session.call_tool("greet", {"greeting": "hi"}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        assert "asking" not in repr(first.meta)  # the upstream's own _meta stays behind
        ((key, question),) = (first.input_requests or {}).items()
        assert question.params.message == QUESTION  # type: ignore[union-attr]
        answers: Any = {key: ElicitResult(action="accept", content={"name": "bob"})}

        async def retry(arguments: dict[str, Any]) -> Any:
            state = first.request_state
            return await c.call_tool(
                "greet", arguments, input_responses=answers, request_state=state
            )

        changed = await retry({"greeting": 5})
        undeclared = await retry({"greeting": "hi", "extra": "x"})
        answered = await retry({"greeting": "hi"})
        calls = rows(gateway)
    invalid = model_sentence(Outcome.INVALID_ARGS)
    assert changed.is_error and text(changed).startswith(invalid)
    assert undeclared.is_error and text(undeclared).startswith(invalid)
    assert text(answered) == "hi bob"
    assert [outcome for _, outcome, _ in calls] == [
        "unavailable", "invalid_args", "invalid_args", "ok"
    ]  # fmt: skip


@pytest.mark.slow
async def test_a_request_state_answers_only_the_call_it_was_handed_to(tmp_path: Path) -> None:
    from mcp.types import ElicitResult

    unavailable = model_sentence(Outcome.UNAVAILABLE)
    mine: Any = {"guardrails/session": "mine"}
    theirs: Any = {"guardrails/session": "theirs"}
    async with running(tmp_path, upstream()) as gateway, User().client(gateway.server()) as c:
        first: Any = await c.session.call_tool(
            "greet", {"greeting": "hi"}, allow_input_required=True, meta=mine
        )
        (key,) = first.input_requests
        answers: Any = {key: ElicitResult(action="accept", content={"name": "bob"})}
        state = first.request_state
        assert state.startswith("grs1.")

        async def retry(meta: Any, sealed: str | None, tool: str = "greet") -> str:
            arguments = {"greeting": "hi"} if tool == "greet" else {}
            return text(await c.call_tool(
                tool, arguments, input_responses=answers, request_state=sealed, meta=meta
            ))  # fmt: skip

        other_session = await retry(theirs, state)
        other_tool = await retry(mine, state, "forever")
        forged = await retry(mine, state[:-2] + "xx")
        stateless = await retry(mine, None)
        answered = await retry(mine, state)
        calls = rows(gateway)
    assert [other_session, other_tool, forged, stateless] == [unavailable] * 4
    assert answered == "hi bob"
    # unavailable, not the upstream's own refusal (error): the gateway refused them.
    assert [(tool, outcome) for tool, outcome, _ in calls] == [
        ("greet", "unavailable"), ("greet", "unavailable"), ("forever", "unavailable"),
        ("greet", "unavailable"), ("greet", "unavailable"), ("greet", "ok"),
    ]  # fmt: skip
    assert [reason for _, _, reason in calls][:2] == ["input_required", "raised"]


@pytest.mark.slow
async def test_a_call_asked_a_question_counts_once(tmp_path: Path) -> None:
    body = upstream("""
[upstreams.asking.tools.greet]
cost = 1.0
instance_cap = 1.0
""")
    meta: Any = {"guardrails/session": "s1"}
    toml = "max_calls_per_session = 1\n" + body
    async with running(tmp_path, toml) as gateway, User().client(gateway.server()) as c:
        answered = await c.call_tool("greet", {"greeting": "hi"}, meta=meta)
        again = await c.call_tool("greet", {"greeting": "hi"}, meta=meta)
        calls = rows(gateway)
        assert gateway.store is not None
        paid = [(r.outcome, r.cost) for r in AuditLog(gateway.store).rows(kind="paid_call")]
    assert text(answered) == "hi ann"
    assert again.is_error and text(again) == model_sentence(Outcome.LIMIT)
    assert [(outcome, reason) for _, outcome, reason in calls] == [
        ("unavailable", Reason.INPUT_REQUIRED.value), ("ok", None), ("limit", "ceiling")
    ]  # fmt: skip
    assert [cost for _, cost in paid] == [0.0, 1.0]  # the round at zero, the answer at its cost


@pytest.mark.slow
async def test_an_older_client_is_asked_at_most_max_rounds_times(tmp_path: Path) -> None:
    user = User()
    async with (
        running(tmp_path, upstream()) as gateway,
        user.client(gateway.server(), "legacy") as c,
    ):
        answer = await c.call_tool("forever", {})
    assert answer.is_error and text(answer) == ERROR
    assert user.asked == ["again?"] * MAX_ROUNDS


@pytest.mark.slow
async def test_an_older_upstreams_question_reaches_its_one_caller(tmp_path: Path) -> None:
    older, modern = User("old"), User("new")
    async with (
        running(tmp_path, upstream(legacy=True)) as gateway,
        older.client(gateway.server(), "legacy") as old,
        modern.client(gateway.server()) as new,
    ):
        asked = await old.call_tool("ask", {})
        unasked = await new.call_tool("ask", {})  # a 2026-07-28 client cannot be asked mid-call
        greeted = await old.call_tool("greet", {"greeting": "hi"})
    assert text(asked) == "elicitation accept name='old'" and text(greeted) == "hi old"
    assert older.asked == [QUESTION, QUESTION] and modern.asked == []
    assert text(unasked) == "elicitation refused (MCPError)"


@pytest.mark.slow
async def test_an_older_upstreams_question_during_two_calls_asks_no_one(tmp_path: Path) -> None:
    asking, holding = User("asking"), User("holding")
    marker = tmp_path / "release"
    async with (
        running(tmp_path, upstream(legacy=True)) as gateway,
        asking.client(gateway.server(), "legacy") as one,
        holding.client(gateway.server(), "legacy") as other,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(other.call_tool, "hold", {"path": str(marker)})
        with anyio.fail_after(30):
            while not (tmp_path / "release.started").exists():
                await anyio.sleep(0.01)
        refused = await one.call_tool("ask", {})
        marker.touch()
    assert text(refused) == "elicitation refused (MCPError)"
    assert asking.asked == [] and holding.asked == []


@pytest.mark.slow
async def test_an_older_upstreams_question_during_a_prompt_asks_no_caller(
    tmp_path: Path,
) -> None:
    holding = User("holding")
    marker = tmp_path / "release"
    body = upstream('prompts = ["named"]', legacy=True)
    async with (
        running(tmp_path, body) as gateway,
        holding.client(gateway.server(), "legacy") as other,
        User("reader").client(gateway.server(), "legacy") as reader,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(other.call_tool, "hold", {"path": str(marker)})
        with anyio.fail_after(30):
            while not (tmp_path / "release.started").exists():
                await anyio.sleep(0.01)
        prompt = await reader.get_prompt("asking__named")
        marker.touch()
    assert holding.asked == []  # the one tool call in flight is not the prompt's
    assert "elicitation refused" in str(prompt.messages[0].content)


@pytest.mark.slow
async def test_over_http_each_tenant_answers_only_its_own_question(tmp_path: Path) -> None:
    body = upstream() + "[tenants.acme]\n[tenants.globex]\n"
    acme, globex = User("acme"), User("globex")
    answers: dict[str, str] = {}

    def client(url: str, tenant: str, user: User) -> Client:
        return user.client(_http(url, {"Authorization": f"Bearer {TOKENS[tenant]}"}))

    async with (
        http_gateway(write_config(tmp_path, body)) as (url, _),
        client(url, "acme", acme) as one,
        client(url, "globex", globex) as other,
    ):

        async def greet(name: str, c: Client) -> None:
            answers[name] = text(await c.call_tool("greet", {"greeting": "hi"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(greet, "acme", one)
            tg.start_soon(greet, "globex", other)
    assert answers == {"acme": "hi acme", "globex": "hi globex"}
    assert acme.asked == [QUESTION] and globex.asked == [QUESTION]


@pytest.mark.slow
async def test_over_stdio_the_gateway_asks_an_older_client(tmp_path: Path) -> None:
    config = write_config(tmp_path, upstream())
    params = StdioServerParameters(
        command=PY,
        args=["-m", "guardrails.cli", "gateway", "--config", str(config), "--stdio"],
        env=GATEWAY_ENV,
        cwd=str(ROOT),
    )
    user = User()
    async with user.client(params, "legacy") as c:
        answer = await c.call_tool("greet", {"greeting": "hi"})
    assert text(answer) == "hi ann" and user.asked == [QUESTION]


@pytest.mark.parametrize("key", ["elicitation", "sampling"])
def test_a_mistyped_switch_is_a_configuration_error(tmp_path: Path, key: str) -> None:
    body = upstream(f'{key} = "relayed"')
    with pytest.raises(ConfigurationError) as raised:
        parse_config(tomllib.loads(body), base=tmp_path)
    assert str(raised.value).endswith(f"upstreams.asking.{key}: must be one of "
                                      f"{['relay', 'refuse'] if key == 'elicitation' else ['refuse', 'relay']}, not 'relayed'")  # fmt: skip


@pytest.mark.slow
async def test_over_http_an_older_client_is_not_asked(tmp_path: Path) -> None:
    # The gateway answers each HTTP request with one JSON body: no stream to ask on.
    user = User()
    headers = {"Authorization": f"Bearer {TOKENS['acme']}"}
    async with (
        http_gateway(write_config(tmp_path, upstream())) as (url, _),
        user.client(_http(url, headers), "legacy") as c,
    ):
        answer = await c.call_tool("greet", {"greeting": "hi"})
    assert answer.is_error and text(answer) == ERROR and user.asked == []


def test_the_docs_name_the_rounds_audit_and_the_defaults() -> None:
    from guardrails.gateway.config import UpstreamConfig

    page = (ROOT / "docs" / "gateway.md").read_text()
    assert Reason.INPUT_REQUIRED.value == "input_required"
    assert "outcome `unavailable` and reason `input_required`" in " ".join(page.split())
    defaults = UpstreamConfig(name="u")
    assert f"| `elicitation` | `{defaults.elicitation}` |" in page
    assert f"| `sampling` | `{defaults.sampling}` |" in page
    assert f"at most {MAX_ROUNDS} rounds" in page
