"""Secret providers: a function ``name -> value`` (``None`` when the secret is missing).

The engine binds a secret only into tools declared as actions; the gateway
never lists it, never logs it, and removes its value from upstream answers.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigurationError
from .config import SecretsConfig

__all__ = ["EnvSecrets", "FileSecrets", "SecretProvider", "secret_provider"]

SecretProvider = Callable[[str], str | None]


class EnvSecrets:
    """``prefix + name`` from the environment, read at each call (rotation needs no restart)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix

    def __call__(self, name: str) -> str | None:
        return os.environ.get(self.prefix + name) or None

    def __repr__(self) -> str:
        return f"EnvSecrets(prefix={self.prefix!r})"


class FileSecrets:
    """``directory/name`` (a Docker or Kubernetes secret mount), trailing newline removed."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def __call__(self, name: str) -> str | None:
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            return None
        try:
            value = (self.directory / name).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError:
            return None
        return value or None

    def __repr__(self) -> str:
        return f"FileSecrets({str(self.directory)!r})"


def secret_provider(config: SecretsConfig) -> SecretProvider:
    """The provider the configuration names; ``module:factory`` is called with no argument."""
    if config.provider == "env":
        return EnvSecrets(config.prefix)
    if config.provider == "file":
        assert config.directory is not None  # checked when the config was read
        return FileSecrets(config.directory)
    module, _, attribute = config.provider.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"secrets.provider: cannot import {config.provider!r}") from exc
    provider = factory()
    if not callable(provider):
        raise ConfigurationError(f"secrets.provider: {config.provider!r} did not return a callable")
    return provider  # type: ignore[no-any-return]
