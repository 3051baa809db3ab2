"""The MCP gateway: one guarded MCP endpoint in front of MCP servers we do not edit.

``guardrails gateway --config gateway.toml [--http HOST:PORT | --stdio]``; see
docs/gateway.md. Importing this package does not import ``mcp``; starting a
gateway does.
"""

from typing import TYPE_CHECKING, Any

from .config import (
    AuthConfig,
    GatewayConfig,
    SecretsConfig,
    TenantConfig,
    ToolConfig,
    UpstreamConfig,
    load_config,
    parse_config,
)
from .secrets import EnvSecrets, FileSecrets, SecretProvider, secret_provider

if TYPE_CHECKING:
    from .app import Gateway, StoreCounter, UpstreamStartError

__all__ = [
    "AuthConfig",
    "EnvSecrets",
    "FileSecrets",
    "Gateway",
    "GatewayConfig",
    "SecretProvider",
    "SecretsConfig",
    "StoreCounter",
    "TenantConfig",
    "ToolConfig",
    "UpstreamConfig",
    "UpstreamStartError",
    "load_config",
    "parse_config",
    "secret_provider",
]


def __getattr__(name: str) -> Any:
    # The server side needs anyio and mcp: imported when first used.
    if name in ("Gateway", "StoreCounter", "UpstreamStartError"):
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
