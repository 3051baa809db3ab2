"""The first configuration of the docs works from any directory, and start errors are one line."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, load_config

from .conftest import ROOT, http_client, started, text

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def first_configuration() -> tuple[dict[str, str], str]:
    """The files of the docs' "A first configuration" (name -> text), and its command line."""
    page = (ROOT / "docs" / "gateway.md").read_text()
    section = page.split("## A first configuration\n", 1)[1].split("\n## ", 1)[0]
    files = dict(re.findall(r"`(\w+\.\w+)`[^`]*?:\n\n```\w+\n(.*?)```", section, re.S))
    command = re.search(r"```console\n\$ (.*?)\n", section)
    assert command is not None
    return files, command.group(1)


@pytest.mark.slow
async def test_the_docs_first_configuration_works_as_written_from_another_directory(
    tmp_path: Path,
) -> None:
    files, command = first_configuration()
    assert sorted(files) == ["billing_server.py", "gateway.toml", "tokens.txt"]
    folder = tmp_path / "billing"  # the folder the command line names
    folder.mkdir()
    for name, body in files.items():
        (folder / name).write_text(body)
    variable, program, *args = shlex.split(command)
    assert program == "guardrails" and args[:3] == ["gateway", "--config", "billing/gateway.toml"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # A fresh venv's console script, run by its path: no `python` on PATH at all.
    script = Path(sys.executable).parent / "guardrails"
    launcher = [str(script)] if script.exists() else [sys.executable, "-m", "guardrails.cli"]
    args[2] = "../billing/gateway.toml"
    args[args.index("--http") + 1] = "127.0.0.1:0"
    name, value = variable.split("=", 1)
    env = {"PATH": str(elsewhere), name: value, "PYTHONPATH": str(ROOT)}
    tenant, token = files["tokens.txt"].split()
    async with (
        started(
            [*launcher, *args],
            r"listening on (http://\S+/mcp)",
            stderr=True,
            env=env,
            cwd=elsewhere,
        ) as (url, _),
        http_client(url, token, "first") as client,  # a session, for the workflow
    ):
        first = await listed(client)
        refused = await client.call_tool("lookup", {"year": 2026, "account_id": "acc-1"})
        looked = await client.call_tool("lookup", {"year": 2026})
        then = await listed(client)
        charged = await client.call_tool("charge", {"amount": -5, "invoice": "inv-1"})
    assert tenant == "acme"
    assert first == {"lookup": ["year"]} and then == {"charge": ["amount", "invoice"]}
    assert refused.is_error and text(refused).startswith("The arguments were not accepted.")
    assert text(looked) == (
        "acc-7: 2 invoices in 2026\n\nCheck the invoice, then call charge with a negative amount."
    )
    assert text(charged) == (
        "charged -5 to acc-7 for inv-1 with key [redacted]\n\nRefunded: tell the customer."
    )
    assert (folder / "audit.db").exists()  # the store, next to the file


async def listed(client: Client) -> dict[str, list[str]]:
    """Each listed tool's parameters."""
    tools = (await client.list_tools()).tools
    return {t.name: sorted(t.input_schema["properties"]) for t in tools}
