"""Reader connections: one per thread, for the single SELECTs of `ArchiveStore.select`.

Search hydration runs one such statement on every search. Checking a connection out of
SQLAlchemy's pool and back in (its queue, events and reset) cost half as much again as the
statement itself on SQLite; on PostgreSQL the pool's pre-ping adds a round trip to every
checkout, and switching the connection into autocommit and back two more driver calls. A
thread keeps a connection of its own instead: opened by the engine (its connect event sets
SQLite's pragmas), detached from the pool, and in autocommit, so it holds no transaction
between statements (never standing in the way of a checkpoint or a VACUUM).

- SQLite: only for a file. An in-memory database is one connection's own, so it stays pooled.
- PostgreSQL: the server counts connections, so at most `limit` threads keep one (a busy
  API's thread pool has dozens); a thread beyond that reads through the pool as before.
- A connection is closed when its thread ends (its thread-local goes), when the store is
  closed (`close_all`) or collected. One that failed is dropped; `ArchiveStore.select` reads
  again once on a fresh one when a kept connection turns out to be lost (the server restarted
  meanwhile: what pre-ping catches for the pool), since a single SELECT can be repeated.
- fork(): a child never uses or closes a connection its parent opened (SQLite allows no use
  of one across fork, and a PostgreSQL socket shared by two processes corrupts the protocol).
"""

from __future__ import annotations

import os
import threading
import weakref
from contextlib import suppress
from typing import Any, NamedTuple

from sqlalchemy import Engine
from sqlalchemy.pool import QueuePool

# Reader connections a PostgreSQL store keeps at most, beside its pool (5 + 10 overflow).
PG_READER_LIMIT = 8


class Reader(NamedTuple):
    """This thread's reader: the driver connection, and whether it was opened just now (a
    fresh one that fails is not read on again)."""

    conn: Any
    fresh: bool


class _Registry:
    """The reader connections open, to close them all; apart from `ThreadReaders` so that a
    connection's finalizer holds no reference to the readers themselves (they, and the thread
    locals they keep, can then be collected with their store)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: dict[int, tuple[int, Any]] = {}  # id of its _Held -> (pid that opened it, conn)

    def forget(self, key: int, conn: Any) -> None:
        with self.lock:
            self.open.pop(key, None)
        with suppress(Exception):  # closing a connection that failed may fail again
            conn.close()


class _Held:
    """A reader connection as one thread holds it: closed once nothing holds it any more (its
    thread ended, or its store was collected), or by `close_all`."""

    def __init__(self, registry: _Registry, conn: Any, epoch: int) -> None:
        self.conn = conn
        self.epoch = epoch
        self.pid = os.getpid()
        self._finalizer = weakref.finalize(self, registry.forget, id(self), conn)

    def abandon(self) -> None:
        """Never close it here: a connection inherited through fork() is the parent's."""
        self._finalizer.detach()


class ThreadReaders:
    """One reader connection per thread (see the module docstring); `limit` caps how many."""

    def __init__(self, engine: Engine, *, limit: int | None = None) -> None:
        self._engine = engine
        self._limit = limit
        self._local = threading.local()
        self._registry = _Registry()
        self._epoch = 0
        self._opening = 0  # connections being opened right now, counted against the limit

    @classmethod
    def of(cls, engine: Engine) -> ThreadReaders | None:
        """Readers for `engine`, or None where its statements must stay on the pool."""
        if engine.dialect.name == "postgresql":
            return cls(engine, limit=PG_READER_LIMIT)
        database = engine.url.database
        if engine.dialect.name != "sqlite" or not isinstance(engine.pool, QueuePool):
            return None  # SingletonThreadPool and StaticPool: an in-memory or shared database
        if not database or database == ":memory:" or database.startswith("file:"):
            return None
        return cls(engine)

    def connection(self) -> Reader | None:
        """This thread's reader, opened if need be; None when `limit` readers are open already
        (the caller reads through the pool). Raises what the engine's connect raises."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None and held.epoch == self._epoch and held.pid == os.getpid():
            return Reader(held.conn, fresh=False)
        if held is not None and held.pid != os.getpid():
            held.abandon()
            self._local.held = None
        pid = os.getpid()
        with self._registry.lock:
            if self._limit is not None:
                mine = sum(1 for opener, _ in self._registry.open.values() if opener == pid)
                if mine + self._opening >= self._limit:
                    return None
            self._opening += 1
        try:
            conn = self._open()
            held = _Held(self._registry, conn, self._epoch)
            with self._registry.lock:
                self._registry.open[id(held)] = (held.pid, conn)
        finally:
            with self._registry.lock:
                self._opening -= 1
        self._local.held = held
        return Reader(conn, fresh=True)

    def _open(self) -> Any:
        fairy = self._engine.raw_connection()
        conn: Any = fairy.driver_connection
        fairy.detach()  # ours from now on: the pool opens another for itself when it needs one
        if self._engine.dialect.name == "postgresql":
            try:
                conn.autocommit = True  # SQLite's connect event has put it in autocommit already
            except BaseException:
                conn.close()
                raise
        return conn

    def discard(self) -> None:
        """Close this thread's connection (it failed); its next read opens a new one."""
        held: _Held | None = getattr(self._local, "held", None)
        self._local.held = None
        if held is not None and held.pid == os.getpid():
            self._registry.forget(id(held), held.conn)

    def close_all(self) -> None:
        """Close every reader this process opened; a thread reading afterwards opens a new one
        (the store stays usable after `dispose`, as SQLAlchemy's engine does)."""
        pid = os.getpid()
        with self._registry.lock:
            self._epoch += 1
            opened, self._registry.open = list(self._registry.open.values()), {}
        for opener, conn in opened:
            if opener == pid:  # a parent's connection, inherited through fork(), is left alone
                with suppress(Exception):
                    conn.close()
