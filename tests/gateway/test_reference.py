"""Keys of the configuration reference that no other test exercises: each does what it says."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from mcp import Client

from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, parse_config
from guardrails.store import SQLiteStore

from .conftest import PY, SERVERS, text


def config(body: str, tmp_path: Path) -> Gateway:
    return Gateway(parse_config(tomllib.loads(body), base=tmp_path), secrets={}.get)


@pytest.mark.slow
async def test_name_is_the_server_name_and_cwd_the_upstreams_folder(tmp_path: Path) -> None:
    # The command names the server by a path relative to cwd: it starts only there.
    gateway = config(
        f'[gateway]\nname = "tools-of-acme"\nstore = "memory:"\n'
        f'[upstreams.billing]\ncommand = ["{PY}", "billing.py"]\ncwd = "{SERVERS}"\n',
        tmp_path,
    )
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        echoed = await client.call_tool("echo", {"text": "here"})
        info = client.server_info
    assert info is not None and info.name == "tools-of-acme"
    assert text(echoed) == "here"


@pytest.mark.slow
async def test_store_env_reads_the_store_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = (
        f'[gateway]\nstore_env = "GW_TEST_STORE"\n'
        f'[upstreams.billing]\ncommand = ["{PY}", "{SERVERS / "billing.py"}"]\n'
    )
    with pytest.raises(ConfigurationError, match=r"gateway\.store_env: \$GW_TEST_STORE is not set"):
        monkeypatch.delenv("GW_TEST_STORE", raising=False)
        async with config(body, tmp_path).running():
            pass
    monkeypatch.setenv("GW_TEST_STORE", str(tmp_path / "from-env.db"))
    gateway = config(body, tmp_path)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        await client.call_tool("echo", {"text": "x"})
    store = SQLiteStore(str(tmp_path / "from-env.db"))
    try:
        assert [r.tool for r in store.audit_rows(kind="tool_call")] == ["echo"]
    finally:
        store.close()
