"""What a policy file may hold: each bound at the bound and one past it, and hostile files."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from guardrails.cli import main
from guardrails.errors import ConfigurationError
from guardrails.policy import Param, PolicyError, load, loads
from guardrails.policy._toml_shape import first_excess
from guardrails.policy.loader import (
    MAX_BYTES,
    MAX_ITEMS,
    MAX_KEY_PARTS,
    MAX_NESTING,
    MAX_RULES,
    MAX_TABLES,
    MAX_TOOLS,
)
from guardrails.policy.rules import MAX_PATH_PARTS
from tests._examples import examples

RULE = "[tools.pay.params.iban]\nkind = 'iban'\n"


def _padded(size: int) -> str:
    """A valid policy of exactly ``size`` bytes (a comment fills it)."""
    return RULE + "#" + "x" * (size - len(RULE) - 2) + "\n"


def _problem(text: str) -> str:
    with pytest.raises(PolicyError) as info:
        loads(text, origin="p.toml")
    assert "\n" not in str(info.value)
    return info.value.problem


def test_file_size_at_the_bound_and_one_past_it(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(_padded(MAX_BYTES))
    assert len(load(path).params) == 1
    assert len(loads(_padded(MAX_BYTES)).params) == 1
    path.write_text(_padded(MAX_BYTES + 1))
    with pytest.raises(PolicyError, match=r"\[file\]: is larger than 262,144 bytes"):
        load(path)
    assert _problem(_padded(MAX_BYTES + 1)) == "is larger than 262,144 bytes"
    # Characters outside ASCII count in bytes of UTF-8.
    assert _problem(RULE + "#" + "é" * (MAX_BYTES // 2)) == "is larger than 262,144 bytes"


def test_a_huge_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    with path.open("wb") as fh:
        fh.truncate(20 * 1024 * 1024)  # 20 MB (sparse): only the bound plus one is read
    with pytest.raises(PolicyError, match="is larger than"):
        load(path)


def _nested(depth: int) -> str:
    return f"{RULE}values = " + "[" * depth + "]" * depth + "\n"


def test_nesting_at_the_bound_and_one_past_it() -> None:
    # At the bound the text is parsed (and refused for what it holds, not its depth).
    assert "deep" not in _problem(_nested(MAX_NESTING))
    assert (
        _problem(_nested(MAX_NESTING + 1))
        == "line 3 nests inline arrays or tables more than 16 deep"
    )
    tables = "x = " + "{a = " * (MAX_NESTING + 1) + "1" + "}" * (MAX_NESTING + 1) + "\n"
    assert "more than 16 deep" in _problem(tables)


@pytest.mark.parametrize("depth", [1_000, 40_000])
def test_deep_nesting_is_one_policy_error_not_a_recursion_error(depth: int) -> None:
    assert "more than 16 deep" in _problem(_nested(depth))
    assert "more than 16 deep" in _problem("x = " + "{a = " * depth + "1" + "}" * depth)


def test_key_parts_at_the_bound_and_one_past_it() -> None:
    at = "[tools.pay.params.iban" + ".k" * (MAX_KEY_PARTS - 4) + "]\n"
    past = "[tools.pay.params.iban" + ".k" * (MAX_KEY_PARTS - 3) + "]\n"
    assert "parts" not in _problem(at)
    assert _problem(past) == "line 1 has a dotted key or table header of more than 8 parts"
    dotted = RULE + "a" + ".b" * MAX_KEY_PARTS + " = 1\n"
    assert _problem(dotted) == "line 3 has a dotted key or table header of more than 8 parts"
    assert "parts" not in _problem(RULE + "a" + ".b" * (MAX_KEY_PARTS - 1) + " = 1\n")


def test_a_100000_part_dotted_key_is_refused_before_it_is_parsed() -> None:
    assert "more than 8 parts" in _problem("[tools]\n" + ".".join(["a"] * 100_000) + " = 1\n")


def test_table_headers_at_the_bound_and_one_past_it() -> None:
    headers = "".join(f"[tools.t{i}]\n" for i in range(MAX_TABLES - 2))
    assert "headers" not in _problem("[policy]\n" + headers + "[x]\n")
    past = "[policy]\n" + headers + "[x]\n[y]\n"
    assert _problem(past) == f"line {MAX_TABLES + 1} has more than 4,096 table headers"


def test_tools_at_the_bound_and_one_past_it() -> None:
    tools = "".join(f"[tools.t{i}]\nmax_per_turn = 1\n" for i in range(MAX_TOOLS))
    assert len(loads(tools).ceilings) == MAX_TOOLS
    assert _problem(tools + "[tools.extra]\nmax_per_turn = 1\n") == "has 1,001 tools; at most 1,000"


def test_rules_at_the_bound_and_one_past_it() -> None:
    rules = "".join(f"[tools.t.params.p{i}]\nkind = 'email'\n" for i in range(MAX_RULES))
    assert len(loads(rules).params) == MAX_RULES
    extra = rules + "[tools.u.params.q]\nkind = 'email'\n"
    assert _problem(extra) == "more than 1,000 parameter rules in one file"


@pytest.mark.parametrize(
    ("key", "item"), [("values", "1"), ("deny_values", "'a'"), ("grounded_in", "'user'")]
)
def test_list_lengths_at_the_bound_and_one_past_it(key: str, item: str) -> None:
    def text(n: int) -> str:
        return f"[tools.pay.params.iban]\n{key} = [" + ", ".join([item] * n) + "]\n"

    assert len(loads(text(MAX_ITEMS)).params) == 1
    assert _problem(text(MAX_ITEMS + 1)) == "has 10,001 items; at most 10,000 are allowed"
    intents = "[tools.pay]\nintent = [" + ", ".join(f"'w{i}'" for i in range(MAX_ITEMS + 1)) + "]\n"
    assert "10,001 items" in _problem(intents)


def test_parameter_path_parts_at_the_bound_and_one_past_it() -> None:
    at = ".".join(["a"] * MAX_PATH_PARTS)
    past = ".".join(["a"] * (MAX_PATH_PARTS + 1))
    Param("pay", at, kind="text")
    with pytest.raises(ConfigurationError, match="path has more than 16 parts"):
        Param("pay", past, kind="text")
    assert len(loads(f'[tools.pay.params."{at}"]\nkind = "text"\n').params) == 1
    problem = _problem(f'[tools.pay.params."{past}"]\nkind = "text"\n')
    assert problem.endswith("has more than 16 parts")
    huge = _problem('[tools.pay.params."' + ".".join(["a"] * 100_000) + '"]\nkind = "text"\n')
    assert len(huge) < 200  # the path is shown shortened


def test_an_error_shows_a_long_value_shortened() -> None:
    problem = _problem("[policy]\nfail_closed = '" + "x" * 100_000 + "'\n")
    assert problem.startswith("must be a boolean, not 'xxx") and len(problem) < 120


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(_nested(5_000), id="deep-arrays"),
        pytest.param("x = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n", id="deep-tables"),
        pytest.param(
            "[tools.pay.params.iban]\npattern = '" + "(" * 50_000 + ")" * 50_000 + "'\n",
            id="100000-groups",
        ),
    ],
)
def test_the_command_answers_a_hostile_file_with_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = tmp_path / "hostile.toml"
    path.write_text(text)
    assert main(["policy", "explain", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("guardrails policy explain: ")


def test_text_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(PolicyError, match="must be text"):
        loads(b"[policy]\n")  # type: ignore[arg-type]


# -- the shape scan against what it measures ------------------------------------------------
#
# Random TOML documents built from known parts: inline arrays and tables nested to a
# known depth, dotted keys of known length, and strings and comments that hold
# brackets, dots, quotes and ``#``. The scan must find exactly the documents that
# go past a bound, and ``tomllib`` must accept every one of them.

_NOISE = st.text(string.ascii_letters + "[]{}.=,#'\\ ", max_size=8)


def _basic(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _multiline(text: str) -> str:
    return '"""' + text.replace("\\", "\\\\").replace('"', '\\"') + '"""'


def _leaf(draw: Any) -> str:
    noise = draw(_NOISE)
    return str(draw(st.sampled_from([_basic(noise), _multiline(noise), "'lit.[x'", "1.5", "2"])))


def _value(draw: Any, depth: int) -> str:
    """A TOML value whose inline arrays and tables nest exactly ``depth`` deep: one
    child goes on down, its siblings are leaves."""
    if depth == 0:
        return _leaf(draw)
    items = [_value(draw, depth - 1), *(_leaf(draw) for _ in range(draw(st.integers(0, 2))))]
    items = draw(st.permutations(items))
    if draw(st.booleans()):
        sep = draw(st.sampled_from([", ", ",\n  # a comment with ] and {\n  "]))
        return "[" + sep.join(items) + "]"
    keys = [f"e{j}.{_key(draw, draw(st.integers(1, 3)))} = {v}" for j, v in enumerate(items)]
    return "{" + ", ".join(keys) + "}"


def _key(draw: Any, parts: int) -> str:
    """A dotted key of ``parts`` parts, bare and quoted (with dots inside the quotes)."""
    spelled = {"bare": "k{}", "basic": '"q.{}"', "literal": "'s.[{}'"}
    kinds = draw(st.lists(st.sampled_from(sorted(spelled)), min_size=parts, max_size=parts))
    return ".".join(spelled[kind].format(i) for i, kind in enumerate(kinds))


@st.composite
def _documents(draw: Any) -> tuple[str, int, int]:
    lines, deepest, longest = [], 0, 0
    for i in range(draw(st.integers(1, 4))):
        parts = draw(st.integers(1, MAX_KEY_PARTS + 2))
        header = f"[t{i}." + _key(draw, parts - 1) + "]" if parts > 1 else f"[t{i}]"
        depth = draw(st.integers(0, MAX_NESTING + 2))
        value = _value(draw, depth)
        key_parts = draw(st.integers(1, MAX_KEY_PARTS + 2))
        lines += [f"# {draw(_NOISE)}", header, f"{_key(draw, key_parts)} = {value}  # ]]"]
        deepest, longest = max(deepest, depth), max(longest, parts, key_parts)
    return "\n".join(lines) + "\n", deepest, longest


@pytest.mark.slow
@settings(max_examples=examples(150), deadline=None)
@given(_documents())
def test_the_shape_scan_finds_exactly_the_documents_past_a_bound(
    document: tuple[str, int, int],
) -> None:
    import tomllib

    text, deepest, longest = document
    tomllib.loads(text)  # the generator writes TOML
    found = first_excess(text, MAX_NESTING, MAX_KEY_PARTS, MAX_TABLES)
    kinds = {"nesting"} if deepest > MAX_NESTING else set()
    kinds |= {"key"} if longest > MAX_KEY_PARTS else set()
    event(f"past a bound: {'+'.join(sorted(kinds)) or 'none'}")
    assert (found is None) == (not kinds)
    if found is not None:
        assert found[0] in kinds


def test_the_bounds_table_in_the_docs_names_each_value_and_a_real_test() -> None:
    import importlib
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    table = doc[doc.index("## Bounds") :]
    table = table[: table.index("\n\n", table.index("| bound |"))]
    rows = re.findall(r"^\| [^|]+ \| ([^|]+) \| ([^|]+) \|$", table, re.M)[2:]
    assert len(rows) == 18
    for value, test in rows:
        name = re.search(r"\(`(\w+)\.(MAX_\w+)`\)", value)
        assert name is not None, value
        module = importlib.import_module(f"guardrails.policy.{name.group(1)}")
        bound = getattr(module, name.group(2))
        shown = f"{bound:,}" if isinstance(bound, int) else f"{bound:g}"
        assert shown in value, (value, shown)
        if test.strip() != "the same test":
            file, function = re.fullmatch(
                r"`(?:tests/policy/)?(\w+)\.py::(\w+)`", test.strip()
            ).groups()
            tests = importlib.import_module(f"tests.policy.{file}")
            assert callable(getattr(tests, function)), test
