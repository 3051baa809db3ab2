"""The gateway: upstreams, the engine that guards their tools, and the MCP server in front.

``Gateway.running()`` starts every upstream (failing, with the upstream's
name, if one cannot be listed in its ``connect_timeout``), builds the engine
from their listings and the configuration, and yields; leaving it stops the
upstreams and closes the store. ``gateway.server()`` is the low-level MCP
``Server`` that stdio and HTTP serve alike. When an upstream's listing changes
the engine is built again (``_republish``) and listening clients are told.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from prometheus_client import CollectorRegistry

from ..audit import AuditLog
from ..effects import Idempotency
from ..engine import Guardrails
from ..errors import ConfigurationError, GuardrailsError
from ..observe.metrics import PrometheusRecorder
from ..observe.telemetry import OpenTelemetryRecorder
from ..store import Store, offloop, open_store
from ..tools import Tool
from ..verdicts import Outcome, model_sentence
from .annotations import AnnotationFacts, approval_rules, rules_by_tool
from .approvals import approval_gate
from .catalog import Names, catalog, published_names
from .config import GatewayConfig
from .limits import TenantLimits
from .listing import Shown, shown_fields
from .metrics import GatewayCounters, PinCounters
from .notify import Listeners, changed_for, signatures
from .owners import claim_names
from .pinning import Pinning
from .policy import load_policy
from .prompts import Prompts, tenant_sees
from .relay import calling
from .resources import Resources
from .rounds import Rounds, round_of
from .rules import StoreCounter, session_ceiling, tenant_allow_list, workflows
from .scopes import scope_allow_list
from .secrets import SecretProvider, secret_provider
from .sessions import Sessions
from .states import StateSeal, state_key
from .turns import GatewayTools
from .upstream import Upstream, UpstreamExited, innermost

__all__ = ["Gateway", "StoreCounter", "UpstreamStartError"]

log = logging.getLogger("guardrails.gateway")


class UpstreamStartError(GuardrailsError):
    """An upstream could not be started and listed when the gateway started."""


class Gateway:
    """Holds configuration until ``running()``; then ``rails`` and ``server()`` exist."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        registry: CollectorRegistry | None = None,
        secrets: SecretProvider | None = None,
        tracer_provider: Any = None,
        health_interval: float | None = None,
    ) -> None:
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        self.counters = GatewayCounters(tuple(u.name for u in config.upstreams), self.registry)
        self.secrets = secrets if secrets is not None else secret_provider(config.secrets)
        self.tracer_provider = tracer_provider
        self.upstreams = [
            Upstream(
                u,
                self.counters,
                health_interval=health_interval,
                secrets=self.secrets,
                secrets_timeout=config.secrets.timeout,
            )
            for u in config.upstreams
        ]
        # The transport holds at most the largest answer any tenant may be sent.
        largest = max(
            [config.limits.max_result_bytes]
            + [t.limits.max_result_bytes for t in config.tenants.values() if t.limits is not None]
        )
        for upstream in self.upstreams:
            upstream.on_tools_changed = self._republish
            upstream.max_bytes = largest
        self.limits = TenantLimits(config.limits_of, self.counters.limit)
        # Every published name's upstream, as the store says (``owners.py``); never changed.
        self.owners: dict[str, str] = {}
        self._clashes: set[tuple[str, str, str]] = set()
        # Titles, annotations and output schemas of the tools served now.
        self.shown = Shown(config.max_result_chars)
        self.sessions = Sessions(config.tenants, config.stdio_tenant)
        names = tuple(u.name for u in config.upstreams)
        self.pinning = Pinning(PinCounters(names, self.registry))
        # (upstream, tool) pairs whose definition changed from its pin: not published.
        self.withheld: frozenset[tuple[str, str]] = frozenset()
        self._rebuilding: Any = None  # an anyio.Lock, while running
        self.store: Store | None = None
        self.rails: Guardrails | None = None
        # One recorder for every engine built (the registry takes each series once).
        self.prometheus = PrometheusRecorder(self.registry)
        self._served: list[GatewayTools] = []
        # The clients to tell of a change; what each published tool reads as.
        self.listeners = Listeners(lambda ctx: self.sessions(ctx).tenant)
        self._signed: dict[str, str] = {}
        self._tasks: Any = None  # the running task group

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        self._rebuilding = anyio.Lock()
        self.store = _open(self.config)
        try:
            async with anyio.create_task_group() as tg:
                for upstream in self.upstreams:
                    await _start(tg, upstream)
                self.withheld = await self.pinning.withheld(self.store, self.upstreams)
                seal = StateSeal(await offloop.run(self.store, state_key, self.store))
                for upstream in self.upstreams:
                    upstream.seal = seal
                await self._claim_names(self.store)
                self.rails = _named(self.config.source, lambda: self.engine(self.store))
                self._signed = signatures(self.rails.tools.values(), self.shown.fields)
                self._tasks = tg
                tg.start_soon(self._watch_pins)
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The task group wraps what went wrong; a single error is raised as itself.
            raise _with_source(self.config.source, innermost(group)) from None
        finally:
            self.listeners.close()
            self.store.close()

    async def _republish(self, upstream: Upstream, tools: list[Any]) -> None:
        """An upstream's listing changed: build the engine again, and tell listening clients.

        A listing that no longer fits the configuration (a configured tool is
        gone, a bound parameter left its schema) is logged, and the tools
        published before stay published.
        """
        before, upstream.tools = upstream.tools, tools
        if self.store is None or self.rails is None:
            return  # still starting: the engine is built from every listing once all are in
        async with self._rebuilding:
            try:
                rails = await self._rebuilt(self.store)
            except Exception as exc:
                rails = None
                upstream.tools = before
                log.warning(
                    "upstream %r: its new tool list is not published (%s)",
                    upstream.name,
                    _detail(exc),
                )
            if rails is not None:
                await self._serve(rails)

    async def _watch_pins(self) -> None:
        """Every ``pin_interval``: publish again when the tools withheld changed (an approval)."""
        while True:
            await anyio.sleep(self.config.pin_interval)
            async with self._rebuilding:
                assert self.store is not None
                try:
                    rails = await self._rebuilt(self.store, unless=self.withheld)
                except Exception as exc:
                    log.warning("tool pins: the tools are not published again (%s)", _detail(exc))
                    continue
                if rails is not None:
                    await self._serve(rails)

    async def _rebuilt(
        self, store: Store, *, unless: frozenset[tuple[str, str]] | None = None
    ) -> Guardrails | None:
        """A new engine over the listings as the pins allow (None: the pins withhold ``unless``)."""
        withheld = await self.pinning.withheld(store, self.upstreams)
        if withheld == unless:
            return None
        await self._claim_names(store)
        before, self.withheld = self.withheld, withheld
        try:
            return self.engine(store)
        except BaseException:
            self.withheld = before
            raise

    async def _serve(self, rails: Guardrails) -> None:
        """Serve ``rails`` from now on, and tell the clients that listen when it changed."""
        replaced, self.rails = self.rails, rails
        self.prometheus.unbind(replaced)  # the new engine's guards and tools, not the old's
        for served in self._served:
            served.rails = rails
        before, after = self._signed, signatures(rails.tools.values(), self.shown.fields)
        if before == after:
            return
        self._signed = after

        def changed(tenant: str | None) -> bool:
            tenants = self.config.tenants
            known = tenants.get(tenant) if tenant is not None else None
            allowed = None if not tenants else frozenset() if known is None else known.tools
            return changed_for(before, after, allowed)

        await self.listeners.publish(changed)
        self._tasks.start_soon(self.listeners.tell, changed)

    def engine(self, store: Store) -> Guardrails:
        """The engine over the upstreams' tools, as the configuration and policy say.

        Hooks run in this order: the audit log (its ``after`` last), spans, the
        class rules' facts, the rounds answered ``input_required`` (``rounds.py``),
        the tenant limits, approvals, the session ceiling, workflows,
        idempotency, then the policy's.
        """
        names = self._names()
        tools = self._tools(store, names)
        audit = AuditLog(store)
        spans = OpenTelemetryRecorder(self.tracer_provider)
        # Names that exist though not published now: withheld by a pin, or listed before.
        known = frozenset(names.owners)
        flow_guards, flow_hooks = workflows(self.config.workflows, tools, store)
        by_class = rules_by_tool(self.upstreams, names.published)
        ceilings = session_ceiling(self.config.max_calls_per_session, store)
        hooks = [
            audit,
            spans.hook(),
            AnnotationFacts(by_class),
            Rounds(store, ceilings),
            self.limits,
            approval_gate(self.config, tools, store, known, approval_rules(by_class)),
            *ceilings,
            *flow_hooks,
            Idempotency(store),
        ]
        oauth = self.config.auth.oauth
        guards = [
            *tenant_allow_list(self.config.tenants, tools, known),
            *scope_allow_list(None if oauth is None else oauth.scopes, tools, known),
            *flow_guards,
        ]
        rails = Guardrails(
            tools.values(),
            guards,
            hooks=hooks,
            recorder=[audit, self.prometheus, spans],
            secrets=self.secrets,
            provider_timeout=self.config.secrets.timeout,
            max_result_chars=self.config.max_result_chars,
        )
        try:
            load_policy(rails, self.config.policy, store)
        except BaseException:
            self.prometheus.unbind(rails)  # bound by the engine, never served
            raise
        self.owners.update(names.owners)  # kept only once the engine is built
        self.shown.fields = shown_fields(self.upstreams, names.published)
        return rails

    def _tools(self, store: Store, names: Names) -> dict[str, Tool]:
        """The published tools by name (``catalog``), answers bounded per tenant."""
        bound = self.config.limits_of
        listed = catalog(
            self.upstreams, store, self.withheld, names, lambda t: bound(t).max_result_bytes
        )
        return {t.name: t for t in listed}

    async def _claim_names(self, store: Store) -> None:
        """Learn from the store the owners of the names to publish that this process has
        not seen, claiming the free ones, so that replicas never publish a name apart."""
        configured = frozenset(u.name for u in self.upstreams)
        for _ in range(sum(len(u.tools) for u in self.upstreams) + 1):  # one name at least
            names = published_names(self.upstreams, self.owners)
            wanted = {n: u for n, u in names.owners.items() if n not in self.owners}
            if not wanted:
                return
            self.owners.update(await offloop.run(store, claim_names, store, wanted, configured))

    def _names(self) -> Names:
        """The published names, given those already owned; new clashes logged and counted."""
        names = published_names(self.upstreams, self.owners)
        for clash in names.clashes:
            key = (clash.upstream, clash.tool, clash.owner)
            if key in self._clashes:
                continue
            self._clashes.add(key)
            self.counters.clash(clash.upstream)
            log.warning(
                "upstream %r: tool %r is not published: the name %r is upstream %r's",
                clash.upstream,
                clash.tool,
                clash.name,
                clash.owner,
            )
        return names

    def _read_only(self) -> dict[str, Any]:
        """The prompts and resources handlers, for what upstreams expose
        (``prompts.py``, ``resources.py``)."""
        sees = tenant_sees(self.config.tenants, lambda ctx: self.sessions(ctx).tenant)
        prompts = Prompts(self.upstreams, sees, self.config.max_result_chars)
        resources = Resources(self.upstreams, sees, self.config.max_result_chars)
        handlers: dict[str, Any] = {}
        if prompts.by_name:
            handlers.update(on_list_prompts=prompts.list_prompts, on_get_prompt=prompts.get_prompt)
        if resources.by_uri:
            handlers.update(
                on_list_resources=resources.list_resources,
                on_list_resource_templates=resources.list_templates,
                on_read_resource=resources.read_resource,
            )
        return handlers

    def server(self) -> Any:
        """The low-level MCP ``Server`` answering tools/list and tools/call through the engine."""
        from mcp.server import Server

        if self.rails is None:
            raise GuardrailsError("the gateway is not running: use `async with gateway.running()`")
        from mcp.types import ListToolsResult

        tools = GatewayTools(self.rails, context=self.sessions)
        self._served.append(tools)
        shown, listeners = self.shown, self.listeners

        async def list_tools(ctx: Any, params: Any = None) -> Any:
            listeners.remember(ctx)
            try:
                return shown.listing(await tools.list_tools(ctx, params))
            except Exception:
                # A fault of the gateway itself: nothing is offered, nothing is said.
                log.exception("tools/list failed")
                return ListToolsResult(tools=[], ttl_ms=0, cache_scope="private")

        async def call_tool(ctx: Any, params: Any) -> Any:
            # A call that started runs to its end and writes its audit row, even
            # when the server is stopping or the client gives up on it; the
            # upstream's timeout bounds it.
            with anyio.CancelScope(shield=True), calling(ctx, params):
                try:
                    result = await tools.result(ctx, params)
                    # The upstream's question (redacted), for the client to answer and retry.
                    asked = round_of(result)
                    return shown.answer(params.name, result) if asked is None else asked
                except Exception:
                    log.exception("tools/call failed outside the tool_call pipeline")
                    return _failed_call()

        # Without a tools/list per tools/call for the SDK's Mcp-Param-* check (turns.py).
        return tools.serve(
            Server(
                self.config.name,
                on_list_tools=list_tools,
                on_call_tool=call_tool,
                **self._read_only(),
                # Clients of the 2026-07-28 protocol listen for tools/list_changed here.
                on_subscriptions_listen=listeners.listen,
            )
        )


async def _start(tg: Any, upstream: Upstream) -> None:
    try:
        with anyio.fail_after(upstream.config.connect_timeout):
            await tg.start(upstream.run)
    except UpstreamExited as exc:
        raise UpstreamStartError(str(exc)) from None
    except TimeoutError:
        raise UpstreamStartError(
            f"upstreams.{upstream.name}: not listed within {upstream.config.connect_timeout:g}s"
        ) from None


def _detail(exc: Exception) -> str:
    """Our first line of a library error, else only the exception's type."""
    detail = str(exc).splitlines()[0] if isinstance(exc, GuardrailsError) else ""
    return detail or type(exc).__name__


def _open(config: GatewayConfig) -> Store:
    """The configured store; a store that cannot be opened is a configuration error."""
    url = _with_source_call(config.source, lambda: _store_url(config.store))
    try:
        return open_store(url)
    except ImportError:
        raise ConfigurationError(
            f"{config.source}: gateway.store: a postgresql:// store needs the postgres extra: "
            "pip install 'guardrails-kit[postgres]'"
        ) from None
    except Exception as exc:
        raise ConfigurationError(
            f"{config.source}: gateway.store: cannot open the store ({type(exc).__name__})"
        ) from None


def _with_source(source: str, exc: BaseException) -> BaseException:
    """A start-time error that names a key gets the file's name in front, once."""
    if isinstance(exc, GuardrailsError) and not str(exc).startswith(f"{source}: "):
        renamed = type(exc)(f"{source}: {exc}")
        renamed.__cause__ = exc.__cause__
        return renamed
    return exc


def _with_source_call(source: str, make: Any) -> Any:
    try:
        return make()
    except GuardrailsError as exc:
        raise _with_source(source, exc) from None


_named = _with_source_call


def _failed_call() -> Any:
    from mcp.types import CallToolResult, TextContent

    sentence = model_sentence(Outcome.ERROR)
    return CallToolResult(content=[TextContent(type="text", text=sentence)], is_error=True)


def _store_url(store: str) -> str:
    if not store.startswith("env:"):
        return store
    import os

    variable = store[len("env:") :]
    value = os.environ.get(variable)
    if not value:
        raise ConfigurationError(f"gateway.store_env: ${variable} is not set")
    return value
