"""SQLite connections whose ``COMMIT`` fails on the store's thread, when a test says so.

``faulty(plan)`` makes every connection opened meanwhile a ``Faulty`` one.
On the store thread of ``offloop`` it fails the ``COMMIT`` of the passes the
plan picks (the next ones, or those whose statements include a fragment of
SQL, such as a settlement's), the way SQLite's own commit fails:

- ``rolled_back``: SQLite rolled the transaction back by itself and says so
  (a full disk, an I/O error);
- ``left_open``: the commit failed and the transaction is still open;
- ``rollback_fails``: as ``left_open``, and the ``ROLLBACK`` that follows fails too;
- ``hang``: the process stops there (``on_hang`` is called, then it sleeps),
  so that a test can kill it in the middle of a pass.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

STORE_THREAD = "guardrails-store-off-loop"


class Plan:
    """Which commits of the store thread fail, and how."""

    def __init__(
        self,
        mode: str = "rolled_back",
        *,
        marked_by: str | None = None,
        fail: int = 0,
        every: int = 0,
        on_hang: Callable[[], None] | None = None,
    ) -> None:
        self.mode = mode
        self.marked_by = marked_by  # only a pass that ran a statement with this fragment fails
        self.fail = fail  # how many such commits fail from now on
        self.every = every  # or: every n-th commit fails
        self.on_hang = on_hang
        self.commits = 0
        self.failed = 0
        self.lock = threading.Lock()

    def fails(self, marked: bool) -> bool:
        with self.lock:
            self.commits += 1
            if self.every:
                due = self.commits % self.every == 0
            else:
                due = self.fail > 0 and (self.marked_by is None or marked)
                self.fail -= due
            self.failed += due
            return due


class Faulty(sqlite3.Connection):
    plan = Plan()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.marked = False
        self.refuse_rollback = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if threading.current_thread().name != STORE_THREAD:
            return super().execute(sql, *args)
        plan = Faulty.plan
        if sql.startswith("BEGIN"):
            self.marked = False
        elif plan.marked_by is not None and plan.marked_by in sql:
            self.marked = True
        elif sql == "ROLLBACK" and self.refuse_rollback:
            self.refuse_rollback = False
            raise sqlite3.OperationalError("disk I/O error")
        elif sql == "COMMIT" and plan.fails(self.marked):
            self._fail(plan)
        return super().execute(sql, *args)

    def _fail(self, plan: Plan) -> None:
        if plan.mode == "hang":
            assert plan.on_hang is not None
            plan.on_hang()
            time.sleep(3600)
        if plan.mode == "rolled_back":
            super().execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        self.refuse_rollback = plan.mode == "rollback_fails"
        raise sqlite3.OperationalError("disk I/O error")


@contextmanager
def faulty(plan: Plan) -> Iterator[Plan]:
    """Connections opened in the block are ``Faulty`` ones, following ``plan``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Faulty, "plan", plan)
        patch.setattr(sqlite3, "connect", functools.partial(sqlite3.connect, factory=Faulty))
        yield plan
