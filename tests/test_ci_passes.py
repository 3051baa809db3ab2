"""CI runs every test: the README's command and CI's full pass together select all markers.

The README's command (``python -m pytest``) takes ``-m`` from the options in
pyproject.toml; ``.ci/run`` runs it and then the full pass (``-m "slow or fuzz"``).
Whatever markers a test carries, one of the two selects it. And a property test's
own count of examples goes through ``tests._examples.examples`` (CI's count in CI,
a fifth locally), unless the test counts what its examples reach (``# every run``).
"""

from __future__ import annotations

import itertools
import re
import shlex
import tomllib
from pathlib import Path

from _pytest.mark.expression import Expression

ROOT = Path(__file__).parents[1]


def _readme_expression() -> str:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    addopts = options["ini_options"]["addopts"]
    return str(addopts[addopts.index("-m") + 1])


def _ci_expressions() -> list[str]:
    """The ``-m`` of each ``python -m pytest`` line of .ci/run run on the whole suite."""
    found = []
    for line in (ROOT / ".ci" / "run").read_text().splitlines():
        if "-m pytest" not in line or line.lstrip().startswith("#"):
            continue
        words = shlex.split(line.rstrip().removesuffix("\\"), comments=True)
        words = words[words.index("pytest") + 1 :]
        if any(word.startswith("tests/") for word in words):
            continue  # a pass over a few files
        found.append(words[words.index("-m") + 1] if "-m" in words else _readme_expression())
    return found


def _markers() -> list[str]:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    return [line.split(":")[0] for line in options["ini_options"]["markers"]]


def test_ci_runs_the_readme_command_and_a_full_pass() -> None:
    expressions = _ci_expressions()
    assert _readme_expression() in expressions and len(expressions) >= 2, expressions


def test_every_combination_of_markers_is_selected_by_one_of_cis_passes() -> None:
    compiled = [Expression.compile(text) for text in _ci_expressions()]
    markers = _markers()
    for count in range(len(markers) + 1):
        for carried in itertools.combinations(markers, count):
            carries = set(carried).__contains__
            assert any(expression.evaluate(carries) for expression in compiled), (
                f"a test marked {sorted(carried)} runs in none of CI's passes"
            )


DECORATED_COUNT = re.compile(r"@settings\((?:[^()]|\([^()]*\))*?max_examples=\d[^\n]*(?:\n[^\n]*)?")


def test_explicit_example_counts_shrink_locally_or_say_why_not() -> None:
    literal = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for found in DECORATED_COUNT.finditer(path.read_text()):
            if "# every run" not in found.group(0):
                literal.append(f"{path.relative_to(ROOT)}: {found.group(0).splitlines()[0]}")
    assert literal == [], "write max_examples=examples(N) (tests/_examples.py)"
