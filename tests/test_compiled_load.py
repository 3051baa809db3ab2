"""A compiled core built from other sources is not used: the pure path runs, and a
warning says how to rebuild it."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

import guardrails
from guardrails.native import _compiled

MODULE_C = Path(guardrails.__file__).parent / "native" / "_csrc" / "module.c"


def test_the_functions_checked_are_the_method_table_of_the_sources() -> None:
    table = re.findall(r'^\s*\{"(\w+)",', MODULE_C.read_text(), re.M)
    assert sorted(table) == sorted(_compiled.FUNCTIONS)


def test_a_core_lacking_a_function_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    stale = types.ModuleType("guardrails._ccore")
    for name in _compiled.FUNCTIONS:
        if name != "render":
            setattr(stale, name, print)
    monkeypatch.setitem(sys.modules, "guardrails._ccore", stale)
    monkeypatch.setattr(guardrails, "_ccore", stale, raising=False)
    with pytest.warns(RuntimeWarning, match=r"no render\).*pip install -e \."):
        assert _compiled.load() is None


def test_a_core_with_every_function_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = types.ModuleType("guardrails._ccore")
    for name in _compiled.FUNCTIONS:
        setattr(whole, name, print)
    monkeypatch.setitem(sys.modules, "guardrails._ccore", whole)
    monkeypatch.setattr(guardrails, "_ccore", whole, raising=False)
    assert _compiled.load() is whole
