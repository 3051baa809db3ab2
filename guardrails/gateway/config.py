"""The gateway's configuration: a TOML file, checked in full when it is loaded.

Every mistake is a ``ConfigurationError`` that names the file and the key
(``gateway.toml: upstreams.billing.tools.charge.bind.account_id: ...``), raised
before any upstream is started. Relative paths are read from the file's folder.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._conditions import ApprovalRule, parse_approval
from ..errors import ConfigurationError
from .settings import (
    ASYMMETRIC_ALGORITHMS,
    KEYS,
    ApprovalsConfig,
    AuthConfig,
    GatewayConfig,
    Limits,
    OAuthConfig,
    SecretsConfig,
    TenantConfig,
    ToolConfig,
    UpstreamConfig,
    WhenRule,
    WorkflowConfig,
)

__all__ = [
    "ApprovalsConfig",
    "AuthConfig",
    "GatewayConfig",
    "Limits",
    "SecretsConfig",
    "TenantConfig",
    "ToolConfig",
    "UpstreamConfig",
    "KEYS",
    "WhenRule",
    "WorkflowConfig",
    "load_config",
    "parse_config",
]


def load_config(path: str | Path) -> GatewayConfig:
    """Read and check a gateway TOML file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(
            f"{path}: cannot read the gateway config ({exc.strerror})"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path}: not valid TOML ({exc})") from exc
    return parse_config(data, base=path.absolute().parent, source=str(path))


def parse_config(
    data: Mapping[str, Any], *, base: Path = Path("."), source: str = "<config>"
) -> GatewayConfig:
    """A checked ``GatewayConfig`` from parsed TOML; paths relative to ``base``."""
    r = _Reader(source, base)
    r.keys(data, "", KEYS[""])
    gw = r.table(data, "gateway")
    r.keys(gw, "gateway", KEYS["gateway"])
    store = r.store(gw)
    upstreams = r.table(data, "upstreams")
    if not upstreams:
        raise r.error("upstreams", "declare at least one upstream ([upstreams.NAME])")
    limits = r.limits(r.table(data, "limits"), "limits", Limits())
    r.limits_default = limits
    r.when_default = r.when(r.table(data, "when"), "when")
    auth = r.auth(r.table(data, "auth"))
    approvals = r.approvals(r.table(data, "approvals"))
    if approvals.oauth_scope is not None and auth.oauth is None:
        raise r.error("approvals.oauth_scope", "needs [auth.oauth] (the issuer of the tokens)")
    return GatewayConfig(
        name=r.text(gw, "gateway.name", "guardrails-gateway"),
        store=store,
        policy=None if gw.get("policy") is None else r.path(r.text(gw, "gateway.policy")),
        max_calls_per_session=r.count(gw, "gateway.max_calls_per_session"),
        max_result_chars=r.result_chars(gw),
        stdio_tenant=r.text(gw, "gateway.stdio_tenant", "local"),
        pin_interval=r.seconds(gw, "gateway.pin_interval", 10.0) or 10.0,
        upstreams=tuple(r.upstream(name, upstreams[name]) for name in upstreams),
        tenants={name: r.tenant(name, value) for name, value in r.table(data, "tenants").items()},
        workflows=tuple(
            r.workflow(name, value) for name, value in r.table(data, "workflows").items()
        ),
        auth=auth,
        secrets=r.secrets(r.table(data, "secrets")),
        source=source,
        limits=limits,
        max_sessions=r.count(gw, "gateway.max_sessions", least=1) or 10_000,
        session_idle_timeout=r.seconds(gw, "gateway.session_idle_timeout", 1800.0) or 1800.0,
        allowed_hosts=r.names(gw, "gateway.allowed_hosts"),
        allowed_origins=r.names(gw, "gateway.allowed_origins"),
        approvals=approvals,
    )


class _Reader:
    """Typed reads with errors that name the file and the key."""

    def __init__(self, source: str, base: Path) -> None:
        self.source = source
        self.base = base
        self.limits_default = Limits()
        self.when_default: tuple[WhenRule, ...] = ()

    def error(self, key: str, message: str) -> ConfigurationError:
        return ConfigurationError(f"{self.source}: {key}: {message}")

    def keys(self, table: Mapping[str, Any], where: str, allowed: frozenset[str]) -> None:
        for key in table:
            if key not in allowed:
                name = f"{where}.{key}" if where else key
                raise self.error(name, f"unknown key (expected one of {sorted(allowed)})")

    def table(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = data.get(key.rsplit(".", 1)[-1], {})
        if not isinstance(value, Mapping):
            raise self.error(key, "must be a table")
        return value

    def text(self, data: Mapping[str, Any], key: str, default: str | None = None) -> str:
        value = data.get(key.rsplit(".", 1)[-1], default)
        if not isinstance(value, str) or not value:
            raise self.error(key, "must be a non-empty string")
        return value

    def texts(self, data: Mapping[str, Any], key: str) -> dict[str, str]:
        table = self.table(data, key)
        for name, value in table.items():
            if not isinstance(value, str) or not value:
                raise self.error(f"{key}.{name}", "must be a non-empty string")
        return dict(table)

    def path(self, value: str) -> str:
        return str(self.base / Path(value).expanduser())

    def count(self, data: Mapping[str, Any], key: str, *, least: int = 0) -> int | None:
        value = data.get(key.rsplit(".", 1)[-1])
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            what = "a non-negative" if least == 0 else f"an integer of at least {least}, not"
            if least == 0:
                raise self.error(key, f"must be {what} integer, not {value!r}")
            raise self.error(key, f"must be {what} {value!r}")
        return value

    def names(self, data: Mapping[str, Any], key: str) -> tuple[str, ...]:
        value = data.get(key.rsplit(".", 1)[-1], [])
        if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
            raise self.error(key, "must be a list of non-empty strings")
        return tuple(value)

    def limits(self, data: Mapping[str, Any], where: str, base: Limits) -> Limits:
        """A ``[limits]`` table; each key it leaves out is ``base``'s."""
        self.keys(data, where, KEYS["limits"])

        def rate(key: str, old: float | None) -> float | None:
            return self.seconds(data, f"{where}.{key}", old) if key in data else old

        def count(key: str, old: int | None, least: int) -> int | None:
            return self.count(data, f"{where}.{key}", least=least) if key in data else old

        result_bytes = count("max_result_bytes", base.max_result_bytes, 1024)
        assert result_bytes is not None
        return Limits(
            max_sessions=count("max_sessions", base.max_sessions, 0),
            calls_per_second=rate("calls_per_second", base.calls_per_second),
            tool_calls_per_second=rate("tool_calls_per_second", base.tool_calls_per_second),
            max_in_flight=count("max_in_flight", base.max_in_flight, 0),
            max_result_bytes=result_bytes,
        )

    def seconds(self, data: Mapping[str, Any], key: str, default: float | None) -> float | None:
        value = data.get(key.rsplit(".", 1)[-1], default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number of seconds, not {value!r}")
        if not (math.isfinite(value) and value > 0):
            raise self.error(key, f"must be positive and finite, not {value!r}")
        return float(value)

    def flag(self, data: Mapping[str, Any], key: str) -> bool:
        value = data.get(key.rsplit(".", 1)[-1], False)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, not {value!r}")
        return value

    def choice(self, data: Mapping[str, Any], key: str, choices: tuple[str, ...]) -> str:
        """One of ``choices`` (the first is the default)."""
        value = data.get(key.rsplit(".", 1)[-1], choices[0])
        if not isinstance(value, str) or value not in choices:
            raise self.error(key, f"must be one of {list(choices)}, not {value!r}")
        return value

    def store(self, gw: Mapping[str, Any]) -> str:
        if "store" in gw and "store_env" in gw:
            raise self.error("gateway.store_env", "give store or store_env, not both")
        if "store_env" in gw:
            return "env:" + self.text(gw, "gateway.store_env")
        store = self.text(gw, "gateway.store", "guardrails-gateway.db")
        if store == "memory:" or store.startswith(("postgresql://", "postgres://")):
            return store
        if store.startswith("sqlite:///"):
            store = store[len("sqlite:///") - 1 :]  # the path, with its leading slash
        elif "://" in store:
            raise self.error(
                "gateway.store", "use a file path, sqlite:///, postgresql:// or memory:"
            )
        return self.path(store)

    def result_chars(self, gw: Mapping[str, Any]) -> int:
        value = self.count(gw, "gateway.max_result_chars")
        if value is None:
            return 16_000
        if value < 64:
            raise self.error("gateway.max_result_chars", f"must be at least 64, not {value}")
        return value

    def upstream(self, name: str, data: Any) -> UpstreamConfig:
        where = f"upstreams.{name}"
        if not isinstance(data, Mapping):
            raise self.error(where, "must be a table")
        self.keys(data, where, KEYS["upstreams.NAME"])
        command, url = data.get("command"), data.get("url")
        if (command is None) == (url is None):
            raise self.error(where, "give exactly one of command (stdio) or url (streamable HTTP)")
        if command is not None and (
            not isinstance(command, list)
            or not command
            or not all(isinstance(part, str) and part for part in command)
        ):
            raise self.error(f"{where}.command", "must be a non-empty list of strings")
        if url is not None and not (
            isinstance(url, str) and url.startswith(("http://", "https://"))
        ):
            raise self.error(f"{where}.url", "must be an http:// or https:// URL")
        tools = self.table(data, f"{where}.tools")
        cwd = data.get("cwd")
        extra = data.get("extra", "reject")
        if extra not in ("reject", "drop", "allow"):
            raise self.error(f"{where}.extra", f"must be reject, drop or allow, not {extra!r}")
        return UpstreamConfig(
            name=name,
            command=None if command is None else self.command(command),
            url=url,
            env=self.texts(data, f"{where}.env"),
            # A stdio upstream runs in the file's folder unless told otherwise.
            cwd=None
            if command is None
            else self.path(self.text(data, f"{where}.cwd") if cwd is not None else "."),
            headers=self.texts(data, f"{where}.headers"),
            timeout=self.seconds(data, f"{where}.timeout", 30.0) or 30.0,
            connect_timeout=self.seconds(data, f"{where}.connect_timeout", 30.0) or 30.0,
            backoff_initial=self.seconds(data, f"{where}.backoff_initial", 0.25) or 0.25,
            backoff_max=self.seconds(data, f"{where}.backoff_max", 30.0) or 30.0,
            prefix=self.flag(data, f"{where}.prefix"),
            pin=self.choice(data, f"{where}.pin", ("strict", "auto")),
            tools={tool: self.tool(f"{where}.tools.{tool}", tools[tool]) for tool in tools},
            extra=extra,
            health_interval=self.seconds(data, f"{where}.health_interval", 15.0) or 15.0,
            prompts=self.names(data, f"{where}.prompts"),
            resources=self.names(data, f"{where}.resources"),
            when=self.when_default + self.when(self.table(data, f"{where}.when"), f"{where}.when"),
            elicitation=self.choice(data, f"{where}.elicitation", ("relay", "refuse")),
            sampling=self.choice(data, f"{where}.sampling", ("refuse", "relay")),
        )

    def when(self, data: Mapping[str, Any], where: str) -> tuple[WhenRule, ...]:
        """A ``when`` table: a rule per class of tools (``CLASSES``), each only adding."""
        from .annotations import CLASSES

        self.keys(data, where, frozenset(CLASSES))
        rules = []
        for klass in CLASSES:  # in a fixed order, whatever the file's
            if klass not in data:
                continue
            key = f"{where}.{klass}"
            table = self.table(data, key)
            self.keys(table, key, KEYS["when.CLASS"])
            if not table:
                raise self.error(key, "give approval, action or withhold")
            if table.get("approval") == "never":
                raise self.error(
                    f"{key}.approval",
                    "a class rule only adds approvals: use always or a condition",
                )
            rules.append(
                WhenRule(
                    key=key,
                    klass=klass,
                    approval=self.approval(table.get("approval"), f"{key}.approval"),
                    action=self.only_true(table, f"{key}.action"),
                    withhold=self.only_true(table, f"{key}.withhold"),
                )
            )
        return tuple(rules)

    def only_true(self, data: Mapping[str, Any], key: str) -> bool:
        """A class rule's flag: absent, or true (a class rule never takes away)."""
        name = key.rsplit(".", 1)[-1]
        if name in data and data[name] is not True:
            raise self.error(key, f"must be true (a class rule only adds), not {data[name]!r}")
        return name in data

    def command(self, command: list[str]) -> tuple[str, ...]:
        """A program written as a relative path (``./server``, ``bin/server``) is the
        file's folder's; a bare name is looked up on PATH."""
        program = command[0]
        if "/" in program and not Path(program).expanduser().is_absolute():
            program = self.path(program)
        return (program, *command[1:])

    def tool(self, where: str, data: Any) -> ToolConfig:
        if not isinstance(data, Mapping):
            raise self.error(where, "must be a table")
        self.keys(data, where, KEYS["upstreams.NAME.tools.TOOL"])
        action = self.flag(data, f"{where}.action")
        secrets = self.texts(data, f"{where}.secrets")
        if secrets and not action:
            raise self.error(
                f"{where}.secrets", "secrets go only into tools declared action = true"
            )
        cost, daily_cap, instance_cap = self.budget(where, data)
        key = data.get("idempotency_key")
        if key is not None and not (
            isinstance(key, bool)
            or (isinstance(key, list) and key and all(isinstance(k, str) for k in key))
        ):
            raise self.error(f"{where}.idempotency_key", "must be true or a list of argument names")
        return ToolConfig(
            action=action,
            bind=self.texts(data, f"{where}.bind"),
            secrets=secrets,
            timeout=self.seconds(data, f"{where}.timeout", None),
            idempotency_key=tuple(key) if isinstance(key, list) else key,
            cost=cost,
            daily_cap=daily_cap,
            instance_cap=instance_cap,
            approval=self.approval(data.get("approval"), f"{where}.approval"),
        )

    def budget(
        self, where: str, data: Mapping[str, Any]
    ) -> tuple[float | None, float | None, float | None]:
        """``cost`` per call and the caps it is counted against (a cap needs a cost)."""
        cost = self.amount(data, f"{where}.cost", zero=True)
        daily = self.amount(data, f"{where}.daily_cap")
        instance = self.amount(data, f"{where}.instance_cap")
        for cap, value in (("daily_cap", daily), ("instance_cap", instance)):
            if value is not None and not cost:
                raise self.error(f"{where}.{cap}", "a cap needs a positive cost per call (cost)")
        return cost, daily, instance

    def amount(self, data: Mapping[str, Any], key: str, *, zero: bool = False) -> float | None:
        value = data.get(key.rsplit(".", 1)[-1])
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number, not {value!r}")
        if not (math.isfinite(value) and (value >= 0 if zero else value > 0)):
            least = "non-negative" if zero else "positive"
            raise self.error(key, f"must be {least} and finite, not {value!r}")
        return float(value)

    def tenant(self, name: str, data: Any) -> TenantConfig:
        where = f"tenants.{name}"
        if not isinstance(data, Mapping):
            raise self.error(where, "must be a table")
        self.keys(data, where, KEYS["tenants.NAME"])
        tools = data.get("tools")
        if tools is not None and not (
            isinstance(tools, list) and all(isinstance(t, str) for t in tools)
        ):
            raise self.error(f"{where}.tools", "must be a list of tool names")
        limits = data.get("limits")
        return TenantConfig(
            tools=None if tools is None else frozenset(tools),
            values=dict(self.table(data, f"{where}.values")),
            limits=None
            if limits is None
            else self.limits(
                self.table(data, f"{where}.limits"), f"{where}.limits", self.limits_default
            ),
            approvals=self.approval_table(self.table(data, f"{where}.approvals"), where),
        )

    def approval(self, value: object, key: str) -> ApprovalRule | None:
        """An ``approval`` setting (``always``, ``never``, a condition), parsed now: a typo
        is an error naming the key, never an implicit approve. Absent: None."""
        if value is None:
            return None
        try:
            return parse_approval(value, "approval")
        except ConfigurationError as exc:
            raise self.error(key, str(exc).removeprefix("approval: ")) from None

    def approval_table(self, data: Mapping[str, Any], where: str) -> dict[str, ApprovalRule]:
        """A tenant's ``approvals``: published tool name -> setting."""
        rules: dict[str, ApprovalRule] = {}
        for tool, value in data.items():
            rule = self.approval(value, f"{where}.approvals.{tool}")
            if rule is not None:
                rules[tool] = rule
        return rules

    def approvals(self, data: Mapping[str, Any]) -> ApprovalsConfig:
        self.keys(data, "approvals", KEYS["approvals"])
        file = data.get("approvers_file")
        env = data.get("approvers_env")
        return ApprovalsConfig(
            ttl=self.seconds(data, "approvals.ttl", 3600.0) or 3600.0,
            approvers_file=None
            if file is None
            else self.path(self.text(data, "approvals.approvers_file")),
            approvers_env=None if env is None else self.text(data, "approvals.approvers_env"),
            oauth_scope=None
            if data.get("oauth_scope") is None
            else self.text(data, "approvals.oauth_scope"),
        )

    def workflow(self, name: str, data: Any) -> WorkflowConfig:
        where = f"workflows.{name}"
        if not isinstance(data, Mapping):
            raise self.error(where, "must be a table")
        self.keys(data, where, KEYS["workflows.NAME"])
        steps = data.get("steps")
        if not isinstance(steps, list) or not steps:
            raise self.error(f"{where}.steps", "must be a non-empty list of steps")
        chain = []
        for number, step in enumerate(steps):
            at = f"{where}.steps[{number}]"
            if not isinstance(step, Mapping):
                raise self.error(at, "must be a table with tool and instructions")
            self.keys(step, at, KEYS["workflows.NAME.steps"])
            chain.append((self.text(step, f"{at}.tool"), self.text(step, f"{at}.instructions")))
        tools = [tool for tool, _ in chain]
        if len(set(tools)) != len(tools):
            raise self.error(f"{where}.steps", "a tool appears twice")
        return WorkflowConfig(name=name, steps=tuple(chain))

    def auth(self, data: Mapping[str, Any]) -> AuthConfig:
        self.keys(data, "auth", KEYS["auth"])
        file = data.get("tokens_file")
        return AuthConfig(
            tokens_file=None if file is None else self.path(self.text(data, "auth.tokens_file")),
            tokens_env=None
            if data.get("tokens_env") is None
            else self.text(data, "auth.tokens_env"),
            oauth=None if "oauth" not in data else self.oauth(self.table(data, "auth.oauth")),
        )

    def oauth(self, data: Mapping[str, Any]) -> OAuthConfig:
        self.keys(data, "auth.oauth", KEYS["auth.oauth"])
        if ("jwks_url" in data) == ("jwks_file" in data):
            raise self.error("auth.oauth", "give exactly one of jwks_url or jwks_file")
        url = data.get("jwks_url")
        if url is not None and not _jwks_url(url):
            raise self.error(
                "auth.oauth.jwks_url", "must be an https:// URL (http:// only on this host)"
            )
        for key in ("issuer", "resource"):
            value = self.text(data, f"auth.oauth.{key}")
            if not value.startswith(("https://", "http://")):
                raise self.error(f"auth.oauth.{key}", "must be an https:// URL")
        algorithms = data.get("algorithms", list(ASYMMETRIC_ALGORITHMS))
        if not (
            isinstance(algorithms, list)
            and algorithms
            and all(isinstance(a, str) and a in ASYMMETRIC_ALGORITHMS for a in algorithms)
        ):
            raise self.error(
                "auth.oauth.algorithms", f"must be a list of {list(ASYMMETRIC_ALGORITHMS)}"
            )
        scopes = data.get("scopes")
        return OAuthConfig(
            issuer=data["issuer"],
            resource=data["resource"],
            jwks_url=url,
            jwks_file=None
            if "jwks_file" not in data
            else self.path(self.text(data, "auth.oauth.jwks_file")),
            tenant_claim=self.text(data, "auth.oauth.tenant_claim", "tenant"),
            algorithms=tuple(algorithms),
            leeway=self.leeway(data),
            jwks_refetch_interval=self.seconds(data, "auth.oauth.jwks_refetch_interval", 60.0)
            or 60.0,
            scopes=None if scopes is None else self.scopes(self.table(data, "auth.oauth.scopes")),
        )

    def leeway(self, data: Mapping[str, Any]) -> float:
        """Seconds of clock skew allowed on ``exp`` and ``nbf``: 0 to 300, default 30."""
        value = self.amount(data, "auth.oauth.leeway", zero=True)
        if value is None:
            return 30.0
        if value > 300:
            raise self.error("auth.oauth.leeway", f"must be at most 300 seconds, not {value:g}")
        return value

    def scopes(self, data: Mapping[str, Any]) -> dict[str, frozenset[str]]:
        table: dict[str, frozenset[str]] = {}
        for scope, tools in data.items():
            if not (isinstance(tools, list) and all(isinstance(t, str) and t for t in tools)):
                raise self.error(f"auth.oauth.scopes.{scope}", "must be a list of tool names")
            table[scope] = frozenset(tools)
        return table

    def secrets(self, data: Mapping[str, Any]) -> SecretsConfig:
        self.keys(data, "secrets", KEYS["secrets"])
        provider = self.text(data, "secrets.provider", "env")
        if provider not in ("env", "file") and ":" not in provider:
            raise self.error("secrets.provider", "use env, file, or module:factory")
        directory = data.get("directory")
        if provider == "file" and directory is None:
            raise self.error("secrets.directory", "the file provider needs a directory")
        prefix = data.get("prefix", "")
        if not isinstance(prefix, str):
            raise self.error("secrets.prefix", "must be a string")
        return SecretsConfig(
            provider=provider,
            prefix=prefix,
            directory=None
            if directory is None
            else self.path(self.text(data, "secrets.directory")),
            timeout=self.seconds(data, "secrets.timeout", 5.0) or 5.0,
        )


def _jwks_url(url: object) -> bool:
    """An https:// URL, or an http:// one on a loopback address (a local issuer)."""
    from urllib.parse import urlparse

    if not isinstance(url, str):
        return False
    if url.startswith("https://"):
        return True
    try:
        host = urlparse(url).hostname
    except ValueError:
        return False
    return url.startswith("http://") and host in ("127.0.0.1", "localhost", "::1")
