"""Fixtures for the observability tests: a fresh registry, an in-memory span exporter, promtool."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def scrape(registry: CollectorRegistry) -> Callable[[], str]:
    """The registry's text exposition, as Prometheus would scrape it."""
    return lambda: generate_latest(registry).decode()


@pytest.fixture
def promtool_path() -> str:
    """The promtool binary; skipped locally when absent, a failure when it is required."""
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("GUARDRAILS_REQUIRE_PROMTOOL") == "1":
            pytest.fail("promtool is required (GUARDRAILS_REQUIRE_PROMTOOL=1) but not installed")
        pytest.skip("promtool is not installed (Debian package prometheus)")
    return path


@pytest.fixture
def promtool(promtool_path: str) -> Callable[[str], None]:
    """``promtool check metrics`` on an exposition."""

    def check(text: str) -> None:
        done = subprocess.run(
            [promtool_path, "check", "metrics"],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    return check
