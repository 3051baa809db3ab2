"""What an upstream asks of the calling client during a call: elicitation and sampling.

Each upstream says what may be relayed (``elicitation``, ``sampling``:
``relay`` or ``refuse``); a refused request fails on the upstream's side as
it did before the relay existed. A request is relayed only to the client of
the one call it belongs to, and only when that client declared the
capability; the question is redacted of the upstream's secrets first.

- A 2026-07-28 upstream answers the call ``input_required``. A 2026-07-28
  client gets that result (``InputRequired``, raised through the engine) and
  retries with its answers: a new ``tools/call``, guarded like any call. For
  an older client the upstream's own client asks it from the call's task
  (``Asker``, where ``relay.caller()`` is that call's), then retries.
- An older upstream sends its request while the call runs, on the
  connection every caller shares: ``Asker`` relays it only when exactly one
  call is in flight on that connection (``callers``), else refuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import StopRun
from . import relay
from .settings import UpstreamConfig
from .stderr import redact_value

__all__ = [
    "ELICIT",
    "SAMPLE",
    "Asker",
    "InputRequired",
    "passes",
    "question",
    "redacted",
    "relays",
    "rounds",
]

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"


class InputRequired(StopRun):
    """The upstream answered ``input_required``: ``result`` (redacted) goes to the caller."""

    def __init__(self, upstream: str, result: Any) -> None:
        super().__init__(f"upstream {upstream!r} asks the calling client for input")
        self.result = result


def relays(config: UpstreamConfig, method: str) -> bool:
    """Whether ``config`` lets requests of ``method`` reach a client."""
    if method == ELICIT:
        return config.elicitation == "relay"
    if method == SAMPLE:
        return config.sampling == "relay"
    return False


def passes(config: UpstreamConfig, result: Any, ctx: Any) -> bool:
    """Whether an ``InputRequiredResult`` asks only for what ``config`` relays and the
    calling client (``ctx``) declared."""
    requests = result.input_requests or {}
    return all(
        relays(config, request.method) and declared(ctx, request.method)
        for request in requests.values()
    )


def rounds(config: UpstreamConfig, ctx: Any, params: Any) -> tuple[Any, Any] | None:
    """The caller's ``inputResponses`` and ``requestState`` when an ``input_required``
    answer goes back to it (a 2026-07-28 client, an upstream that relays); else None."""
    if ctx is None or not modern(ctx):
        return None
    if config.elicitation != "relay" and config.sampling != "relay":
        return None
    return getattr(params, "input_responses", None), getattr(params, "request_state", None)


def question(result: Any, secrets: Iterable[str]) -> Any:
    """What the calling client is sent of an ``InputRequiredResult``: its requests and
    its ``requestState`` (none of the upstream's ``_meta``), redacted."""
    from mcp.types import InputRequiredResult

    asked = InputRequiredResult(
        input_requests=result.input_requests, request_state=result.request_state
    )
    return redacted(asked, secrets)


def redacted(message: Any, secrets: Iterable[str]) -> Any:
    """A copy of an MCP message (a request, an ``InputRequiredResult``) with each
    secret cut out of its strings; ``message`` itself when none was there."""
    dumped = message.model_dump(by_alias=True, exclude_none=True, mode="json")
    cut = redact_value(dumped, secrets)
    return message if cut == dumped else type(message).model_validate(cut)


def modern(ctx: Any) -> bool:
    """Whether the calling client speaks 2026-07-28 (it is asked by ``input_required``)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def declared(ctx: Any, method: str) -> bool:
    """Whether the calling client declared the capability ``method`` needs."""
    from mcp.types import ClientCapabilities, ElicitationCapability, SamplingCapability

    wanted = (
        ClientCapabilities(elicitation=ElicitationCapability())
        if method == ELICIT
        else ClientCapabilities(sampling=SamplingCapability())
    )
    try:
        return bool(ctx.session.check_client_capability(wanted))
    except Exception:
        return False


class Asker:
    """An upstream client's elicitation and sampling callbacks.

    ``callers()`` are the calls in flight on the upstream's connection;
    ``secrets()`` what the upstream was given (cut out of its questions).
    """

    def __init__(
        self,
        config: UpstreamConfig,
        callers: Callable[[], list[Any]],
        secrets: Callable[[], Iterable[str]],
    ) -> None:
        self.config = config
        self.callers = callers
        self.secrets = secrets

    async def elicit(self, context: Any, params: Any) -> Any:
        from mcp.types import ElicitRequest, ElicitResult

        return await self._ask(ElicitRequest(params=params), ElicitResult)

    async def sample(self, context: Any, params: Any) -> Any:
        from mcp.types import CreateMessageRequest, CreateMessageResult
        from mcp_types import CreateMessageResultWithTools

        wants_tools = params.tools is not None or params.tool_choice is not None
        answer = CreateMessageResultWithTools if wants_tools else CreateMessageResult
        return await self._ask(CreateMessageRequest(params=params), answer)

    def target(self, method: str) -> Any:
        """The calling client to ask, or None (refused)."""
        if not relays(self.config, method):
            return None
        ctx = relay.caller()  # the call's own task: a 2026-07-28 upstream's round
        if ctx is None:
            # An older upstream's request names no call: the one in flight, if one
            # (a prompt or resource read in flight counts, with no client to ask).
            callers = self.callers()
            ctx = callers[0] if len(callers) == 1 else None
        if ctx is None or modern(ctx) or not declared(ctx, method):
            return None
        return ctx if getattr(ctx.session, "can_send_request", False) else None

    async def _ask(self, request: Any, answer: type[Any]) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp.shared.message import ServerMessageMetadata
        from mcp.types import INTERNAL_ERROR, METHOD_NOT_FOUND, ErrorData

        ctx = self.target(request.method)
        if ctx is None:
            return ErrorData(code=METHOD_NOT_FOUND, message="not supported")
        sent = redacted(request, self.secrets())
        related = ServerMessageMetadata(related_request_id=ctx.request_id)
        try:
            return await ctx.session.send_request(sent, answer, metadata=related)
        except MCPError as exc:
            return ErrorData(code=exc.code, message="the client refused")
        except Exception:
            return ErrorData(code=INTERNAL_ERROR, message="the client did not answer")
