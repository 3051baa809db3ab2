"""The first configuration of the docs works from any directory, and start errors are one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, load_config

from .conftest import ROOT

SERVER = '''
import os, sys
from mcp.server import MCPServer

app = MCPServer("where")


@app.tool()
def where() -> str:
    """The interpreter and the folder this server runs in."""
    return sys.executable + "|" + os.getcwd()


app.run("stdio")
'''


async def test_a_relative_command_runs_from_the_files_folder_with_the_gateways_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "where_server.py").write_text(SERVER)
    (folder / "gateway.toml").write_text(
        '[gateway]\nstore = "memory:"\n'
        '[upstreams.here]\ncommand = ["python", "where_server.py"]\nconnect_timeout = 60\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # A PATH whose `python` is not this one (none at all): the gateway's own runs.
    monkeypatch.setenv("PATH", str(elsewhere))
    gateway = Gateway(load_config("../conf/gateway.toml"))
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        answer = await client.call_tool("where", {})
    executable, cwd = answer.content[0].text.split("|")  # type: ignore[union-attr]
    assert executable == sys.executable
    assert Path(cwd).resolve() == folder.resolve()


async def test_a_start_error_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(
        f'[gateway]\nstore = "memory:"\n[tenants.acme]\ntools = ["nope"]\n'
        f'[upstreams.billing]\ncommand = ["{sys.executable}", "{ROOT}/tests/gateway/servers/billing.py"]\n'
    )
    with pytest.raises(ConfigurationError) as raised:
        async with Gateway(load_config(path)).running():
            pass
    assert str(raised.value) == f"{path}: tenants.acme.tools: no tool 'nope'"


def test_a_postgres_store_without_the_extra_is_one_line_and_status_2(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(
        '[gateway]\nstore = "postgresql://nobody@127.0.0.1:1/none"\n'
        '[upstreams.x]\ncommand = ["python", "-c", "pass"]\n'
    )
    # The interpreter as an install without psycopg sees it: the import fails.
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from guardrails.cli import main\n"
        f"sys.exit(main(['gateway', '--config', {str(path)!r}, '--stdio']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"guardrails gateway: {path}: gateway.store: a postgresql:// store needs the postgres "
        "extra: pip install 'guardrails-kit[postgres]'\n"
    )
