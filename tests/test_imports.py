"""No module of ``guardrails`` reaches itself through its imports.

The import graph is read from the source with ``ast``. What counts as an edge:

- every ``import`` and ``from ... import``, wherever it is: at module level,
  inside functions (a lazy import is still a circle) and under
  ``TYPE_CHECKING`` (two modules that name each other's types are one tangle
  to read, even when only the type checker follows the import);
- ``from package import name`` is an edge to ``package.name`` when that is a
  module (compiled ones included), to ``package`` otherwise;
- importing ``a.b.c`` also runs the ``__init__`` of ``a.b``: an edge to it,
  unless that package encloses the importing module (its ``__init__`` has
  already run by then, so a submodule importing a sibling does not loop
  through the package that re-exports it).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import guardrails

ROOT = Path(guardrails.__file__).parent


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = (root.name, *path.relative_to(root).parts)
    parts = (*parts[:-1], parts[-1].split(".")[0])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, package: str, modules: set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            yield sub if sub in modules else base


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    sources = {module_name(p, root): p for p in root.rglob("*.py")}
    compiled = {module_name(p, root) for p in [*root.rglob("*.pyi"), *root.rglob("*.so")]}
    modules = set(sources) | compiled
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in sources.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            for target in _imported(node, package, modules):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    candidate = ".".join(parts[:i])
                    enclosing = i < len(parts) and name.startswith(candidate + ".")
                    if candidate in modules and candidate != name and not enclosing:
                        graph[name].add(candidate)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (``a, b, ..., a``) through each tangle of modules that reach each other."""
    found: list[list[str]] = []
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        tangle = {m for m in reachable(graph, start) if start in reachable(graph, m)}
        done |= tangle | {start}
        if start in tangle:
            found.append(_path_back(graph, start))
    return found


def _path_back(graph: dict[str, set[str]], start: str) -> list[str]:
    """The shortest import path from ``start`` back to ``start``."""
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if nxt not in came:
                    came[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is not on a circle")


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = list(graph[start])
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(graph.get(node, ()))
    return seen


def test_the_import_graph_is_read_from_every_kind_of_import() -> None:
    graph = import_graph()
    assert "guardrails.middleware.tool_call" in graph["guardrails.engine"]
    assert "guardrails.middleware.pre_turn" in graph["guardrails.engine"]
    # Imports under TYPE_CHECKING are edges too.
    assert "guardrails.middleware._turn" in graph["guardrails.middleware.pre_turn"]


@pytest.mark.parametrize(
    "module",
    [
        "guardrails.engine",
        "guardrails.middleware.pre_turn",
        "guardrails.middleware.post_run",
        "guardrails.middleware.tool_call",
        "guardrails.middleware.admission",
    ],
)
def test_no_choke_point_reaches_back_to_the_engine(module: str) -> None:
    graph = import_graph()
    assert "guardrails.engine" not in reachable(graph, module)


@pytest.mark.parametrize(
    "module",
    ["guardrails.engine", "guardrails.middleware.tool_call", "guardrails.middleware.admission"],
)
def test_no_import_cycle_runs_through_the_engine_or_the_tool_call_pipeline(module: str) -> None:
    assert module not in reachable(import_graph(), module)


@pytest.mark.parametrize(
    "module",
    ["guardrails.middleware.pre_turn", "guardrails.middleware.post_run", "guardrails.engine"],
)
def test_each_module_imports_first_in_a_fresh_interpreter(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_module_reaches_itself_through_its_imports() -> None:
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize(
    "b_imports_a",
    [
        "from . import a\n",
        "def f():\n    from .a import X\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n",
        "import pkg.a\n",
    ],
)
def test_a_circle_is_found_whatever_kind_of_import_closes_it(
    tmp_path: Path, b_imports_a: str
) -> None:
    root = _package(tmp_path, {"a.py": "from .b import Y\n", "b.py": b_imports_a})
    assert circles(import_graph(root)) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_a_circle_through_a_package_that_re_exports_is_found(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "low/__init__.py": "from .x import X\nfrom .y import Y\n",
            "low/x.py": "X = 1\n",
            "low/y.py": "from ..top import T\nY = 2\n",
            "top.py": "from .low.x import X\nT = 3\n",
        },
    )
    assert circles(import_graph(root)) == [["pkg.low", "pkg.low.y", "pkg.top", "pkg.low"]]


def test_siblings_do_not_loop_through_their_own_package(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "low/__init__.py": "from .x import X\nfrom .y import Y\n",
            "low/x.py": "X = 1\n",
            "low/y.py": "from .x import X\nfrom . import x\nY = 2\n",
        },
    )
    assert circles(import_graph(root)) == []
    assert import_graph(root)["pkg.low.y"] == {"pkg.low.x"}


# The layers of ``guardrails`` (drawn in ``guardrails/AGENTS.md``): arrows point down.
FOUNDATION = {
    "guardrails.verdicts",
    "guardrails.errors",
    "guardrails.context",
    "guardrails._version",
}
ROOMS_BELOW_THE_ENGINE = ("guardrails.observe", "guardrails.text", "guardrails.native")
ABOVE_THE_ROOMS = (
    "guardrails.engine",
    "guardrails.integrations",
    "guardrails.gateway",
    "guardrails.cli",
)
# The old paths of moved public modules, kept as small re-export modules.
SHIMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "guardrails.confusables": (
        "guardrails.text.confusables",
        (
            "MARK",
            "FoldData",
            "data",
            "disguises",
            "fold",
            "fold_words",
            "has_lookalikes",
            "is_mixed_script",
            "lookalike_words",
            "match_key",
        ),
    ),
    "guardrails.metrics": (
        "guardrails.observe.metrics",
        (
            "APPROVAL_DECISION_TIME",
            "APPROVAL_EVENTS",
            "APPROVAL_EVENT_VALUES",
            "APPROVAL_OLDEST_PENDING",
            "BACKSTOP_ACTIONS",
            "CHOKE_POINT",
            "DECISION_BUCKETS",
            "DURATION_BUCKETS",
            "ENFORCE",
            "EVENT",
            "EXPORTED",
            "FAIL_CLOSED_FAULTS",
            "FAIL_OPEN_ESCAPES",
            "FAULT_REASONS",
            "GUARD",
            "GUARD_DURATION",
            "GUARD_EVALUATIONS",
            "GUARD_REGISTERED",
            "HELP",
            "LAST_ESCAPE",
            "LAST_FAULT",
            "MODE",
            "MODES",
            "OBSERVE",
            "OUTCOME",
            "POLICY_REVISION",
            "REASON",
            "RECORDER",
            "RULE",
            "TELEMETRY_FAILURES",
            "TOOL",
            "TOOL_CALL_DURATION",
            "TOOL_CALL_GUARD_TIME",
            "TOOL_OUTCOMES",
            "UNKNOWN",
            "UNKNOWN_TOOL",
            "VERDICT",
            "PrometheusRecorder",
            "multiprocess_registry",
            "registered_guards",
        ),
    ),
    "guardrails.telemetry": (
        "guardrails.observe.telemetry",
        (
            "ATTR_APPROVAL_REQUEST",
            "ATTR_APPROVAL_WAITED",
            "ATTR_CHOKE_POINT",
            "ATTR_ENFORCED",
            "ATTR_EXCEPTION_TYPE",
            "ATTR_GUARD",
            "ATTR_OUTCOME",
            "ATTR_REASON",
            "ATTR_REFUSED",
            "ATTR_REVISION",
            "ATTR_RULE",
            "ATTR_SECRET_REDACTED",
            "ATTR_TRUNCATED",
            "ATTR_VERDICT",
            "ERROR_TYPE",
            "EVENT_APPROVAL_DENIED",
            "EVENT_APPROVAL_EXPIRED",
            "EVENT_APPROVAL_GRANTED",
            "EVENT_APPROVAL_REQUESTED",
            "EVENT_ESCAPE",
            "EVENT_FAULT",
            "EVENT_VERDICT",
            "EXECUTE_TOOL",
            "GEN_AI_EVALUATION_NAME",
            "GEN_AI_EVALUATION_SCORE_LABEL",
            "GEN_AI_OPERATION_NAME",
            "GEN_AI_TOOL_CALL_ID",
            "GEN_AI_TOOL_DESCRIPTION",
            "GEN_AI_TOOL_NAME",
            "GEN_AI_TOOL_TYPE",
            "MAX_CALL_ID",
            "SPAN_BACKSTOP",
            "SPAN_POST_RUN",
            "SPAN_PRE_TURN",
            "OpenTelemetryRecorder",
            "ToolSpans",
        ),
    ),
    "guardrails.recorder": (
        "guardrails.observe.recorder",
        (
            "Recorder",
            "Recorders",
            "safe_record",
            "combine_recorders",
            "log_failure",
            "asafe_record",
        ),
    ),
    "guardrails.coverage": (
        "guardrails.observe.coverage",
        (
            "CoverageError",
            "CoverageReport",
            "GuardCoverage",
            "add_arguments",
            "from_audit",
            "from_exposition",
            "load",
            "load_audit",
            "main",
            "read_source",
        ),
    ),
    "guardrails.demo": ("guardrails.cli.demo", ("SCENES", "Bank", "Scene", "build", "main", "run")),
    "guardrails.audit": ("guardrails.observe._audit_json", ("decode_escapes", "decode_verdicts")),
    "guardrails.effects": ("guardrails._call_state", ("CallState", "current")),
    "guardrails.rules.effects": (
        "guardrails.middleware._evidence",
        ("Change", "Perform", "Restrict", "Rewrite"),
    ),
    "guardrails.rules": (
        "guardrails.middleware._evidence",
        ("Change", "Perform", "Restrict", "Rewrite"),
    ),
}
# The modules that may import ``guardrails.cli``: its own, ``python -m guardrails`` and
# the re-export modules at its old paths.
CLI_IMPORTERS = {
    "guardrails.__main__",
    *(old for old, (new, _) in SHIMS.items() if new.startswith("guardrails.cli.")),
}


def _in(module: str, packages: tuple[str, ...] | set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _edges(graph: dict[str, set[str]]) -> Iterator[tuple[str, str]]:
    for source, targets in sorted(graph.items()):
        yield from ((source, target) for target in sorted(targets))


def test_the_foundation_imports_nothing_above_it() -> None:
    wrong = [
        f"{a} -> {b}"
        for a, b in _edges(import_graph())
        if a in FOUNDATION and b not in FOUNDATION and b != "guardrails"
    ]
    assert not wrong, wrong


def test_middleware_never_imports_the_engine() -> None:
    wrong = [
        f"{a} -> {b}"
        for a, b in _edges(import_graph())
        if _in(a, ("guardrails.middleware",)) and _in(b, ("guardrails.engine",))
    ]
    assert not wrong, wrong


def test_the_command_line_is_imported_by_nothing() -> None:
    wrong = [
        f"{a} -> {b}"
        for a, b in _edges(import_graph())
        if _in(b, ("guardrails.cli",)) and not _in(a, ("guardrails.cli",))
        if a not in CLI_IMPORTERS
    ]
    assert not wrong, wrong


def test_the_rooms_below_the_engine_do_not_import_it_nor_what_sits_on_it() -> None:
    wrong = [
        f"{a} -> {b}"
        for a, b in _edges(import_graph())
        if _in(a, ROOMS_BELOW_THE_ENGINE) and _in(b, ABOVE_THE_ROOMS)
    ]
    assert not wrong, wrong


def test_text_and_the_compiled_core_do_not_import_the_rooms_above_them() -> None:
    above = ("guardrails.observe", "guardrails.middleware", "guardrails.rules", "guardrails.policy")
    wrong = [
        f"{a} -> {b}"
        for a, b in _edges(import_graph())
        if _in(a, ("guardrails.text", "guardrails.native")) and _in(b, (*above, *ABOVE_THE_ROOMS))
    ]
    native_up = [
        f"{a} -> {b}"
        for a, b in _edges(import_graph())
        if _in(a, ("guardrails.native",)) and _in(b, ("guardrails.text",))
    ]
    assert not wrong + native_up, wrong + native_up


def test_the_compiled_core_imports_nothing_of_guardrails_but_the_extension() -> None:
    wrong = [
        f"{a} -> {b}"
        for a, b in _edges(import_graph())
        if _in(a, ("guardrails.native",))
        and not _in(b, ("guardrails.native", "guardrails._ccore"))
        and b != "guardrails"
    ]
    assert not wrong, wrong


@pytest.mark.parametrize("old", sorted(SHIMS))
def test_an_old_public_path_re_exports_what_it_used_to(old: str) -> None:
    new, names = SHIMS[old]
    before, after = importlib.import_module(old), importlib.import_module(new)
    missing = [n for n in names if getattr(before, n, None) is not getattr(after, n)]
    assert not missing, f"{old} no longer re-exports {missing} from {new}"
