"""No module of ``guardrails`` reaches itself, and its rooms import one way, down ``LAYERS``.

The graph is read from the source by ``scripts/import_graph.py`` (what counts
as an edge is in its docstring: lazy imports and imports under
``TYPE_CHECKING`` included), which also holds ``LAYERS`` and prints the
drawing kept in ``guardrails/AGENTS.md``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import guardrails

ROOT = Path(guardrails.__file__).parent
_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "import_graph.py"
_spec = importlib.util.spec_from_file_location("guardrails_import_graph", _SCRIPT)
assert _spec is not None and _spec.loader is not None
graphs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graphs)


@functools.cache
def _read_graph(root: Path) -> dict[str, frozenset[str]]:
    return {m: frozenset(targets) for m, targets in graphs.import_graph(root).items()}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """The module graph of the package at ``root``, read once per run (a fresh copy each call)."""
    return {m: set(targets) for m, targets in _read_graph(root).items()}


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
@pytest.mark.slow
def test_no_choke_point_reaches_back_to_the_engine(module: str) -> None:
    graph = import_graph()
    assert "guardrails.engine" not in reachable(graph, module)


@pytest.mark.parametrize(
    "module",
    ["guardrails.engine", "guardrails.middleware.tool_call", "guardrails.middleware.admission"],
)
@pytest.mark.slow
def test_no_import_cycle_runs_through_the_engine_or_the_tool_call_pipeline(module: str) -> None:
    assert module not in reachable(import_graph(), module)


@pytest.mark.parametrize(
    "module",
    ["guardrails.middleware.pre_turn", "guardrails.middleware.post_run", "guardrails.engine"],
)
@pytest.mark.slow
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


def _both_ways(edges: dict[tuple[str, str], list[tuple[str, str]]], a: str, b: str) -> str:
    made = [*edges[(a, b)], *edges[(b, a)]]
    return f"  {a} <-> {b}\n" + "\n".join(f"    {x} -> {y}" for x, y in made)


def test_no_two_rooms_import_each_other() -> None:
    graph = import_graph()
    found = graphs.two_way(graph)
    assert not found, (
        "rooms that import each other (move the names both use down into the lower room):\n"
        + "\n".join(_both_ways(graphs.room_edges(graph), a, b) for a, b in found)
    )


def test_every_room_has_one_layer_and_every_layer_names_a_room() -> None:
    rooms = set(graphs.room_graph(import_graph()))
    listed = [room for layer in graphs.LAYERS for room in layer]
    twice = sorted({r for r in listed if listed.count(r) > 1})
    assert not twice, f"rooms in more than one layer of LAYERS: {twice}"
    assert not rooms - set(listed), (
        f"rooms in no layer: {sorted(rooms - set(listed))}; add each to LAYERS in "
        "scripts/import_graph.py, above every room it imports"
    )
    assert not set(listed) - rooms, (
        f"LAYERS names rooms that are gone: {sorted(set(listed) - rooms)}"
    )


def test_every_import_between_rooms_points_down_the_layers() -> None:
    graph = import_graph()
    depth, edges = graphs.layer_of(), graphs.room_edges(graph)
    wrong = [
        f"  {a} (layer {depth[a]}) -> {b} (layer {depth[b]}): "
        + ", ".join(f"{x} -> {y}" for x, y in edges[(a, b)])
        for a, b in graphs.upward(graph)
    ]
    assert not wrong, (
        "imports that do not point down LAYERS (scripts/import_graph.py), top is layer 1:\n"
        + "\n".join(wrong)
    )


@pytest.mark.parametrize(
    "low_imports_top",
    [
        "def f():\n    from ..top import T\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top import T\n",
        "import pkg.top\n",
        "from .. import top\n",
    ],
)
def test_two_rooms_importing_each_other_are_found_without_a_circle_of_modules(
    tmp_path: Path, low_imports_top: str
) -> None:
    root = _package(
        tmp_path,
        {"low/__init__.py": "", "low/x.py": low_imports_top, "low/y.py": "Y = 1\n"},
    )
    (root / "top.py").write_text("from .low.y import Y\nT = 2\n")
    graph = import_graph(root)
    assert circles(graph) == []
    assert graphs.two_way(graph) == [("low", "top")]
    assert graphs.upward(graph, [["top"], ["low"]]) == [("low", "top")]


def test_rooms_of_one_layer_may_not_import_each_other(tmp_path: Path) -> None:
    root = _package(
        tmp_path, {"a.py": "from . import b\n", "b.py": "", "c.py": "from . import a\n"}
    )
    graph = import_graph(root)
    assert graphs.upward(graph, [["c"], ["a", "b"]]) == [("a", "b")]
    assert graphs.upward(graph, [["c"], ["a"], ["b"]]) == []
    assert graphs.upward(graph, [["a"], ["b"], ["c"]]) == [("c", "a")]


_MARK = "<!-- python scripts/import_graph.py -->"


def test_the_drawing_in_agents_md_is_what_the_script_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (ROOT / "AGENTS.md").read_text()
    found = re.search(re.escape(_MARK) + r"\n```\n(.*?)```\n", text, re.S)
    assert found, f"guardrails/AGENTS.md has no ``` block right after {_MARK}"
    assert graphs.main([]) == 0
    printed = capsys.readouterr().out
    assert found.group(1) == printed, (
        "guardrails/AGENTS.md draws an old graph: paste what python scripts/import_graph.py prints"
    )


def test_the_dot_drawing_has_every_room_edge_and_one_rank_per_layer() -> None:
    graph = import_graph()
    drawn = graphs.dot(graph)
    edges = set(re.findall(r'^  "(\w+)" -> "(\w+)";$', drawn, re.M))
    assert edges == set(graphs.room_edges(graph))
    assert drawn.count("rank=same") == len(graphs.LAYERS)


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


@pytest.mark.slow
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


@pytest.mark.slow
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
