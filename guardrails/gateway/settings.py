"""The gateway's configuration as checked values, and the keys each table accepts.

``config.py`` reads a TOML file into these; nothing here checks anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._conditions import ApprovalRule

__all__ = [
    "KEYS",
    "ASYMMETRIC_ALGORITHMS",
    "ApprovalsConfig",
    "AuthConfig",
    "GatewayConfig",
    "Limits",
    "OAuthConfig",
    "SecretsConfig",
    "TenantConfig",
    "ToolConfig",
    "UpstreamConfig",
    "WhenRule",
    "WorkflowConfig",
]

# Every key each table accepts (any other is an error); docs/gateway.md's
# reference documents exactly these.
KEYS: Mapping[str, frozenset[str]] = {
    "": frozenset({"gateway", "auth", "secrets", "tenants", "upstreams", "workflows",
                   "limits", "approvals", "when"}),
    "gateway": frozenset({"name", "store", "store_env", "policy", "max_calls_per_session",
                          "max_result_chars", "stdio_tenant", "pin_interval", "max_sessions",
                          "session_idle_timeout", "allowed_hosts", "allowed_origins"}),
    "limits": frozenset({"max_sessions", "calls_per_second", "tool_calls_per_second",
                         "max_in_flight", "max_result_bytes"}),
    "auth": frozenset({"tokens_file", "tokens_env", "oauth"}),
    "approvals": frozenset({"ttl", "approvers_file", "approvers_env", "oauth_scope"}),
    "auth.oauth": frozenset({"issuer", "resource", "jwks_url", "jwks_file", "tenant_claim",
                             "algorithms", "leeway", "jwks_refetch_interval", "scopes"}),
    "secrets": frozenset({"provider", "prefix", "directory", "timeout"}),
    "tenants.NAME": frozenset({"tools", "values", "limits", "approvals"}),
    "workflows.NAME": frozenset({"steps"}),
    "workflows.NAME.steps": frozenset({"tool", "instructions"}),
    "upstreams.NAME": frozenset({"command", "url", "env", "cwd", "headers", "timeout",
                                 "connect_timeout", "backoff_initial", "backoff_max", "prefix",
                                 "pin", "tools", "extra", "health_interval", "prompts",
                                 "resources", "when", "elicitation",
                                 "sampling"}),
    "upstreams.NAME.tools.TOOL": frozenset({"action", "bind", "secrets", "timeout",
                                            "idempotency_key", "cost", "daily_cap",
                                            "instance_cap", "approval"}),
    "when.CLASS": frozenset({"approval", "action", "withhold"}),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Limits:
    """What one tenant may take of a replica: the bounds that keep tenants apart.

    ``None``: no bound. Rates are token buckets holding one second of calls.
    """

    max_sessions: int | None = 1000
    calls_per_second: float | None = None
    tool_calls_per_second: float | None = None
    max_in_flight: int | None = 64
    max_result_bytes: int = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """What the gateway adds to one upstream tool: bindings, secrets, action, limits."""

    action: bool = False
    bind: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    idempotency_key: tuple[str, ...] | bool | None = None
    cost: float | None = None
    daily_cap: float | None = None
    instance_cap: float | None = None
    approval: ApprovalRule | None = None


@dataclass(frozen=True, slots=True)
class WhenRule:
    """A rule for every tool of a class the tools' MCP annotations put them in.

    ``key`` is where the file declares it (``when.destructive``,
    ``upstreams.files.when.destructive``); each setting can only add a rule.
    """

    key: str
    klass: str
    approval: ApprovalRule | None = None
    action: bool = False
    withhold: bool = False


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    """One upstream MCP server: a command started over stdio, or a streamable-HTTP URL."""

    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    connect_timeout: float = 30.0
    backoff_initial: float = 0.25
    backoff_max: float = 30.0
    prefix: bool = False
    pin: str = "strict"
    tools: Mapping[str, ToolConfig] = field(default_factory=dict)
    extra: str = "reject"
    health_interval: float = 15.0
    prompts: tuple[str, ...] = ()
    """The upstream's prompts clients may list and get (none unless named)."""
    resources: tuple[str, ...] = ()
    """The upstream's resource URIs clients may list and read (none unless named)."""
    when: tuple[WhenRule, ...] = ()
    """The class rules for its tools: the file's ``[when]`` ones, then its own."""
    elicitation: str = "relay"
    """``relay``: the upstream's questions during a call go to the calling client; ``refuse``."""
    sampling: str = "refuse"
    """``relay``: the upstream may ask the calling client's model for a completion; ``refuse``."""


@dataclass(frozen=True, slots=True)
class TenantConfig:
    """A tenant's allow-list (None: no list, every tool) and the values bound for it."""

    tools: frozenset[str] | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    limits: Limits | None = None  # None: the gateway's [limits]
    approvals: Mapping[str, ApprovalRule] = field(default_factory=dict)
    """Published tool name -> this tenant's own approval rule (beside the tool's)."""


@dataclass(frozen=True, slots=True)
class WorkflowConfig:
    """A step-gated chain of (published) tool names, each with the instructions its success returns."""

    name: str
    steps: tuple[tuple[str, str], ...]


ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                         "ES256", "ES384", "ES512", "EdDSA")  # fmt: skip
"""The JWS algorithms a bearer JWT may be signed with (never ``none``, never HMAC)."""


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    """Bearer JWTs of one issuer, for this gateway's resource URL; scopes mapped to tools.

    ``scopes``: scope -> published tool names (``*``: every tool); None: scopes
    do not restrict the tools.
    """

    issuer: str
    resource: str
    jwks_url: str | None = None
    jwks_file: str | None = None
    tenant_claim: str = "tenant"
    algorithms: tuple[str, ...] = ASYMMETRIC_ALGORITHMS
    leeway: float = 30.0
    jwks_refetch_interval: float = 60.0
    scopes: Mapping[str, frozenset[str]] | None = None


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """Where bearer tokens come from: a file, an environment variable, both; or OAuth JWTs."""

    tokens_file: str | None = None
    tokens_env: str | None = None
    oauth: OAuthConfig | None = None


@dataclass(frozen=True, slots=True)
class ApprovalsConfig:
    """How long a request lives, and who may decide requests over HTTP (``<tenant> <who>
    <token>`` entries of a file, an environment variable, or both)."""

    ttl: float = 3_600.0
    approvers_file: str | None = None
    approvers_env: str | None = None
    oauth_scope: str | None = None
    """With ``[auth.oauth]``: a JWT with this scope decides for its tenant, as its ``sub``."""


@dataclass(frozen=True, slots=True)
class SecretsConfig:
    """The secret provider: ``env`` (``prefix`` + name), ``file`` (``directory``/name), or
    ``module:factory`` (a callable returning a ``name -> value`` function)."""

    provider: str = "env"
    prefix: str = ""
    directory: str | None = None
    timeout: float = 5.0


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """The whole file, checked. ``store`` is a path, a URL, or ``env:VARIABLE``."""

    name: str = "guardrails-gateway"
    store: str = "guardrails-gateway.db"
    policy: str | None = None
    max_calls_per_session: int | None = None
    max_result_chars: int = 16_000
    stdio_tenant: str = "local"
    pin_interval: float = 10.0
    upstreams: tuple[UpstreamConfig, ...] = ()
    tenants: Mapping[str, TenantConfig] = field(default_factory=dict)
    workflows: tuple[WorkflowConfig, ...] = ()
    auth: AuthConfig = field(default_factory=AuthConfig)
    secrets: SecretsConfig = field(default_factory=SecretsConfig)
    source: str = "<config>"
    limits: Limits = field(default_factory=Limits)
    max_sessions: int = 10_000
    session_idle_timeout: float = 1800.0
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    approvals: ApprovalsConfig = field(default_factory=ApprovalsConfig)

    def limits_of(self, tenant: str | None) -> Limits:
        """The limits of ``tenant``: its own table, else the gateway's."""
        config = None if tenant is None else self.tenants.get(tenant)
        return self.limits if config is None or config.limits is None else config.limits
