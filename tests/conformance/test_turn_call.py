"""``turn.call`` and ``turn.acall`` held to the conformance table (the engine with no SDK around it).

The driver is the model: one turn per row, pre_turn over the scenario's tools,
then each step's calls (``acall``: a step's calls at once, as a framework runs
parallel tool calls).
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb

ENTRY = "turn.call"
RUNS = {row.id for row in tb.ROWS if hs.applies(ENTRY, row)}


def _received(result: object) -> hs.Received:
    return hs.Received(result.content, result.is_error)  # type: ignore[attr-defined]


def run(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    turn = sc.rails(ran, **instruments.engine()).turn(sc.context())
    turn.pre_turn("What can I do with my account?")
    ids = [f"call-{n}" for n in range(1, len(row.calls) + 1)]
    answers = [
        _received(turn.call(call.name, call.arguments, call_id))
        for call, call_id in zip(row.calls, ids, strict=True)
    ]
    return instruments.observed(answers, ran, call_ids=tuple(ids))


async def arun(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    turn = sc.rails(ran, **instruments.engine()).turn(sc.context())
    await turn.apre_turn("What can I do with my account?")
    ids = itertools.count(1)
    answers, call_ids = [], []
    for step in row.steps:
        step_ids = [f"call-{next(ids)}" for _ in step]
        results = await asyncio.gather(
            *(turn.acall(c.name, c.arguments, i) for c, i in zip(step, step_ids, strict=True))
        )
        answers += [_received(result) for result in results]
        call_ids += step_ids
    return instruments.observed(answers, ran, call_ids=tuple(call_ids))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
def test_turn_call_answers_as_the_table_says(row: tb.Row) -> None:
    if row.id not in RUNS:
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, run(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_turn_acall_answers_as_the_table_says(row: tb.Row) -> None:
    if row.id not in RUNS:
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row))
