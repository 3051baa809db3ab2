"""The gateway's tools: every upstream's listing, namespaced where names clash.

A tool keeps its upstream name unless another upstream lists the same name or
its upstream says ``prefix = true``; then it is published as
``<upstream>__<tool>``. Each becomes a guarded ``Tool`` whose implementation
forwards the call: bound values and secrets from the configuration are added
by tool_call (secrets only into action tools), the upstream's own error text
is dropped, and the value of every injected secret is cut out of its answer.
A listed tool whose name cannot be published or whose schema does not
compile is left out (and logged), unless the configuration names it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .._secret_spellings import spellings_of
from ..errors import ConfigurationError, SchemaError
from ..integrations._framework_tools import extra_of
from ..integrations._mcp_results import Forwarded, forwarded
from ..store import Store
from ..tools import _NAME, Binding, Secret, Tool
from .budgets import budgeted
from .config import ToolConfig
from .upstream import Upstream

__all__ = ["REDACTED", "SEPARATOR", "UpstreamToolError", "catalog", "published_names"]

log = logging.getLogger("guardrails.gateway")

SEPARATOR = "__"
REDACTED = "[redacted]"


class UpstreamToolError(RuntimeError):
    """The upstream answered ``isError``; its text stays in the gateway."""


def published_names(upstreams: Iterable[Upstream]) -> dict[tuple[str, str], str]:
    """``(upstream, tool) -> published name``."""
    upstreams = list(upstreams)
    counts = Counter(t.name for u in upstreams for t in u.tools)
    names: dict[tuple[str, str], str] = {}
    for u in upstreams:
        for t in u.tools:
            clash = counts[t.name] > 1 or u.config.prefix
            names[u.name, t.name] = f"{u.name}{SEPARATOR}{t.name}" if clash else t.name
    return names


def catalog(
    upstreams: Iterable[Upstream],
    store: Store | None = None,
    withheld: frozenset[tuple[str, str]] = frozenset(),
) -> list[Tool]:
    """Guarded tools for every listed upstream tool; configured tools that were not listed fail.

    ``store`` keeps the budgets of tools with a ``cost`` (none: budgets are not counted).
    ``withheld``: ``(upstream, tool)`` pairs left out (their definition changed from its pin).
    """
    upstreams = list(upstreams)
    names = published_names(upstreams)
    tools: list[Tool] = []
    for u in upstreams:
        listed = {t.name: t for t in u.tools}
        for missing in sorted(set(u.config.tools) - listed.keys()):
            raise ConfigurationError(
                f"upstreams.{u.name}.tools.{missing}: the upstream does not list this tool"
            )
        for remote, definition in listed.items():
            if (u.name, remote) in withheld:
                continue
            name = names[u.name, remote]
            if not _NAME.match(name):
                log.warning(
                    "upstream %r: tool name %r cannot be published; skipped", u.name, remote
                )
                continue
            configured = u.config.tools.get(remote)
            try:
                tools.append(_tool(u, remote, name, definition, configured or ToolConfig(), store))
            except SchemaError:
                if configured is not None:
                    raise
                # A third-party schema that does not compile: that tool cannot
                # be checked, so it is not published; the others still are.
                log.warning("upstream %r: tool %r has an invalid schema; skipped", u.name, remote)
    return tools


def _tool(
    upstream: Upstream,
    remote: str,
    name: str,
    definition: Any,
    config: ToolConfig,
    store: Store | None,
) -> Tool:
    where = f"upstreams.{upstream.name}.tools.{remote}"
    bind: dict[str, Binding] = dict(config.bind)
    for param, secret in config.secrets.items():
        if param in bind:
            raise ConfigurationError(f"{where}: {param!r} is both bound and a secret")
        bind[param] = Secret(secret)
    options: dict[str, Any] = {}
    if config.idempotency_key is not None:
        options["idempotency_key"] = config.idempotency_key
    timeout = config.timeout or upstream.config.timeout
    forward = _forward(upstream, remote, timeout, tuple(config.secrets))
    forward = budgeted(forward, config, store, f"{upstream.name}.{remote}")
    listed = {**definition.model_dump(by_alias=True, exclude_none=True), "name": name}
    try:
        # The forwarding function takes **arguments; the upstream's schema says
        # whether undeclared arguments are welcome (an open additionalProperties).
        return Tool.from_definition(
            listed,
            forward,
            bind=bind,
            effect=config.action,
            options=options,
            extra=extra_of(listed.get("inputSchema")),
        )
    except ConfigurationError as exc:
        raise type(exc)(f"{where}: {exc}") from exc


def _forward(
    upstream: Upstream, remote: str, timeout: float, secrets: tuple[str, ...]
) -> Callable[..., Awaitable[Forwarded | str]]:
    async def call(**arguments: Any) -> Forwarded | str:
        result = await upstream.call(remote, arguments, timeout)
        if getattr(result, "is_error", None) is not False:
            raise UpstreamToolError(f"upstream {upstream.name!r} tool {remote!r} answered an error")
        answer = forwarded(result)
        redacted = _redact(answer.text, [arguments.get(p) for p in secrets])
        # An answer that held a secret is sent as its redacted text, without its blocks.
        return answer if redacted == answer.text else redacted

    call.__name__ = remote
    return call


def _redact(text: str, values: Iterable[Any]) -> str:
    """``text`` with every value replaced, in each spelling ``_secret_spellings`` knows
    (percent-encoded, JSON- or HTML-escaped, base64 as in a Basic header, hex)."""
    secrets = frozenset(v if isinstance(v, str) else str(v) for v in values if v is not None)
    secrets = frozenset(s for s in secrets if s)
    if not secrets:
        return text
    return spellings_of(secrets).replace(text, REDACTED)
