"""The shape of the source: no function in ``guardrails/`` runs past 60 lines.

A function is counted from its ``def`` line to its last line (docstring,
comments and blank lines included, decorators not). A long one is split
into named steps rather than added to an allow-list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from textwrap import indent

PACKAGE = Path(__file__).resolve().parents[1] / "guardrails"
MAX_LINES = 60


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int, int]]:
    """``(qualified name, first line, line count)`` of every function, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            yield prefix + node.name, node.lineno, end - node.lineno + 1
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def long_functions(root: Path, limit: int) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name, line, count in functions(tree):
            if count > limit:
                found.append(f"{path.relative_to(root.parent)}:{line} {name}: {count} lines")
    return found


def test_no_function_in_the_package_is_over_60_lines() -> None:
    found = long_functions(PACKAGE, MAX_LINES)
    assert not found, f"functions over {MAX_LINES} lines:\n" + "\n".join(found)


def test_the_count_runs_from_the_def_line_to_the_last_and_sees_nested_functions(
    tmp_path: Path,
) -> None:
    lines = [f"x{i} = {i}" for i in range(59)]
    body = "\n".join(indent(line, " " * 4) for line in lines)
    deeper = "\n".join(indent(line, " " * 8) for line in lines)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        f"@decorated\ndef fits():\n{body}\n\n"
        f"class C:\n    def method(self):\n{deeper}\n        return 1\n\n"
        f"def outer():\n    def inner():\n{deeper}\n{deeper}\n"
    )
    found = long_functions(tmp_path / "pkg", 60)
    assert [f.split(" ", 1)[1] for f in found] == [
        "C.method: 61 lines",
        "outer: 120 lines",
        "outer.inner: 119 lines",
    ]
