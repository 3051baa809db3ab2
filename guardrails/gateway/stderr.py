"""What a stdio upstream writes on stderr: redacted, logged under its name, at a bounded rate.

Every secret the upstream was given (its ``${NAME}`` credentials, the secrets
injected into its calls) is cut out of each line in every spelling the
library's redactor knows, upper- and lower-cased copies included, before the
line is logged as ``upstream 'NAME': <line>`` (logger ``guardrails.gateway``,
level WARNING). At most ``rate`` lines a second are logged (``burst`` at once);
the rest are counted and their number logged when lines flow again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..text._secret_spellings import spellings_of

__all__ = ["REDACTED", "StderrLog", "redact", "redact_model", "redact_value"]

log = logging.getLogger("guardrails.gateway")

REDACTED = "[redacted]"
_MAX_SECRETS = 256


def _variants(secrets: Iterable[str]) -> frozenset[str]:
    found: set[str] = set()
    for secret in secrets:
        if secret:
            found.update((secret, secret.upper(), secret.lower()))
    return frozenset(found)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each secret replaced, as written or upper- or lower-cased, in
    every spelling ``_secret_spellings`` knows (escaped, percent-encoded, base64, hex)."""
    variants = _variants(secrets)
    if not variants:
        return text
    return spellings_of(variants).replace(text, REDACTED)


def redact_value(value: Any, secrets: Iterable[str]) -> Any:
    """A JSON value with each string (keys too) ``redact``-ed."""
    secrets = list(secrets)
    if not secrets:
        return value
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {redact(str(k), secrets): redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, secrets) for v in value]
    return value


def redact_model(model: Any, secrets: Iterable[str]) -> Any:
    """A copy of the MCP model ``model`` with ``redact`` applied to every string in
    it, at any depth (descriptions, titles, embedded texts, ``_meta``); ``model``
    itself when none held a secret."""
    known = tuple(secrets)
    if not _variants(known):
        return model
    dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    walked = redact_value(dumped, known)
    return model if walked == dumped else type(model).model_validate(walked)


class StderrLog:
    """Logs one upstream's stderr lines; a token bucket bounds the rate."""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 20.0,
        burst: int = 50,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstream = upstream
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.stamp = clock()
        self.dropped = 0
        self.secrets: set[str] = set()

    def know(self, values: Iterable[object]) -> None:
        """Secrets the upstream was given: cut out of every line it writes from now on."""
        for value in values:
            if value is not None and len(self.secrets) < _MAX_SECRETS:
                text = value if isinstance(value, str) else str(value)
                if text:
                    self.secrets.add(text)

    def __call__(self, line: str) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            self.dropped += 1
            return
        self.tokens -= 1
        if self.dropped:
            log.warning("upstream %r: %d stderr lines not logged", self.upstream, self.dropped)
            self.dropped = 0
        log.warning("upstream %r: %s", self.upstream, redact(line, self.secrets))
