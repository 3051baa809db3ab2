"""``.ci/run`` stops nothing it did not start."""

from __future__ import annotations

import re
from pathlib import Path

CI = Path(__file__).resolve().parents[2] / ".ci" / "run"


def test_ci_stops_no_process_by_name_and_no_service() -> None:
    text = CI.read_text()
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert not re.search(r"\b(pkill|killall)\b", code)
    assert not re.search(r"\bservice\s+\S+\s+stop\b|\bsystemctl\s+stop\b", code)


def test_ci_keeps_package_services_from_starting_at_install() -> None:
    text = CI.read_text()
    assert "policy-rc.d" in text and "exit 101" in text
