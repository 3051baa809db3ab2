"""Shared fixtures. Subpackages keep their own conftest.py beside their tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from guardrails.store import MemoryStore, PostgresStore, SQLiteStore, Store
from guardrails.store.testing import postgres_dsn, postgres_required, temporary_schema
from tests._examples import load_profile

# Hypothesis: the ``ci`` profile when CI=true, ``local`` (a fifth of the examples) otherwise.
load_profile()


# -- stores: one of each kind, and locations that other processes can open ------------


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A fresh schema on the PostgreSQL server (mandatory when GUARDRAILS_REQUIRE_POSTGRES=1)."""
    dsn = postgres_dsn()
    if dsn is None:
        if postgres_required():
            pytest.fail("GUARDRAILS_REQUIRE_POSTGRES=1 but GUARDRAILS_POSTGRES_DSN is not set")
        pytest.skip("no PostgreSQL server: set GUARDRAILS_POSTGRES_DSN")
    with temporary_schema(dsn) as scoped:
        yield scoped


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Store]:
    kind = request.param
    opened: Store
    if kind == "memory":
        opened = MemoryStore()
    elif kind == "sqlite":
        opened = SQLiteStore(f"{tmp_path}/store.db")
    else:
        opened = PostgresStore(request.getfixturevalue("pg_dsn"))
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """A store location that several processes can open."""
    if request.param == "sqlite":
        return f"{tmp_path}/shared.db"
    return str(request.getfixturevalue("pg_dsn"))


# -- the word scan of literal triggers: the C walk and the pure path --------------------


@pytest.fixture(scope="module", params=["pure", "compiled"])
def scan_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Term sets built in the test take this path (``guardrails.text._wordscan``)."""
    from guardrails.native._compiled import load
    from guardrails.text import _wordscan

    core = None if request.param == "pure" else _wordscan.usable(load())
    if request.param == "compiled" and core is None:
        if os.environ.get("GUARDRAILS_REQUIRE_CCORE") == "1":
            pytest.fail("GUARDRAILS_REQUIRE_CCORE=1 but the word scan was not built")
        pytest.skip("the C extension was not built")
    saved = _wordscan.CORE
    _wordscan.CORE = core
    try:
        yield request.param
    finally:
        _wordscan.CORE = saved
