"""A real Prometheus server scrapes a guarded workload: one escape after clean scrapes is seen.

The server (Debian's ``prometheus``) is started by the test on a free port with
its own data directory, scrapes an exposition this test serves on 127.0.0.1,
and is stopped by the test. Mandatory where ``GUARDRAILS_REQUIRE_PROMTOOL=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from guardrails import Guardrails, NotConfigured, Verdict, guard, tool
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.rules.required_action import required_action

# A real Prometheus server scrapes for tens of seconds: CI's full pass runs these.
pytestmark = pytest.mark.slow

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "guardrails-coverage.json"
ESCAPE_PANEL = "Fail-open escapes, observe mode aside (range)"
VARIABLES = {
    "$__rate_interval": "1m",
    "$__range_s": "3600",  # before $__range, which is its prefix
    "$__range": "1h",
    "$guard": ".*",
    "$choke_point": ".*",
}
ESCAPES = 'guardrails_fail_open_escapes_total{guard="region_rules",reason="not_configured"}'
DEADLINE = 90.0  # seconds for the server to be ready or to have scraped what we wait for


@pytest.fixture
def prometheus_bin() -> str:
    path = shutil.which("prometheus")
    if path is None:
        if os.environ.get("GUARDRAILS_REQUIRE_PROMTOOL") == "1":
            pytest.fail("prometheus is required (GUARDRAILS_REQUIRE_PROMTOOL=1) but not installed")
        pytest.skip("prometheus is not installed (Debian package prometheus)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], bool]) -> None:
    """Poll ``check`` until it holds; fail with ``what`` at the deadline."""
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"Prometheus did not {what} within {DEADLINE:.0f} s")
        time.sleep(0.2)


class Server:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def ready(self) -> bool:
        try:
            with urlopen(f"{self.base}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        with urlopen(f"{self.base}/api/v1/query?{urlencode({'query': expr})}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None


RULES = DASHBOARD.with_name("guardrails-rules.yml")
# The shipped rules with their 10-minute window cut to 10 seconds, so that an
# escape becomes "old" within the test.
WINDOW = {"[10m]": "[10s]", "time() - 600": "time() - 10"}


class Outage(Collector):
    """Makes the next scrape fail (a 500): Prometheus records a staleness marker."""

    def __init__(self) -> None:
        self.armed = threading.Event()

    def collect(self) -> Iterator[Metric]:
        if self.armed.is_set():
            self.armed.clear()
            raise RuntimeError("one failed scrape")
        return iter(())


@pytest.fixture
def outage() -> Outage:
    return Outage()


@pytest.fixture
def workload(outage: Outage) -> Iterator[tuple[Guardrails, str]]:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    @tool
    def risky(key: str) -> str:
        """Guarded by a fail-closed guard that raises."""
        return key

    @guard(fail_closed=True, tools=["risky"])
    def strict(call: Any) -> Verdict:
        raise RuntimeError("cannot decide")

    @guard
    def region_rules(call: Any) -> Verdict:
        if call.context.tenant is None:
            raise NotConfigured("no region for this tenant")
        return Verdict.PASS

    @tool
    def notify(reason: str) -> str:
        """Page a human."""
        return reason

    @tool
    def unused(key: str) -> str:
        """Never called."""
        return key

    @guard(observe=True, tools=["lookup"])
    def shadow(call: Any) -> Verdict:
        return Verdict.REJECT

    @guard(tools=["unused"])
    def idle(call: Any) -> Verdict:
        return Verdict.PASS

    page = required_action("notify", when=lambda run: True, arguments={"reason": "promised"})
    registry = CollectorRegistry()
    metrics = PrometheusRecorder(registry)
    rails = Guardrails(
        [lookup, notify, unused, risky],
        [region_rules, shadow, idle, page, strict],
        recorder=metrics,
    )
    metrics.bind(rails)
    registry.register(outage)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    yield rails, f"127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def prometheus(prometheus_bin: str, workload: Any, tmp_path: Path) -> Iterator[Server]:
    _, target = workload
    config = tmp_path / "prometheus.yml"
    rules = RULES.read_text()
    for window, short in WINDOW.items():
        rules = rules.replace(window, short)
    (tmp_path / "rules.yml").write_text(rules)
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(tmp_path / "rules.yml")],
                "scrape_configs": [
                    {"job_name": "agent", "static_configs": [{"targets": [target]}]}
                ],
            }
        )
    )
    log = (tmp_path / "prometheus.log").open("w")
    process = server = None
    try:
        for attempt in range(3):  # another process may take the free port first
            port = free_port()
            process = subprocess.Popen(
                [
                    prometheus_bin,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / f'data{attempt}'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            server = Server(port)
            wait_for("become ready", partial(_up_or_gone, server, process))
            if process.poll() is None:
                break
        assert process is not None and server is not None and process.poll() is None, (
            tmp_path / "prometheus.log"
        ).read_text()[-2000:]
        yield server
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


def _up_or_gone(server: Server, process: subprocess.Popen[bytes]) -> bool:
    return server.ready() or process.poll() is not None


def panel_expr(title: str) -> str:
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        if panel["title"] == title:
            expr: str = panel["targets"][0]["expr"]
            for variable, value in VARIABLES.items():
                expr = expr.replace(variable, value)
            return expr
    raise AssertionError(f"no panel {title!r}")


def test_a_single_escape_after_clean_scrapes_shows_on_the_escape_panel(
    workload: tuple[Guardrails, str], prometheus: Server
) -> None:
    rails, _ = workload
    clean = rails.turn(tenant="acme")
    scrapes = f"count_over_time({ESCAPES}[1h])"

    def clean_scrapes() -> bool:
        clean.call("lookup", {"key": "k"})
        return (prometheus.value(scrapes) or 0) >= 5

    wait_for("scrape the escape series at zero five times", clean_scrapes)
    assert prometheus.value(panel_expr(ESCAPE_PANEL)) == 0

    rails.turn().call("lookup", {"key": "k"})  # no tenant: one escape

    wait_for("scrape the escape", lambda: prometheus.value(f"max_over_time({ESCAPES}[1h])") == 1)
    seen = prometheus.value(panel_expr(ESCAPE_PANEL))
    assert seen is not None and round(seen) == 1


def test_every_dashboard_query_runs_on_the_server(
    workload: tuple[Guardrails, str], prometheus: Server
) -> None:
    rails, _ = workload
    scrapes = f"count_over_time({ESCAPES}[1h])"
    wait_for("scrape the series at zero", lambda: (prometheus.value(scrapes) or 0) >= 2)
    turn = rails.turn(tenant="acme")
    turn.call("lookup", {"key": "k"})
    turn.post_run("done")  # the backstop calls notify
    rails.turn().call("lookup", {"key": "k"})  # an escape
    turn.call("risky", {"key": "k"})  # a fault
    seen = prometheus.value(scrapes) or 0
    wait_for("scrape the workload twice", lambda: (prometheus.value(scrapes) or 0) >= seen + 2)
    empty = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in VARIABLES.items():
                expr = expr.replace(variable, value)
            if not prometheus.query(expr):  # asserts status success
                empty.append(panel["title"])
    assert empty == []  # every panel has something to show for this workload


FIRING = 'ALERTS{alertname="GuardrailsFailOpenEscape",alertstate="firing",guard="region_rules"}'


def test_a_failed_scrape_does_not_page_again_for_an_old_escape(
    workload: tuple[Guardrails, str], prometheus: Server, outage: Outage
) -> None:
    rails, _ = workload
    scrapes = f"count_over_time({ESCAPES}[1h])"
    wait_for("scrape the series at zero", lambda: (prometheus.value(scrapes) or 0) >= 3)
    rails.turn().call("lookup", {"key": "k"})  # no tenant: one escape
    wait_for("page for the escape", lambda: bool(prometheus.query(FIRING)))
    wait_for(
        "resolve once the escape is older than the window", lambda: not prometheus.query(FIRING)
    )
    outage.armed.set()
    up = 'min_over_time(up{job="agent"}[1m])'
    wait_for("record the failed scrape", lambda: prometheus.value(up) == 0)
    gap = time.monotonic()
    seen = prometheus.value(scrapes) or 0
    # Longer than the window after the gap: the old rule's `x unless x offset
    # 10m` fired here, once the sample a window back was the staleness marker.
    twelve = lambda: (prometheus.value(scrapes) or 0) >= seen + 12  # noqa: E731
    wait_for("scrape twelve times after the gap", twelve)
    since = int(time.monotonic() - gap)
    assert prometheus.query(f"max_over_time({FIRING}[{since}s])") == []
