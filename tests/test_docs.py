"""Every Python block in the documentation runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    p for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")] if "```python" in p.read_text()
)
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_python_blocks_run(page: Path) -> None:
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for block in BLOCK.findall(page.read_text()):
        exec(compile(block, str(page), "exec"), namespace)
