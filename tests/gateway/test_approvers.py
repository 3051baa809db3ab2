"""The approvers table: who may decide over HTTP, for which tenant; read again when it changes."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from guardrails import Guardrails, tool
from guardrails.approvals import Approvals
from guardrails.errors import ConfigurationError
from guardrails.gateway.approvers import (
    Approver,
    Approvers,
    ApproverTable,
    load_approvers,
    parse_approvers,
)
from guardrails.gateway.settings import ApprovalsConfig
from guardrails.store import MemoryStore


def test_entries_map_a_token_to_its_tenant_and_approver() -> None:
    digest = hashlib.sha256(b"tok-b").hexdigest()
    text = f"# who decides\nacme alice tok-a\n\nglobex bob sha256:{digest}\n"
    table = ApproverTable(ApprovalsConfig(), parse_approvers(text, "approvers.txt"))
    assert table.approver("tok-a") == Approver("acme", "alice")
    assert table.approver("tok-b") == Approver("globex", "bob")
    assert table.approver("tok-c") is None
    assert table.approver("") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("acme tok-a\n", "line 1: expected '<tenant> <approver> <token>'"),
        ("acme alice tok-a extra\n", "line 1: expected"),
        ("acme alice sha256:zz\n", "line 1: a bad sha256: digest"),
        ("acme alice tok-a\nglobex bob tok-a\n", "line 2: this token is listed twice"),
    ],
)
def test_a_bad_line_is_named_without_its_token(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        parse_approvers(text, "approvers.txt")
    assert "tok-a" not in str(caught.value)


def test_the_file_is_read_again_when_it_changes_and_a_bad_one_keeps_the_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "approvers.txt"
    path.write_text("acme alice tok-a\n")
    monkeypatch.setenv("APPROVERS", "globex bob tok-b;globex carol tok-c")
    config = ApprovalsConfig(approvers_file=str(path), approvers_env="APPROVERS")
    table = ApproverTable(config, load_approvers(config))
    assert table.approver("tok-c") == Approver("globex", "carol")
    path.write_text("acme dave tok-d\n")
    os.utime(path, ns=(1, 1))  # a change the stamp sees even within one clock tick
    assert table.approver("tok-a") is None  # removed: decides no more
    assert table.approver("tok-d") == Approver("acme", "dave")
    path.write_text("acme broken\n")
    os.utime(path, ns=(2, 2))
    assert table.approver("tok-d") == Approver("acme", "dave")


# -- OAuth approvers: a JWT with the configured scope ----------------------------------------


def _routes_app(store: Any, approvers: Approvers) -> Any:
    from starlette.applications import Starlette

    from guardrails.gateway.approvals_http import approval_routes

    return Starlette(routes=approval_routes(lambda: store, approvers))


async def test_a_jwt_with_the_approvals_scope_decides_for_its_tenant_as_its_subject(
    tmp_path: Path,
) -> None:
    import httpx

    from guardrails.approvals import ApprovalGate
    from guardrails.gateway.oauth import JwtVerifier

    from .oauth_issuer import Issuer
    from .test_oauth_tokens import config

    issuer = Issuer()
    oauth = config(issuer.write(tmp_path / "jwks.json"))
    table = ApproverTable(ApprovalsConfig(), parse_approvers("acme alice tok-a\n", "f"))
    approvers = Approvers(table, JwtVerifier(oauth), "approvals")
    store = MemoryStore()

    @tool(approval="always")
    def wipe(disk: str) -> str:
        return "wiped"

    engine = Guardrails([wipe], hooks=[ApprovalGate(store)])
    for tenant in ("acme", "globex"):
        engine.turn(tenant=tenant, session="s").call("wipe", {"disk": "a"})
    [acme_request] = Approvals(store, tenant="acme").list()
    transport = httpx.ASGITransport(app=_routes_app(store, approvers))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:

        async def ask(token: str, path: str = "/approvals") -> Any:
            return await http.get(path, headers={"Authorization": f"Bearer {token}"})

        approver = issuer.token(scope="read approvals", sub="u-7")
        assert [r["tenant"] for r in (await ask(approver)).json()["requests"]] == ["acme"]
        assert (await ask("tok-a")).status_code == 200  # the table's approvers as well
        for refused in (
            issuer.token(scope="read"),  # an MCP client's token
            issuer.token(scope="approvals", aud="https://other.test/mcp"),
            issuer.token(scope="approvals", exp=int(time.time()) - 3600),
            issuer.token(scope="approvals", tenant=None),
            issuer.token(scope="approvals", sub=None),
            issuer.token(scope="approvals", sub=" "),
        ):
            assert (await ask(refused)).status_code == 401
        decided = await http.post(
            f"/approvals/{acme_request.id}/approve",
            json={},
            headers={"Authorization": f"Bearer {approver}"},
        )
    assert decided.json()["request"]["decided_by"] == "oauth:u-7"


def test_an_oauth_scope_without_an_issuer_is_a_load_time_error() -> None:
    import tomllib

    from guardrails.gateway import parse_config

    text = '[upstreams.u]\ncommand = ["x"]\n[approvals]\noauth_scope = "approvals"\n'
    with pytest.raises(ConfigurationError, match=r"^gw\.toml: approvals\.oauth_scope: needs"):
        parse_config(tomllib.loads(text), source="gw.toml")
