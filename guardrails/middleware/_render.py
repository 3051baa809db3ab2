"""Step 8: turn a tool's return value into the text the model sees, capped in size;
bound secrets echoed in it replaced (``redact``).

``render`` is the compiled core's when it is built (``_ccore.render``: a str,
or a dict or list of exact JSON types written straight into one string);
whatever it does not write itself goes to ``render_py``, which is ``render``
when the core is not built or ``GUARDRAILS_PURE=1``: the text and the
exceptions are those of ``render_py`` either way. ``COMPILED`` says which
one serves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..native._compiled import CORE
from ..text._secret_spellings import Spellings, spellings_of

try:  # the C encoder, without the per-call encoder set-up of json.dumps
    from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - CPython always has it
    _c_make_encoder = None

__all__ = [
    "COMPILED",
    "FLAG_SECRET_REDACTED",
    "REDACTED",
    "TRUNCATION_MARKER",
    "redact",
    "render",
    "render_py",
]

TRUNCATION_MARKER = "\n[guardrails: result truncated]"


def _unserialisable(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


if _c_make_encoder is not None:
    # No markers dict: a shared one is not thread-safe, and a circular value
    # still fails (RecursionError), which the pipeline reports as an error.
    _encode_c = _c_make_encoder(
        None, _unserialisable, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )

    def _encode(value: Any) -> str:
        return "".join(_encode_c(value, 0))

else:  # pragma: no cover
    _encode = json.JSONEncoder(  # type: ignore[assignment]
        ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_unserialisable
    ).encode


def render_py(value: Any, max_chars: int) -> tuple[str, bool]:
    """``(content, truncated)``. Raises when the value cannot be serialised."""
    cls = type(value)
    if cls is str:
        text = value
    elif cls is dict or cls is list:  # the common results: straight to the encoder
        text = _encode(value)
    elif value is None:
        text = ""
    elif hasattr(value, "model_dump_json"):
        text = value.model_dump_json()
    else:
        text = _encode(value)
    if len(text) <= max_chars:
        return text, False
    keep = max(0, max_chars - len(TRUNCATION_MARKER))
    return text[:keep] + TRUNCATION_MARKER, True


COMPILED = CORE is not None
render: Callable[[Any, int], tuple[str, bool]] = render_py
if CORE is not None:
    CORE.configure_render(render_py, TRUNCATION_MARKER)
    render = CORE.render


# -- secrets in results ---------------------------------------------------------

REDACTED = "[redacted]"
FLAG_SECRET_REDACTED = "secret_redacted"


def _spellings(secrets: Any) -> Spellings | None:
    """The spellings of the bound secret values (see ``_secret_spellings``), or None."""
    found: set[str] = set()
    for secret in secrets:
        reveal = getattr(secret, "get_secret_value", None)
        if callable(reveal):
            secret = reveal()
        if isinstance(secret, bytes | bytearray):
            secret = bytes(secret).decode("utf-8", "replace")
        if not isinstance(secret, str):
            secret = str(secret)
        if secret:
            found.add(secret)
    return spellings_of(frozenset(found)) if found else None


def _scrub(value: Any, spellings: Spellings, depth: int = 0) -> Any:
    """A copy of a JSON-like value with every secret replaced in its strings (keys too)."""
    cls = value.__class__
    if cls is str:
        return spellings.replace(value, REDACTED)
    if depth > 128:
        return None
    if isinstance(value, dict):
        return {
            (spellings.replace(k, REDACTED) if isinstance(k, str) else k): _scrub(
                v, spellings, depth + 1
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrub(v, spellings, depth + 1) for v in value]
    if value is None or cls is int or cls is float or cls is bool:
        return value
    # Anything else (a pydantic model, ...): what the model was shown, as text.
    return spellings.replace(render(value, 1 << 62)[0], REDACTED)


def redact(result: Any, secrets: Any, max_chars: int) -> Any:
    """``result`` with every bound secret value replaced by ``[redacted]`` in what
    the model sees (and in ``value``), in each spelling ``_secret_spellings``
    knows, flagged ``secret_redacted``; unchanged if none.

    When that cannot be done (a value that fails to render twice, a secret
    that cannot be read as text), the model is shown the ``error`` sentence
    instead: never text that may hold the secret.
    """
    try:
        spellings = _spellings(secrets.values())
        if spellings is None or result.content is None:
            return result
        full = result.content
        if result.truncated:  # a secret may straddle the cut: redact the whole text, then cut
            full = render(result.value, 1 << 62)[0]
        if not spellings.found(full):
            return result
        content, truncated = render(spellings.replace(full, REDACTED), max_chars)
        try:
            value = _scrub(result.value, spellings)
        except Exception:  # a value that cannot be walked: what the model was shown
            value = content
    except Exception as exc:
        from ..verdicts import Outcome, Reason, model_sentence

        return result._replace(
            outcome=Outcome.ERROR,
            content=model_sentence(Outcome.ERROR),
            value=None,
            truncated=False,
            reason=Reason.UNSERIALISABLE,
            exception=exc,
        )
    return result._replace(
        content=content,
        truncated=truncated,
        value=value,
        flags=(*result.flags, FLAG_SECRET_REDACTED),
    )
