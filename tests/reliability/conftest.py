"""Shared pieces of the reliability suite: the figures ledger and the leak check.

Every test in this directory counts what it tried in the session-wide
``ledger``: inputs, faults injected, faults whose escape or failure was
recorded with the right reason, calls that raised to the caller, and leaks
(model-facing content that is not one of the fixed sentences, or that holds a
planted secret). With ``GUARDRAILS_RELIABILITY_REPORT=path`` the totals are
written there as JSON at the end of the run; docs/reliability.md quotes them.

Hypothesis profiles: ``reliability`` (the default run, modest) and
``reliability-long`` (``GUARDRAILS_FUZZ=long``), selected in each fuzz module.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from guardrails import Outcome, ToolResult, model_sentence

# The default run is derandomized, so its figures are the same on every run;
# the long run explores new examples each time.
settings.register_profile(
    "reliability",
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "reliability-long",
    max_examples=5_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Planted in exception messages, argument values and secrets; none may ever
# appear in what the model is shown.
SECRET_MARK = "sk-live-7f3a9c"
FIELDS = ("inputs", "faults_injected", "faults_counted", "escapes", "raised", "leaks")


class Ledger:
    """Per-family counters for the figures in docs/reliability.md."""

    def __init__(self) -> None:
        self.families: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.maxima: defaultdict[str, dict[str, float]] = defaultdict(dict)

    def add(self, family: str, **counts: int) -> None:
        # FIELDS are summed into the totals; any other key is a family's own count.
        for key, value in counts.items():
            self.families[family][key] += value

    def note(self, family: str, key: str, value: float) -> None:
        """Keep the largest value seen (a measurement, never asserted on)."""
        seen = self.maxima[family]
        seen[key] = max(seen.get(key, value), value)

    def check(
        self,
        family: str,
        result: ToolResult,
        declared: Iterable[str] = (),
        planted: Iterable[str] = (),
    ) -> list[str]:
        """Leaks in one result (recorded; the caller asserts the list is empty).

        A non-ok result must show exactly the fixed sentence built by
        ``model_sentence`` from its outcome and parameter names that the schema
        declares; no result may show a planted string.
        """
        self.add(family, inputs=1, escapes=len(result.escapes))
        problems: list[str] = []
        if not isinstance(result, ToolResult):
            problems.append(f"not a ToolResult: {type(result).__name__}")
        elif result.outcome is not Outcome.OK:
            names = set(declared)
            if not set(result.params) <= names:
                problems.append(f"undeclared parameter names shown: {result.params!r}")
            allowed = {
                model_sentence(result.outcome, result.params, undeclared=flag)
                for flag in (False, True)
            }
            if result.content not in allowed:
                problems.append(f"not a fixed sentence: {result.content[:200]!r}")
        for mark in (SECRET_MARK, "Traceback", *planted):
            if mark and mark in result.content:
                problems.append(f"planted text shown to the model: {mark[:40]!r}")
        if problems:
            self.add(family, leaks=1)
        return problems

    def dump(self) -> str:
        """The counts and maxima as JSON, for another process's ``load``."""
        return json.dumps({"families": self.families, "maxima": self.maxima})

    def load(self, dumped: str) -> None:
        """Add the counts, and keep the maxima, of another process's ``dump``."""
        data = json.loads(dumped)
        for family, counts in data["families"].items():
            self.add(family, **counts)
        for family, maxima in data["maxima"].items():
            for key, value in maxima.items():
                self.note(family, key, value)

    def summary(self) -> dict[str, dict[str, float]]:
        total: Counter[str] = Counter()
        out: dict[str, dict[str, float]] = {}
        for family in sorted(self.families):
            counts = self.families[family]
            row = {key: counts[key] for key in FIELDS}
            total.update(row)
            out[family] = {**row, **counts, **self.maxima.get(family, {})}
        out["total"] = {key: total[key] for key in FIELDS}
        return out


_LEDGER = Ledger()


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Count exceptions other than failed assertions that reached a test: escapes of the library."""
    excinfo = call.excinfo
    if call.when != "call" or excinfo is None:
        return
    if not excinfo.errisinstance((AssertionError, pytest.skip.Exception)):
        module = getattr(item, "module", None)
        name = getattr(module, "__name__", "?").rsplit(".", 1)[-1]
        _LEDGER.add(f"unexpected:{name}", raised=1)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:
        # A pytest-xdist worker: its counts go to the controller, which writes the totals.
        worker_output["reliability_ledger"] = _LEDGER.dump()
        return
    target = os.environ.get("GUARDRAILS_RELIABILITY_REPORT")
    if target and _LEDGER.families:
        Path(target).write_text(json.dumps(_LEDGER.summary(), indent=2) + "\n")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller: add up the counts of a worker that finished."""
    dumped = getattr(node, "workeroutput", {}).get("reliability_ledger")
    if dumped:
        _LEDGER.load(dumped)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown so that threads left hanging by a fault can finish."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture(scope="session")
def ledger() -> Ledger:
    return _LEDGER


def fixed_sentences() -> frozenset[str]:
    """The sentences a non-ok outcome may show when no parameter is named."""
    return frozenset(
        model_sentence(o, undeclared=u)
        for o in Outcome
        if o is not Outcome.OK
        for u in ((False, True) if o is Outcome.INVALID_ARGS else (False,))
    )


@pytest.fixture(scope="session")
def sentences() -> frozenset[str]:
    return fixed_sentences()
