"""An upstream's prompts, read-only: ``prompts/list`` and ``prompts/get`` relayed.

Nothing is exposed unless the configuration names it: an upstream's
``prompts = ["name", ...]`` lists the prompts clients may list and get, each
published as ``<upstream>__<prompt>`` (so two upstreams never collide). A
tenant the configuration does not name sees none. A prompt's messages have
the upstream's secrets cut out, like a tool's answer, and a prompt whose
text is longer than ``max_result_chars`` is refused, not cut. An upstream
that is down, or a prompt not exposed, is an MCP error with a fixed message:
the upstream's own text never reaches the client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .catalog import SEPARATOR
from .stderr import redact, redact_model

__all__ = ["Prompts", "tenant_sees"]

log = logging.getLogger("guardrails.gateway")

_NOT_FOUND = "Prompt not found"
_FAILED = "The prompt could not be read"


class Prompts:
    """``on_list_prompts`` and ``on_get_prompt`` for the gateway's server."""

    def __init__(
        self,
        upstreams: Iterable[Any],
        sees: Callable[[Any], bool],
        max_chars: int,
    ) -> None:
        self.by_name: dict[str, tuple[Any, str]] = {
            f"{u.name}{SEPARATOR}{prompt}": (u, prompt)
            for u in upstreams
            for prompt in u.config.prompts
        }
        self.sees = sees
        self.max_chars = max_chars

    async def list_prompts(self, ctx: Any, params: Any = None) -> Any:
        from mcp.types import ListPromptsResult

        found: list[Any] = []
        if self.by_name and self.sees(ctx):
            for upstream in {u.name: u for u, _ in self.by_name.values()}.values():
                found.extend(await self._listed(upstream))
        return ListPromptsResult(prompts=found, ttl_ms=0, cache_scope="private")

    async def _listed(self, upstream: Any) -> list[Any]:
        try:
            listed = await upstream.ask("list_prompts")
        except Exception as exc:
            log.warning("upstream %r: prompts not listed (%s)", upstream.name, type(exc).__name__)
            return []
        allowed, secrets = set(upstream.config.prompts), upstream.stderr.secrets
        found: dict[str, Any] = {}
        for p in listed.prompts:  # each named prompt once, however often it is listed
            if p.name in allowed and p.name not in found:
                name = f"{upstream.name}{SEPARATOR}{p.name}"
                found[p.name] = redact_model(p, secrets).model_copy(update={"name": name})
        return list(found.values())

    async def get_prompt(self, ctx: Any, params: Any) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

        found = self.by_name.get(params.name)
        if found is None or not self.sees(ctx):
            raise MCPError(INVALID_PARAMS, _NOT_FOUND)
        upstream, prompt = found
        try:
            result = await upstream.ask("get_prompt", prompt, params.arguments)
        except Exception as exc:
            log.warning("upstream %r: prompt %r not read (%s)", upstream.name, prompt,
                        type(exc).__name__)  # fmt: skip
            raise MCPError(INTERNAL_ERROR, _FAILED) from None
        return self._bounded(upstream, result)

    def _bounded(self, upstream: Any, result: Any) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INTERNAL_ERROR

        secrets = upstream.stderr.secrets
        messages = [redact_model(m, secrets) for m in result.messages]
        size = sum(len(m.content.model_dump_json()) for m in messages)
        size += len(result.description or "")
        if size > self.max_chars:
            log.warning("upstream %r: a prompt longer than max_result_chars was refused",
                        upstream.name)  # fmt: skip
            raise MCPError(INTERNAL_ERROR, _FAILED)
        description = result.description and redact(result.description, secrets)
        return result.model_copy(update={"messages": messages, "description": description})


def tenant_sees(tenants: Mapping[str, Any], tenant_of: Callable[[Any], str | None]) -> Any:
    """Whether a request's tenant may see prompts: any tenant the configuration
    names (every tenant when it names none)."""

    def sees(ctx: Any) -> bool:
        return not tenants or tenant_of(ctx) in tenants

    return sees
