"""The MCP gateway: one guarded MCP endpoint in front of MCP servers we do not edit.

``guardrails gateway --config gateway.toml [--http HOST:PORT | --stdio]``; see
docs/gateway.md. Importing this package does not import ``mcp``; starting a
gateway does.
"""

from .app import Gateway, StoreCounter, UpstreamStartError
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
