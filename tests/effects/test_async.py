"""The effect hooks and the audit log behave the same through ``acall`` as through ``call``."""

from __future__ import annotations

from typing import Any

from guardrails import Guardrails, Outcome, tool
from guardrails.audit import AuditLog
from guardrails.effects import Idempotency, PaidCall, Snapshots, Usage
from guardrails.rules.workflow import Step, Workflow
from guardrails.store import Store

RUNS: list[str] = []


def _rails(store: Store) -> tuple[Guardrails, AuditLog, PaidCall]:
    paid = PaidCall(store, usage=lambda _: Usage(1, 2, 0.6), instance_cap=1.0)

    @tool(
        effect=True,
        options={"idempotency_key": "send-{to}", "snapshot": lambda args: {"to": args["to"]}},
    )
    def send(to: str) -> str:
        RUNS.append(to)
        return str(paid(_reply, to))

    @tool
    def begin() -> None:
        return None

    flow = Workflow("mail", [Step("begin", "Now call send.")], store)
    audit = AuditLog(store)
    rails = Guardrails(
        [send, begin],
        hooks=[audit, flow, Idempotency(store), Snapshots(store)],
        recorder=[audit],
    )
    return rails, audit, paid


def _reply(to: str) -> str:
    return f"sent to {to}"


async def _scenario(store: Store, sync: bool) -> list[Any]:
    RUNS.clear()
    rails, audit, _ = _rails(store)
    turn = rails.turn(session="s-1", workflow="wf-1")
    calls = [("send", {"to": "a"}), ("begin", {}), ("send", {"to": "a"}), ("send", {"to": "b"})]
    if sync:
        results = [turn.call(n, a) for n, a in calls]
    else:
        results = [await turn.acall(n, a) for n, a in calls]
    rows = [(r.kind, r.tool, r.outcome, r.reason, r.cost) for r in audit.rows()]
    return [[(r.outcome, r.reason, r.content) for r in results], rows, list(RUNS)]


async def test_acall_and_call_give_the_same_results_and_rows(store: Store) -> None:
    from guardrails.store import MemoryStore

    async_run = await _scenario(store, sync=False)
    sync_run = await _scenario(MemoryStore(), sync=True)
    assert async_run == sync_run
    outcomes = [o for o, _, _ in async_run[0]]
    assert outcomes == [Outcome.OK, Outcome.OK, Outcome.OK, Outcome.LIMIT]
    assert async_run[2] == ["a", "b"]
