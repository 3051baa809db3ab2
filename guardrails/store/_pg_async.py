"""The async path of ``PostgresStore``: async psycopg connections on the caller's event loop.

``AsyncPath`` runs the same operations as the sync store (``_pg_sql``) on
connections of a ``psycopg_pool.AsyncConnectionPool``, awaited on the loop:
no thread hand-off, and the loop serves other tasks while the server works.
Audit rows of tasks that arrive together share one commit (``AsyncBatcher``).

A pool belongs to the loop that opened it, so each loop gets its own. It
closes with its loop: a task of the loop holds it open and closes it when
the loop cancels its tasks (``asyncio.run``, pytest-asyncio), and an async
generator does the same when the loop shuts down its async generators (for
loops ended by hand). The task matters: psycopg_pool's workers take a
cancellation that comes while they make a connection for a failed attempt,
and go on waiting for work, so a loop that only cancels them would wait
for them for ever; the pool's close stops them. ``await store.aclose()`` closes
the current loop's pool at once; ``store.close()`` from sync code closes
those of loops that no longer run, and from a coroutine hangs up the current
loop's connections at once and closes its pool in a task of the loop (a
connection the pool was still making is closed there too).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import psycopg_pool

from . import _pg_sql
from ._base import AuditRow, StoreUnavailable
from ._group_commit import AsyncBatcher
from ._pg_errors import collided, refused
from ._pg_sql import Head, Result
from .steps import finish_started

__all__ = ["AsyncPath"]

T = TypeVar("T")


class Host(Protocol):
    """What the async path uses of its ``PostgresStore``."""

    _head: Head
    dsn: str
    errors: tuple[type[BaseException], ...]
    disconnected: type[BaseException]

    def migrate(self) -> None: ...


class _LoopPool:
    """The pool, the audit batcher and the closer of one event loop."""

    __slots__ = ("batcher", "closer", "keeper", "opened", "pool")

    def __init__(self, path: AsyncPath, dsn: str, options: dict[str, Any]) -> None:
        self.opened: weakref.WeakSet[Any] = weakref.WeakSet()  # every connection it made
        import psycopg_pool  # the ``postgres`` extra, imported with the first pool

        self.pool: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
            dsn, open=False, name="guardrails-async", configure=self._made, **options
        )
        self.batcher = AsyncBatcher(path.write_rows)
        self.closer: AsyncIterator[None] | None = None
        self.keeper: asyncio.Task[None] | None = None

    async def _made(self, conn: Any) -> None:
        self.opened.add(conn)

    def hang_up(self) -> None:
        for conn in list(self.opened):
            conn.pgconn.finish()

    async def close(self) -> None:
        keeper, self.keeper = self.keeper, None
        if keeper is not None and keeper is not asyncio.current_task():
            keeper.cancel()  # (it closes the pool too: done by then, nothing left to do)
            await asyncio.wait([keeper])
        # Shutting down with its loop, the pool's workers were cancelled with the
        # loop's other tasks, and waiting for them says so.
        with contextlib.suppress(asyncio.CancelledError):
            await self.pool.close()
        for conn in list(self.opened):
            if not conn.closed:
                await conn.close()


class AsyncPath:
    """A ``PostgresStore``'s operations for async callers, on their own loop."""

    def __init__(self, store: Host, options: dict[str, Any]) -> None:
        self.store = store
        self._options = options
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPool] = (
            weakref.WeakKeyDictionary()
        )
        self._migrated = False

    # -- the operations -------------------------------------------------------------

    async def call(self, name: str, /, *args: Any) -> Any:
        """The store method ``name`` with ``args``, awaited on this loop."""
        if name == "append":  # the store's answer: the row's id
            return await self.append_one(*args)
        if name == "append_many":  # after the store's head hint, which it moves on
            return await self.append_many(*args)
        return await self.run(getattr(_pg_sql, name)(*args))

    async def append(self, row: AuditRow, /) -> None:
        """Append ``row``; returns once it is committed (with the rows queued alongside)."""
        await (await self._here()).batcher.commit([row])

    async def write_rows(self, rows: list[AuditRow]) -> None:
        if len(rows) == 1:
            await self.append_one(rows[0])
        else:
            await self.append_many(rows)

    async def append_one(self, row: AuditRow) -> int:
        """One row in the plain statement, after the store's head hint, which it moves on
        (the hint the sync path keeps too: either path's rows keep it up to date)."""
        written = await self._append_steps(_pg_sql.append, row)
        return written.id

    async def append_many(self, rows: list[AuditRow]) -> None:
        if rows:
            await self._append_steps(_pg_sql.append_many, rows)

    async def _append_steps(self, steps: Callable[..., _pg_sql.Steps[Head]], rows: Any) -> Head:
        store = self.store
        try:
            store._head = written = await self.run(steps(rows, store._head))
        except StoreUnavailable as exc:
            if not collided(exc):
                raise
            # A row written around the store took the id: chain after the newest row.
            store._head = written = await self.run(steps(rows, store._head, around=True))
        return written

    async def run(self, steps: _pg_sql.Steps[T]) -> T:
        """Drive an operation on a connection of this loop's pool; a backend failure is unavailable."""
        errors = self.store.errors
        statement = _pg_sql.first(steps)  # its checks, before a connection is asked for
        here: _LoopPool | None = None
        try:
            here = await self._here()
            conn = await here.pool.getconn()
            try:
                return await _drive(steps, statement, conn)
            finally:
                await here.pool.putconn(conn)
        except errors as exc:
            lost = isinstance(exc, self.store.disconnected)
            if here is not None and lost and not _pool_timeout(exc):
                await self._discard(here)
            raise refused(exc) from exc

    # -- pools -----------------------------------------------------------------------

    async def _here(self) -> _LoopPool:
        loop = asyncio.get_running_loop()
        found = self._loops.get(loop)
        if found is not None:
            return found
        if not self._migrated:  # the sync store migrates once, off the loop
            await asyncio.to_thread(self.store.migrate)
            self._migrated = True
        found = self._loops.get(loop)  # another task of this loop may have opened it meanwhile
        if found is not None:
            return found
        here = _LoopPool(self, self.store.dsn, self._options)
        self._loops[loop] = here
        try:
            # Connected before use: a pool still connecting when its loop ends
            # would retry through the cancellation of its tasks.
            await here.pool.open(wait=True, timeout=self._options["timeout"])
        except BaseException:
            # Connections other tasks already hold are closed as they come back.
            self._forget(loop, here)
            await here.pool.close()
            raise
        here.closer = _closing(here)
        await anext(here.closer)  # the loop now closes the pool when it shuts down
        # ... and first when it cancels its tasks (``asyncio.run``, before it shuts its
        # async generators down): a worker of the pool that is making a connection then
        # (to grow, or to replace a broken one) takes the cancellation for a failed
        # attempt and waits for its next task, and the loop would wait for it for ever.
        # Closing the pool gives each worker its stop.
        here.keeper = loop.create_task(  # (in a context of its own: it keeps no caller's)
            _kept_open(here), name="guardrails-async-pool-keeper", context=contextvars.Context()
        )
        return here

    async def _discard(self, here: _LoopPool) -> None:
        # The server went away: a fresh pool connects at once when it is back.
        self._forget(asyncio.get_running_loop(), here)
        await here.close()

    def _forget(self, loop: asyncio.AbstractEventLoop, here: _LoopPool) -> None:
        if self._loops.get(loop) is here:
            del self._loops[loop]

    async def aclose(self) -> None:
        """Close the pool of the running loop, once the store work this loop started
        to run on its own (``steps.asubmit``: reservations given back) has ended."""
        await finish_started(self.store)
        here = self._loops.pop(asyncio.get_running_loop(), None)
        if here is not None:
            await here.close()

    def close(self) -> None:
        """Close every pool that can be closed from here (see the module's docstring)."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, here in list(self._loops.items()):
            del self._loops[loop]
            if loop is running:
                # Cannot wait here: the connections are closed now, without a
                # word to the server, and the pool itself by a task of this loop
                # as soon as the caller next waits. Until then the pool may still
                # finish a connection it was making to grow (a loaded machine):
                # that task closes it too, and the pool makes no more.
                here.hang_up()
                closing = loop.create_task(here.close())
                _CLOSING.add(closing)  # (the loop keeps only a weak reference to a task)
                closing.add_done_callback(_CLOSING.discard)
            elif not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(here.close())
            # A loop that closed has closed its pool already (``_closing``).


_CLOSING: set[asyncio.Task[None]] = set()


async def _kept_open(here: _LoopPool) -> None:
    """Waits until its loop cancels it (the loop is ending), then closes the pool."""
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        await here.close()


async def _closing(here: _LoopPool) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await here.close()


async def _drive(steps: _pg_sql.Steps[T], statement: _pg_sql.Sql, conn: Any) -> T:
    """The async driver of an operation from its ``first`` statement (``_pg_sql.drive`` is
    the sync one's loop)."""
    try:
        while True:
            answer = await _result(await conn.execute(statement.text, statement.params))
            statement = steps.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _result(cursor: Any) -> Result:
    rows = await cursor.fetchall() if cursor.description is not None else []
    return Result(cursor.rowcount, rows)


def _pool_timeout(exc: BaseException) -> bool:
    import psycopg_pool

    return isinstance(exc, psycopg_pool.PoolTimeout)
