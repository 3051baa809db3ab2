"""Property tests for what the gateway parses from clients and operators."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from guardrails.errors import ConfigurationError
from guardrails.gateway.auth import parse_tokens
from guardrails.gateway.catalog import REDACTED, _redact
from guardrails.gateway.sessions import META_KEY, SESSION_HEADER, Sessions

word = st.text(st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=20).filter(
    lambda w: not w.startswith("#") and not w.startswith("sha256:")
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@given(st.lists(st.tuples(word, word), max_size=8, unique_by=lambda pair: pair[1]))
def test_every_well_formed_line_maps_its_token_to_its_tenant(pairs: list[tuple[str, str]]) -> None:
    table = parse_tokens("".join(f"{t} {k}\n# c\n\n" for t, k in pairs), "tokens")
    assert table == {hashlib.sha256(k.encode()).digest(): t for t, k in pairs}


@given(st.text(max_size=300))
def test_any_text_is_a_table_or_an_error_that_never_quotes_a_token(text: str) -> None:
    try:
        parse_tokens(text, "tokens")
    except ConfigurationError as exc:
        message = str(exc)
        assert message.startswith("tokens, line ")
        for line in text.splitlines():
            for part in line.split()[1:]:
                if len(part) > 8:
                    assert part not in message


def _ctx(headers: dict[str, str] | None, meta: Any) -> Any:
    from mcp.server.auth.provider import AccessToken

    token = AccessToken(token="t", client_id="acme", scopes=[], subject="principal")
    request = (
        None
        if headers is None
        else SimpleNamespace(headers=headers, scope={"user": SimpleNamespace(access_token=token)})
    )
    return SimpleNamespace(request=request, meta=meta, session=None)


@given(
    st.none() | st.dictionaries(st.sampled_from([SESSION_HEADER, "mcp-session-id", "x"]), word),
    st.none() | json_values | st.dictionaries(st.just(META_KEY), json_values),
)
def test_any_request_gets_a_context_whose_session_holds_no_client_text(
    headers: dict[str, str] | None, meta: Any
) -> None:
    context = Sessions({}, "local")(_ctx(headers, meta))
    assert context.tenant == ("local" if headers is None else "acme")
    sent = [v for v in (headers or {}).values() if len(v) > 3]
    if isinstance(meta, dict) and isinstance(meta.get(META_KEY), str):
        sent.append(meta[META_KEY])
    if context.session is not None:
        assert context.session.split(":", 1)[0] in ("key", "mcp", "stdio")
        assert not any(len(s) > 3 and s in context.session for s in sent)
    chosen = isinstance(meta, dict) and isinstance(meta.get(META_KEY), str) and meta[META_KEY]
    if chosen or (headers and headers.get(SESSION_HEADER)):
        assert context.session is not None and context.session.startswith("key:")


secret_text = st.text(min_size=1, max_size=12).filter(lambda s: s not in REDACTED)


@given(st.lists(secret_text, min_size=1, max_size=3), st.lists(st.text(max_size=20), max_size=4))
def test_no_injected_secret_survives_in_an_answer(secrets: list[str], parts: list[str]) -> None:
    # Answers that hold the secrets (the branch under test) among arbitrary text.
    answer = "".join(p + secrets[i % len(secrets)] for i, p in enumerate(parts or [""]))
    redacted = _redact(answer, secrets)
    pieces = redacted.split(REDACTED)
    assert len(pieces) > 1
    for secret in secrets:
        assert not any(secret in piece for piece in pieces)
