"""Starting a gateway: bad wiring is a clear error before any client is served."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, UpstreamStartError, parse_config
from guardrails.gateway.catalog import published_names
from guardrails.gateway.config import TenantConfig, UpstreamConfig
from guardrails.gateway.sessions import Sessions

from .conftest import BILLING, PY, ROOT, command_toml

BASE = f'[gateway]\nstore = "memory:"\n[upstreams.billing]\ncommand = {command_toml(BILLING)}\n'


def gateway(text: str) -> Gateway:
    return Gateway(parse_config(tomllib.loads(text)))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[upstreams.billing.tools.refund]\naction = true\n", "upstreams.billing.tools.refund"),
        (
            '[upstreams.billing.tools.lookup]\nbind = { nope = "tenant" }\n',
            "upstreams.billing.tools.lookup: tool 'lookup': bound parameter 'nope'",
        ),
        ('[tenants.acme]\ntools = ["lookup", "refund"]\n', "tenants.acme.tools: no tool 'refund'"),
    ],
)
@pytest.mark.slow
async def test_configuration_that_does_not_match_the_upstream_fails_at_start(
    extra: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        async with gateway(BASE + extra).running():
            pass


@pytest.mark.slow
async def test_a_policy_file_that_does_not_match_the_published_tools_fails_at_start(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[tools.refund.params.amount]\nmax = 10\n")
    text = BASE.replace('store = "memory:"', f'store = "memory:"\npolicy = "{policy}"')
    with pytest.raises(ConfigurationError, match=r"gateway.policy: .*p.toml.*refund"):
        async with gateway(text).running():
            pass


async def test_an_upstream_that_never_starts_is_named() -> None:
    text = (
        '[gateway]\nstore = "memory:"\n[upstreams.broken]\n'
        f"command = {command_toml([PY, '-c', 'import time; time.sleep(60)'])}\n"
        "connect_timeout = 1\nbackoff_initial = 0.05\n"
    )
    with pytest.raises(UpstreamStartError, match=r"upstreams.broken: not listed within 1s"):
        async with gateway(text).running():
            pass


async def test_a_child_that_exits_at_once_is_reported_at_once_with_its_status() -> None:
    # A connect_timeout far longer than the test may take: the report cannot be its expiry.
    text = (
        '[gateway]\nstore = "memory:"\n[upstreams.broken]\n'
        f"command = {command_toml([PY, '-c', 'raise SystemExit(7)'])}\n"
        "connect_timeout = 600\n"
    )
    with anyio.fail_after(60):
        with pytest.raises(UpstreamStartError) as raised:
            async with gateway(text).running():
                pass
    assert (
        str(raised.value) == "<config>: upstreams.broken: exited with status 7 before it was listed"
    )


async def test_a_command_that_cannot_be_started_is_named_with_its_key() -> None:
    text = (
        '[gateway]\nstore = "memory:"\n[upstreams.broken]\n'
        'command = ["/nonexistent/server"]\nconnect_timeout = 600\n'
    )
    with anyio.fail_after(60), pytest.raises(UpstreamStartError) as raised:
        async with gateway(text).running():
            pass
    assert str(raised.value) == (
        "<config>: upstreams.broken.command: cannot start '/nonexistent/server' "
        "(No such file or directory)"
    )


def _upstream(name: str, tools: list[str], prefix: bool = False) -> Any:
    return SimpleNamespace(
        name=name,
        config=UpstreamConfig(name=name, command=("x",), prefix=prefix),
        tools=[SimpleNamespace(name=t) for t in tools],
    )


def test_a_clash_is_refused_and_the_first_owner_keeps_its_name() -> None:
    names = published_names(
        [
            _upstream("a", ["read", "only_a"]),
            _upstream("b", ["read", "a__write", "b__own"]),
            _upstream("c", ["x"], True),
        ]
    )
    assert dict(names.published) == {
        ("a", "read"): "read",
        ("a", "only_a"): "only_a",
        ("b", "b__own"): "b__own",
        ("c", "x"): "c__x",
    }
    assert [(c.upstream, c.tool, c.owner) for c in names.clashes] == [
        ("b", "read", "a"),
        ("b", "a__write", "a"),  # another upstream's space, even before it lists the name
    ]


def test_a_published_name_never_moves_to_another_upstream() -> None:
    first = published_names([_upstream("a", ["read"]), _upstream("b", [])])
    # At a later listing, a no longer lists it and b does, first in order: b is refused.
    later = published_names([_upstream("b", ["read"]), _upstream("a", [])], first.owners)
    assert dict(later.published) == {}
    assert [(c.upstream, c.name, c.owner) for c in later.clashes] == [("b", "read", "a")]
    # A name nobody held goes to the first to list it; the near-miss "read_" is another name.
    fresh = published_names([_upstream("b", ["read_", "write"])], first.owners)
    assert dict(fresh.published) == {("b", "read_"): "read_", ("b", "write"): "write"}


def _ctx(headers: dict[str, str] | None, meta: Any = None, subject: str = "p1") -> Any:
    from mcp.server.auth.provider import AccessToken

    token = AccessToken(token="t", client_id="acme", scopes=[], subject=subject)
    request = (
        None
        if headers is None
        else SimpleNamespace(headers=headers, scope={"user": SimpleNamespace(access_token=token)})
    )
    return SimpleNamespace(request=request, meta=meta, session=object())


def test_sessions_are_scoped_by_principal_and_hold_no_client_text() -> None:
    sessions = Sessions({"acme": TenantConfig(values={"account_id": "a-1"})}, "local")
    chosen = sessions(_ctx({"guardrails-session": "my-key"}))
    assert chosen.tenant == "acme" and chosen.values["account_id"] == "a-1"
    assert chosen.session is not None and "my-key" not in chosen.session
    assert sessions(_ctx({"guardrails-session": "my-key"}, subject="p2")).session != chosen.session
    assert sessions(_ctx({}, meta={"guardrails/session": "my-key"})).session == chosen.session
    by_mcp = sessions(_ctx({"mcp-session-id": "abc"})).session
    assert by_mcp is not None and by_mcp.startswith("mcp:") and "abc" not in by_mcp
    assert sessions(_ctx({})).session is None  # stateless HTTP without a key
    for hostile in ({"guardrails/session": 7}, ["not", "a", "mapping"], {"guardrails/session": ""}):
        assert sessions(_ctx({}, meta=hostile)).session is None


def test_stdio_is_one_session_for_the_process_and_the_configured_tenant() -> None:
    sessions = Sessions({}, "local")
    first, second = sessions(_ctx(None)), sessions(_ctx(None))
    assert first.tenant == "local" and first.session == second.session
    assert Sessions({}, "local")(_ctx(None)).session != first.session


def test_without_mcp_the_command_says_which_extra_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "from guardrails.cli import main\n"
        "sys.exit(main(['gateway', '--config', 'gateway.toml']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr == (
        "guardrails gateway: needs the mcp extra: pip install 'guardrails-kit[mcp]'\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "absent.toml"], "cannot read the gateway config"),
        (["--config", "gw.toml", "--http", "nowhere"], "--http 'nowhere': expected HOST:PORT"),
        (["--config", "gw.toml", "--http", "127.0.0.1:0"], "auth: serving over HTTP needs"),
        (["--config", "dead.toml", "--stdio"], "dead.toml: upstreams.dead: exited with status 1"),
        (["--config", "gw.toml", "--stdio", "--metrics", "TAKEN"], "cannot listen"),
    ],
)
@pytest.mark.slow
def test_command_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    import socket

    (tmp_path / "gw.toml").write_text(BASE)
    (tmp_path / "dead.toml").write_text(
        '[gateway]\nstore = "memory:"\n[upstreams.dead]\n'
        f"command = {command_toml([PY, '-c', 'raise SystemExit(1)'])}\nconnect_timeout = 1\n"
    )
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    args = [a.replace("TAKEN", f"127.0.0.1:{taken.getsockname()[1]}") for a in args]
    with taken:
        done = subprocess.run(
            [sys.executable, "-m", "guardrails.cli", "gateway", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 2
    # Warnings may come first (an upstream restarting); the error is the last line.
    *_, last = done.stderr.splitlines()
    assert last.startswith("guardrails gateway: ") and message in last


@pytest.mark.slow
async def test_stdio_serves_metrics_where_asked(tmp_path: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    from .conftest import scrape

    (tmp_path / "gw.toml").write_text(BASE)
    errors = tmp_path / "stderr"
    params = StdioServerParameters(
        command=PY,
        args=["-m", "guardrails.cli", "gateway", "--config", "gw.toml", "--metrics", "127.0.0.1:0"],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(tmp_path),
    )
    with errors.open("w") as errlog:
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            await client.call_tool("echo", {"text": "x"})
            with anyio.fail_after(30):
                while "metrics on" not in errors.read_text():
                    await anyio.sleep(0.02)
            url = errors.read_text().split("metrics on ", 1)[1].split()[0]
            metrics = scrape(url.replace("/metrics", "/mcp"))
    assert 'guardrails_tool_outcomes_total{outcome="ok",tool="echo"} 1.0' in metrics


@pytest.mark.slow
async def test_a_workflow_step_that_is_no_tool_fails_at_start() -> None:
    text = (
        BASE
        + '[workflows.w]\nsteps = [{ tool = "echo", instructions = "a" }, '
        + ('{ tool = "refund", instructions = "b" }]\n')
    )
    with pytest.raises(ConfigurationError, match=r"workflows\.w\.steps: no tool 'refund'"):
        async with gateway(text).running():
            pass


async def test_an_upstream_whose_secret_is_missing_does_not_start() -> None:
    text = (
        '[gateway]\nstore = "memory:"\n[upstreams.billing]\n'
        f"command = {command_toml(BILLING)}\n"
        'env = { KEY = "${SURELY_NOT_A_SECRET_ANYWHERE}" }\nconnect_timeout = 1\n'
    )
    with pytest.raises(UpstreamStartError, match=r"upstreams\.billing: not listed within 1s"):
        async with gateway(text).running():
            pass


def test_the_package_and_the_command_import_without_mcp_or_anyio() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None; sys.modules['anyio'] = None\n"
        "import guardrails.gateway, guardrails.cli\n"
        "guardrails.cli._build_parser()\n"
        "config = guardrails.gateway.parse_config({'upstreams': {'u': {'url': 'http://x'}}})\n"
        "assert config.upstreams[0].name == 'u'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
