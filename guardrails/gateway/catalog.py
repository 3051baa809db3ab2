"""The gateway's tools: every upstream's listing, under names that never change hands.

A tool is published under its upstream's name for it, or as
``<upstream>__<tool>`` when its upstream says ``prefix = true``. A published
name belongs to the first upstream that took it (``Names.owners``, given
the owners the gateway's store holds: ``owners.py``): an upstream listing a name another upstream holds,
or a name in another upstream's ``<upstream>__`` space, at start or at any
later listing, has that tool refused (logged and counted by the gateway),
and the owner keeps it. Each becomes a guarded ``Tool`` whose implementation
forwards the call: bound values and secrets from the configuration are added
by tool_call (secrets only into action tools), the upstream's own error text
is dropped, and the value of every injected secret is cut out of its answer.
A listed tool whose name cannot be published or whose schema does not
compile is left out (and logged), unless the configuration names it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .._call_state import current
from ..errors import ConfigurationError, SchemaError
from ..integrations._mcp_results import Forwarded, forwarded
from ..store import Store
from ..tools import _NAME, Binding, Secret, Tool
from . import asking, relay
from .annotations import matching
from .budgets import budgeted
from .config import ToolConfig
from .stderr import REDACTED, redact, redact_value
from .upstream import Upstream

__all__ = [
    "REDACTED",
    "SEPARATOR",
    "Clash",
    "Names",
    "UpstreamToolError",
    "catalog",
    "published_names",
]

log = logging.getLogger("guardrails.gateway")

SEPARATOR = "__"


class UpstreamToolError(RuntimeError):
    """The upstream answered ``isError``; its text stays in the gateway."""


@dataclass(frozen=True, slots=True)
class Clash:
    """A listed tool refused: its name is ``owner``'s."""

    upstream: str
    tool: str
    name: str
    owner: str


@dataclass(frozen=True, slots=True)
class Names:
    """``(upstream, tool) -> published name``, the refused tools, and every name's owner."""

    published: Mapping[tuple[str, str], str]
    clashes: tuple[Clash, ...] = ()
    owners: Mapping[str, str] = field(default_factory=dict)


def published_names(upstreams: Iterable[Upstream], owners: Mapping[str, str] = {}) -> Names:
    """The names of every listed tool, given the names already owned (``owners``).

    Upstreams are taken in order: at a tie the first keeps the name. A name
    ``<other>__tool`` belongs to the upstream ``other`` even before it lists it.
    """
    upstreams = list(upstreams)
    spaces = {u.name for u in upstreams}
    taken = dict(owners)
    published: dict[tuple[str, str], str] = {}
    clashes: list[Clash] = []
    for u in upstreams:
        for t in u.tools:
            name = f"{u.name}{SEPARATOR}{t.name}" if u.config.prefix else t.name
            space = name.split(SEPARATOR, 1)[0] if SEPARATOR in name else None
            owner = taken.get(name)
            if owner is None and space in spaces and space != u.name:
                owner = space
            if owner is not None and owner != u.name:
                clashes.append(Clash(u.name, t.name, name, owner))
                continue
            taken[name] = u.name
            published[u.name, t.name] = name
    return Names(published, tuple(clashes), taken)


def catalog(
    upstreams: Iterable[Upstream],
    store: Store | None = None,
    withheld: frozenset[tuple[str, str]] = frozenset(),
    names: Names | None = None,
    max_bytes: Callable[[str | None], int] | None = None,
) -> list[Tool]:
    """Guarded tools for every listed upstream tool; configured tools that were not listed fail.

    ``store`` keeps the budgets of tools with a ``cost`` (none: budgets are not
    counted); ``withheld``: ``(upstream, tool)`` pairs left out (their definition
    changed from its pin); ``names`` are the published names (default:
    ``published_names``); ``max_bytes(tenant)`` bounds the answer read for the
    calling tenant.
    """
    upstreams = list(upstreams)
    names = names if names is not None else published_names(upstreams)
    refused = {(c.upstream, c.tool): c for c in names.clashes}
    tools: list[Tool] = []
    for u in upstreams:
        listed = {t.name: t for t in u.tools}
        for missing in sorted(set(u.config.tools) - listed.keys()):
            raise ConfigurationError(
                f"upstreams.{u.name}.tools.{missing}: the upstream does not list this tool"
            )
        for remote, definition in listed.items():
            clash = refused.get((u.name, remote))
            if clash is not None:
                if remote in u.config.tools:
                    raise ConfigurationError(
                        f"upstreams.{u.name}.tools.{remote}: the name {clash.name!r} is "
                        f"published by upstream {clash.owner!r} (set prefix = true)"
                    )
                continue
            if (u.name, remote) in withheld:
                continue
            configured = _by_class(u, remote, definition)
            if configured is None:
                continue
            name = names.published[u.name, remote]
            if not _NAME.match(name):
                log.warning(
                    "upstream %r: tool name %r cannot be published; skipped", u.name, remote
                )
                continue
            try:
                tools.append(_tool(u, remote, name, definition, configured, store, max_bytes))
            except SchemaError:
                if remote in u.config.tools:
                    raise
                # A third-party schema that does not compile: that tool cannot
                # be checked, so it is not published; the others still are.
                log.warning("upstream %r: tool %r has an invalid schema; skipped", u.name, remote)
    return tools


def _by_class(upstream: Upstream, remote: str, definition: Any) -> ToolConfig | None:
    """The tool's configuration with what its class rules add (None: withheld by one)."""
    configured = upstream.config.tools.get(remote) or ToolConfig()
    by_class = matching(upstream.config.when, definition)
    held = [rule.key for rule in by_class if rule.withhold]
    if held:
        log.info("upstream %r: tool %r withheld by %s", upstream.name, remote, held[0])
        return None
    if not configured.action and any(rule.action for rule in by_class):
        # An action by its class; the secrets it gets are still only its own table's.
        return replace(configured, action=True)
    return configured


def _tool(
    upstream: Upstream,
    remote: str,
    name: str,
    definition: Any,
    config: ToolConfig,
    store: Store | None,
    max_bytes: Callable[[str | None], int] | None = None,
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
    forward = _forward(upstream, remote, timeout, tuple(config.secrets), max_bytes)
    forward = budgeted(forward, config, store, f"{upstream.name}.{remote}")
    listed = {**definition.model_dump(by_alias=True, exclude_none=True), "name": name}
    try:
        # The forwarding function takes **arguments; the upstream's ``extra``
        # says what becomes of undeclared ones (refused unless it says otherwise).
        return Tool.from_definition(
            listed,
            forward,
            bind=bind,
            effect=config.action,
            options=options,
            extra=upstream.config.extra,
            approval=config.approval,
        )
    except ConfigurationError as exc:
        raise type(exc)(f"{where}: {exc}") from exc


def _forward(
    upstream: Upstream,
    remote: str,
    timeout: float,
    secrets: tuple[str, ...],
    max_bytes: Callable[[str | None], int] | None,
) -> Callable[..., Awaitable[Forwarded | str]]:
    async def call(**arguments: Any) -> Forwarded | str:
        given = [arguments.get(p) for p in secrets]
        upstream.stderr.know(given)
        state = current()
        context = None if state is None else state.context
        tenant = None if context is None else context.tenant
        bound = None if max_bytes is None else max_bytes(tenant)
        ctx = relay.caller()
        # The call a requestState is bound to (``states.py``).
        binding = (tenant, None if context is None else context.session, upstream.name, remote)
        rounds = _opened(upstream, binding, asking.rounds(upstream.config, ctx, relay.params()))
        report = relay.progress(upstream.stderr.secrets)
        result = await upstream.call(
            remote, arguments, timeout, bound, report, caller=ctx, rounds=rounds
        )
        if getattr(result, "result_type", None) == "input_required":
            raise _input_required(upstream, binding, result, ctx)
        if getattr(result, "is_error", None) is not False:
            raise UpstreamToolError(f"upstream {upstream.name!r} tool {remote!r} answered an error")
        return _redacted(forwarded(result, structured=True, binary=False), given)

    call.__name__ = remote
    return call


def _opened(
    upstream: Upstream, binding: tuple[str | None, ...], rounds: tuple[Any, Any] | None
) -> tuple[Any, Any] | None:
    """The caller's answers with the upstream's own state, once the gateway's seal on
    it holds for this call (``states.ForeignState`` otherwise)."""
    if rounds is None:
        return None
    answers, sealed = rounds
    return answers, upstream.seal.open(binding, sealed, answers is not None)


def _input_required(
    upstream: Upstream, binding: tuple[str | None, ...], result: Any, ctx: Any
) -> Exception:
    """What an ``input_required`` answer makes of the call: the upstream's question for
    the caller (redacted, its state sealed to the call), or an error when it asks what
    is not relayed."""
    if not asking.passes(upstream.config, result, ctx):
        return UpstreamToolError(
            f"upstream {upstream.name!r} tool {binding[3]!r} asked what is refused"
        )
    asked = asking.question(result, upstream.stderr.secrets)
    sealed = upstream.seal.seal(binding, asked.request_state)
    return asking.InputRequired(upstream.name, asked.model_copy(update={"request_state": sealed}))


def _redacted(answer: Forwarded, given: list[Any]) -> Forwarded | str:
    """``answer`` without the secrets ``given``: an answer that held one is sent as its
    redacted text, without its other blocks, and its structured content redacted too."""
    redacted = _redact(answer.text, given)
    structured = None if answer.structured is None else _redact_value(answer.structured, given)
    if redacted == answer.text and structured == answer.structured:
        return answer
    if structured is None:
        return redacted
    from mcp.types import TextContent

    return Forwarded((TextContent(type="text", text=redacted),), structured, redacted)


def _redact_value(value: Any, given: list[Any]) -> Any:
    """A JSON value with each string (keys too) redacted."""
    return redact_value(
        value, [v if isinstance(v, str) else str(v) for v in given if v is not None]
    )


def _redact(text: str, values: Iterable[Any]) -> str:
    """``text`` with every value replaced (``stderr.redact``: each spelling the
    redactor knows, upper- and lower-cased copies too)."""
    return redact(text, [v if isinstance(v, str) else str(v) for v in values if v is not None])
