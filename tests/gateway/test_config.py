"""The gateway's TOML: every mistake names the file and the key, before anything starts."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from guardrails.errors import ConfigurationError
from guardrails.gateway import load_config, parse_config

UPSTREAM = '[upstreams.billing]\ncommand = ["python", "server.py"]\n'


def parse(text: str) -> object:
    return parse_config(tomllib.loads(text), base=Path("/etc/gw"), source="gw.toml")


def test_a_full_configuration_is_read_with_paths_from_the_files_folder() -> None:
    config = parse(
        '[gateway]\nstore = "audit.db"\npolicy = "policy.toml"\nmax_calls_per_session = 9\n'
        '[auth]\ntokens_file = "tokens"\ntokens_env = "TOKENS"\n'
        '[secrets]\nprovider = "file"\ndirectory = "/run/secrets"\n'
        '[tenants.acme]\ntools = ["lookup"]\nvalues = { account_id = "a-1" }\n'
        + UPSTREAM
        + "timeout = 2.5\n[upstreams.billing.tools.charge]\naction = true\n"
        'secrets = { api_key = "KEY" }\nbind = { account_id = "account_id" }\n'
        'idempotency_key = ["amount"]\n'
        '[upstreams.web]\nurl = "https://tools.example/mcp"\nheaders = { X-Team = "a" }\n'
    )
    assert config.store == "/etc/gw/audit.db"  # type: ignore[attr-defined]
    assert config.policy == "/etc/gw/policy.toml"  # type: ignore[attr-defined]
    assert config.auth.tokens_file == "/etc/gw/tokens"  # type: ignore[attr-defined]
    billing, web = config.upstreams  # type: ignore[attr-defined]
    assert billing.command == ("python", "server.py") and billing.timeout == 2.5
    assert billing.tools["charge"].secrets == {"api_key": "KEY"}
    assert billing.tools["charge"].idempotency_key == ("amount",)
    assert web.url == "https://tools.example/mcp" and web.headers == {"X-Team": "a"}
    assert config.tenants["acme"].tools == frozenset({"lookup"})  # type: ignore[attr-defined]
    assert billing.pin == "strict" and config.pin_interval == 10.0  # type: ignore[attr-defined]


def test_a_postgresql_store_is_kept_as_a_url_and_store_env_names_a_variable() -> None:
    pg = parse('[gateway]\nstore = "postgresql://gw@db/gw"\n' + UPSTREAM)
    env = parse('[gateway]\nstore_env = "GW_STORE"\n' + UPSTREAM)
    assert pg.store == "postgresql://gw@db/gw"  # type: ignore[attr-defined]
    absolute = parse('[gateway]\nstore = "sqlite:///var/lib/gw.db"\n' + UPSTREAM)
    assert absolute.store == "/var/lib/gw.db"  # type: ignore[attr-defined]
    assert parse('[gateway]\nstore = "memory:"\n' + UPSTREAM).store == "memory:"  # type: ignore[attr-defined]
    assert env.store == "env:GW_STORE"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "upstreams: declare at least one upstream"),
        ("[gatway]\n" + UPSTREAM, "gatway: unknown key"),
        ("[upstreams.b]\n", "upstreams.b: give exactly one of command"),
        ('[upstreams.b]\ncommand = ["x"]\nurl = "http://x"\n', "upstreams.b: give exactly one"),
        ("[upstreams.b]\ncommand = []\n", "upstreams.b.command: must be a non-empty list"),
        ('[upstreams.b]\nurl = "ftp://x"\n', "upstreams.b.url: must be an http"),
        (UPSTREAM + "timeout = 0\n", "upstreams.billing.timeout: must be positive"),
        (UPSTREAM + 'timeout = "1"\n', "upstreams.billing.timeout: must be a number"),
        (UPSTREAM + "timeout = nan\n", "upstreams.billing.timeout: must be positive"),
        (UPSTREAM + "retries = 3\n", "upstreams.billing.retries: unknown key"),
        (
            UPSTREAM + '[upstreams.billing.tools.t]\nsecrets = { k = "K" }\n',
            "upstreams.billing.tools.t.secrets: secrets go only into tools declared action",
        ),
        (
            UPSTREAM + "[upstreams.billing.tools.t]\nbind = { k = 1 }\n",
            "upstreams.billing.tools.t.bind.k: must be a non-empty string",
        ),
        (
            UPSTREAM + '[upstreams.billing.tools.t]\naction = "yes"\n',
            "upstreams.billing.tools.t.action: must be true or false",
        ),
        (
            UPSTREAM + "[upstreams.billing.tools.t]\nidempotency_key = 3\n",
            "upstreams.billing.tools.t.idempotency_key",
        ),
        ("[gateway]\nmax_calls_per_session = -1\n" + UPSTREAM, "gateway.max_calls_per_session"),
        ("[gateway]\nmax_calls_per_session = true\n" + UPSTREAM, "gateway.max_calls_per_session"),
        ('[secrets]\nprovider = "vault"\n' + UPSTREAM, "secrets.provider: use env, file"),
        ('[secrets]\nprovider = "file"\n' + UPSTREAM, "secrets.directory: the file provider"),
        ('[tenants.a]\ntools = "lookup"\n' + UPSTREAM, "tenants.a.tools: must be a list"),
        ("[auth]\ntokens = 1\n" + UPSTREAM, "auth.tokens: unknown key"),
        (UPSTREAM + 'pin = "Strict"\n', "upstreams.billing.pin: must be one of ['strict', 'auto']"),
        (UPSTREAM + "pin = true\n", "upstreams.billing.pin: must be one of"),
        ("[gateway]\npin_interval = 0\n" + UPSTREAM, "gateway.pin_interval: must be positive"),
        ("[gateway]\nmax_result_chars = 10\n" + UPSTREAM, "gateway.max_result_chars: must be at"),
        ('[gateway]\nstore = "a"\nstore_env = "B"\n' + UPSTREAM, "gateway.store_env: give store"),
        ('[gateway]\nstore = "redis://x"\n' + UPSTREAM, "gateway.store: use a file path"),
        ("[workflows.w]\nsteps = []\n" + UPSTREAM, "workflows.w.steps: must be a non-empty"),
        ('[workflows.w]\nsteps = ["a"]\n' + UPSTREAM, "workflows.w.steps[0]: must be a table"),
        (
            '[workflows.w]\nsteps = [{ tool = "a" }]\n' + UPSTREAM,
            "workflows.w.steps[0].instructions: must be a non-empty string",
        ),
        (
            '[workflows.w]\nsteps = [{ tool = "a", instructions = "x" }, '
            '{ tool = "a", instructions = "y" }]\n' + UPSTREAM,
            "workflows.w.steps: a tool appears twice",
        ),
    ],
)
def test_a_mistake_names_the_file_and_the_key(text: str, where: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse(text)
    assert str(caught.value).startswith(f"gw.toml: {where}")


def test_a_missing_or_broken_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read the gateway config"):
        load_config(tmp_path / "absent.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[gateway\n")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_config(broken)
