"""The JSON encoders built once (``audit._json``, the idempotency key and digest) write
exactly what ``json.dumps`` with the same options writes, for any value, hostile ones
included: the stored keys, digests and audit columns do not depend on which was used."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.audit import _json, _opaque
from guardrails.effects.idempotency import _digest, scoped_key
from tests._examples import examples
from tests._hostile import LoudStr, Shifty

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities included: json.dumps writes them
    st.text(),  # lone surrogates included
    st.text().map(LoudStr),  # a str subclass whose own methods raise
    st.builds(Shifty),  # not JSON: the default names it
    st.builds(object),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
    ),
    max_leaves=12,
)


def _both(ours: Any, reference: Any) -> tuple[Any, Any]:
    """What each gives: the text, or the class of what it raised."""
    results = []
    for produce in (ours, reference):
        try:
            results.append(produce())
        except Exception as exc:  # the same failure either way
            results.append(type(exc))
    return results[0], results[1]


@settings(max_examples=examples(300))
@given(_values)
def test_an_audit_column_is_what_json_dumps_writes(value: Any) -> None:
    ours, reference = _both(lambda: _json(value), lambda: json.dumps(value, default=_opaque))
    assert ours == reference


@settings(max_examples=examples(300))
@given(st.one_of(st.none(), st.text()), st.text(), st.text())
def test_an_idempotency_key_is_the_json_array_json_dumps_writes(
    tenant: str | None, tool: str, key: str
) -> None:
    assert scoped_key(tenant, tool, key) == json.dumps([tenant, tool, key], separators=(",", ":"))


@pytest.mark.slow
@settings(max_examples=examples(300))
@given(st.dictionaries(st.text(max_size=5), _values, max_size=4))
def test_an_argument_digest_is_the_one_json_dumps_gives(arguments: dict[str, Any]) -> None:
    def reference() -> str:
        text = json.dumps(arguments, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    ours, expected = _both(lambda: _digest(arguments), reference)
    assert ours == expected
