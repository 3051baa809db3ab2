"""Every Python block in the documentation runs."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    p for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")] if "```python" in p.read_text()
)
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
# A page about an optional package says so: <!-- needs: module -->
NEEDS = re.compile(r"<!-- needs: ([\w.]+) -->")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_python_blocks_run(page: Path) -> None:
    text = page.read_text()
    for module in NEEDS.findall(text):
        missing = importlib.util.find_spec(module.split(".")[0]) is None or (
            "." in module and importlib.util.find_spec(module) is None
        )
        if missing and os.environ.get("GUARDRAILS_REQUIRE_FRAMEWORKS") != "1":
            pytest.skip(f"{module} is not installed")
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for block in BLOCK.findall(text):
        exec(compile(block, str(page), "exec"), namespace)
