"""Tokens to tenants, secret providers, and the refusal counter."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from guardrails.errors import ConfigurationError
from guardrails.gateway import EnvSecrets, FileSecrets, SecretsConfig, secret_provider
from guardrails.gateway.auth import CountRefusals, TokenTable, load_tokens, parse_tokens
from guardrails.gateway.config import AuthConfig


def test_tokens_map_to_tenants_and_may_be_stored_as_digests() -> None:
    digest = hashlib.sha256(b"tok-b").hexdigest()
    table = TokenTable(parse_tokens(f"# staff\nacme tok-a\n\nglobex sha256:{digest}\n", "t"))
    assert table.tenant_of("tok-a") == "acme"
    assert table.tenant_of("tok-b") == "globex"
    assert table.tenant_of("tok-c") is None
    assert table.tenant_of("") is None


async def test_the_access_token_names_the_tenant_and_a_principal_not_the_token() -> None:
    table = TokenTable(parse_tokens("acme tok-a\nacme tok-z\n", "t"))
    first = await table.verify_token("tok-a")
    second = await table.verify_token("tok-z")
    assert first.client_id == second.client_id == "acme"
    assert first.subject != second.subject and "tok" not in first.subject
    assert await table.verify_token("nope") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("acme\n", "line 1: expected '<tenant> <token>'"),
        ("acme a b\n", "line 1: expected"),
        ("acme sha256:zz\n", "line 1: a bad sha256: digest"),
        ("acme t\nglobex t\n", "line 2: this token already maps to a tenant"),
    ],
)
def test_a_bad_token_line_is_named_without_its_token(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_tokens(text, "tokens.txt")
    assert str(caught.value).startswith(f"tokens.txt, {message}")


def test_tokens_come_from_a_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tokens").write_text("acme tok-a\n")
    monkeypatch.setenv("GW_TOKENS", "globex tok-g;initech tok-i")
    table = load_tokens(AuthConfig(tokens_file=str(tmp_path / "tokens"), tokens_env="GW_TOKENS"))
    assert sorted(table.values()) == ["acme", "globex", "initech"]
    with pytest.raises(ConfigurationError, match=r"auth\.tokens_file: cannot read"):
        load_tokens(AuthConfig(tokens_file=str(tmp_path / "absent")))


async def test_refusals_are_counted_and_answers_pass_through() -> None:
    counted: list[int] = []
    sent: list[Any] = []

    def app_answering(status: int) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": status})

        return app

    async def send(message: Any) -> None:
        sent.append(message)

    for status in (200, 401, 403, 500):
        await CountRefusals(app_answering(status), lambda: counted.append(1))(
            {"type": "http"}, None, send
        )  # type: ignore[arg-type]
    assert len(counted) == 2 and [m["status"] for m in sent] == [200, 401, 403, 500]


def test_env_secrets_read_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = EnvSecrets("GW_")
    monkeypatch.setenv("GW_KEY", "one")
    assert provider("KEY") == "one"
    monkeypatch.setenv("GW_KEY", "two")
    assert provider("KEY") == "two"
    assert provider("ABSENT") is None


def test_file_secrets_stay_in_their_directory(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("s3cret\n")
    (tmp_path.parent / "outside").write_text("no")
    provider = FileSecrets(tmp_path)
    assert provider("key") == "s3cret"
    for name in ("../outside", "absent", "", "..", "a/b"):
        assert provider(name) is None


def test_a_provider_factory_is_imported_by_name() -> None:
    vault = "tests.gateway.servers.vault"
    provider = secret_provider(SecretsConfig(provider=f"{vault}:provider"))
    assert provider("PAY_KEY") == "from-the-vault" and provider("OTHER") is None
    for bad in (f"{vault}:absent", "no_such_module_here:x", f"{vault}:not_a_provider"):
        with pytest.raises(ConfigurationError, match=r"secrets\.provider"):
            secret_provider(SecretsConfig(provider=bad))
