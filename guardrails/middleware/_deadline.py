"""User code that may carry a deadline: the bound-value providers (step 2) and
the tool itself (step 7). An answer after the deadline is a timeout, even when
the callable ignored its cancellation (``_aio.late``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from time import perf_counter_ns
from typing import Any

from .._aio import (
    acall_with_timeout,
    await_with_timeout,
    call_with_timeout,
    late,
    run_coroutine,
)
from ..context import ToolResult, TurnContext
from ..tools import Tool
from .admission import resolve, unresolved

__all__ = ["abind", "bind", "call_async", "call_sync"]

Bound = ToolResult | tuple[dict[str, Any], dict[str, Any] | None]


def call_sync(tool: Tool, args: dict[str, Any], secrets: dict[str, Any] | None) -> Any:
    kwargs = _kwargs(tool, args, secrets)
    if tool.is_async:
        return run_coroutine(tool.fn(**kwargs), tool.timeout)
    if tool.timeout is None:
        return tool.fn(**kwargs)
    return call_with_timeout(lambda: tool.fn(**kwargs), tool.timeout)


def call_async(tool: Tool, args: dict[str, Any], secrets: dict[str, Any] | None) -> Awaitable[Any]:
    """The call of an async tool, or of a sync one with a deadline, as one awaitable.

    Not a coroutine of its own: an async tool without deadline is awaited as
    its own coroutine, so a call in flight holds no frame or closure of ours
    around it (each one more object the garbage collector scans while the
    call waits). A sync tool without deadline is called inline (``call_sync``).
    """
    kwargs = _kwargs(tool, args, secrets)
    if not tool.is_async:
        return acall_with_timeout(partial(tool.fn, **kwargs), tool.timeout)  # type: ignore[arg-type]
    if tool.timeout is None:
        return tool.fn(**kwargs)  # type: ignore[no-any-return]
    return await_with_timeout(tool.fn(**kwargs), tool.timeout)


def _kwargs(tool: Tool, args: dict[str, Any], secrets: dict[str, Any] | None) -> dict[str, Any]:
    # ``args`` is the pipeline's own canonical copy: nothing else holds it.
    if tool.convert is not None:
        args = tool.convert(args)
    if secrets:
        args = {**args, **secrets}
    return args


def bind(
    tool: Tool,
    args: dict[str, Any],
    context: TurnContext,
    call_id: str,
    start: int,
    provider_timeout: float | None,
    secrets: Callable[[str], Any] | None,
) -> Bound:
    """The arguments merged with the bound values, and the secrets; or the refusal."""
    timeout = provider_timeout if tool.runs_providers else None
    if timeout is None:  # context keys only, or no provider deadline: inline
        try:
            return resolve(tool, args, context, secrets)
        except Exception as exc:
            return unresolved(call_id, tool.name, start, exc)
    began = perf_counter_ns()
    try:
        merged, found = call_with_timeout(resolve, timeout, tool, args, context, secrets)
    except Exception as exc:
        return unresolved(call_id, tool.name, start, exc)
    if late(began, int(timeout * 1e9)):
        return unresolved(call_id, tool.name, start, None, late=True)
    return merged, found


async def abind(
    tool: Tool,
    args: dict[str, Any],
    context: TurnContext,
    call_id: str,
    start: int,
    provider_timeout: float | None,
    secrets: Callable[[str], Any] | None,
) -> Bound:
    """``bind`` for ``arun``: a provider with a deadline runs off the event loop."""
    timeout = provider_timeout if tool.runs_providers else None
    if timeout is None:  # context keys only, or no provider deadline: inline
        try:
            return resolve(tool, args, context, secrets)
        except Exception as exc:
            return unresolved(call_id, tool.name, start, exc)
    began = perf_counter_ns()
    try:
        merged, found = await acall_with_timeout(resolve, timeout, tool, args, context, secrets)
    except Exception as exc:
        return unresolved(call_id, tool.name, start, exc)
    if late(began, int(timeout * 1e9)):
        return unresolved(call_id, tool.name, start, None, late=True)
    return merged, found
