"""The single SELECTs of an archive run on a reader connection per thread (archive/storage/readers.py).
What must hold is checked on the connections themselves and, for PostgreSQL, on the server's
own list of them: one per thread that read, closed when that thread ends, when the store is
closed or collected, at most the limit on PostgreSQL, one that failed replaced by a fresh one,
the failure typed as any other. (Open files cannot tell: SQLite keeps a closed connection's
descriptor open while another connection of the process holds a lock on the file, as every
connection to a WAL database does.)"""

from __future__ import annotations

import gc
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hits import index_hit

from mnemo_sea.archive import Archive, EvidenceInput, Principal, Role, Sensitivity, StoreUnavailable
from mnemo_sea.retrieval.outcome import Hit

AGENT = Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


def is_closed(conn: Any) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return True
    return False


def reader_of_this_thread(archive: Archive) -> Any:
    readers = archive.store._readers
    assert readers is not None
    reader = readers.connection()
    assert reader is not None
    return reader.conn


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "archive.db"


@pytest.fixture
def archive(db_file: Path) -> Iterator[Archive]:
    a = Archive.open(str(db_file))
    try:
        yield a
    finally:
        a.close()


def pointer(archive: Archive, evidence_id: str, body: str) -> Hit:
    rec = archive.put_evidence(AGENT, EvidenceInput(evidence_id=evidence_id, body=body, source="test"))
    return index_hit(rec.evidence_id, rec.version, rec.kind, 0, len(body), rec.content_sha256)


def read(archive: Archive, pointers: list[Hit]) -> list[str]:
    return [h.snippet for h in archive.read_hits(AGENT, pointers, None) if h is not None]


def test_each_thread_reads_on_one_connection_of_its_own_closed_when_it_ends(archive: Archive) -> None:
    pointers = [pointer(archive, f"doc-{n}", f"text {n}") for n in range(3)]
    for _ in range(20):
        assert read(archive, pointers) == ["text 0", "text 1", "text 2"]
    mine = reader_of_this_thread(archive)
    assert reader_of_this_thread(archive) is mine  # twenty reads and a look: one connection

    seen: list[Any] = []

    def other_thread() -> None:
        for _ in range(5):
            assert read(archive, pointers) == ["text 0", "text 1", "text 2"]
        seen.append(reader_of_this_thread(archive))

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    [theirs] = seen
    assert theirs is not mine
    gc.collect()
    assert is_closed(theirs)  # closed with the thread's locals
    assert not is_closed(mine)
    assert read(archive, pointers) == ["text 0", "text 1", "text 2"]


def test_closing_the_archive_closes_every_reader(db_file: Path) -> None:
    archive = Archive.open(str(db_file))
    pointers = [pointer(archive, "doc-1", "text 1")]
    seen: list[Any] = []
    opened, closed = threading.Event(), threading.Event()

    def reads_then_waits() -> None:  # a thread still alive when the archive closes
        read(archive, pointers)
        seen.append(reader_of_this_thread(archive))
        opened.set()
        closed.wait(120)  # set by the test; the bound only ends a hang

    worker = threading.Thread(target=reads_then_waits)
    worker.start()
    assert opened.wait(120)
    read(archive, pointers)
    seen.append(reader_of_this_thread(archive))
    assert not any(is_closed(c) for c in seen)
    archive.close()
    assert all(is_closed(c) for c in seen)
    closed.set()
    worker.join()


def test_a_collected_archive_leaves_no_reader_open(db_file: Path) -> None:
    archive = Archive.open(str(db_file))
    read(archive, [pointer(archive, "doc-1", "text 1")])
    conn = reader_of_this_thread(archive)
    del archive
    gc.collect()
    assert is_closed(conn)


def test_a_kept_reader_found_closed_is_replaced_and_the_read_answers(archive: Archive) -> None:
    pointers = [pointer(archive, "doc-1", "text 1")]
    assert read(archive, pointers) == ["text 1"]
    broken = reader_of_this_thread(archive)
    broken.close()  # this thread's reader, closed behind the store's back
    assert read(archive, pointers) == ["text 1"]  # read again on a fresh connection
    assert reader_of_this_thread(archive) is not broken


def test_a_failed_read_drops_its_reader_and_is_typed(archive: Archive) -> None:
    from mnemo_sea.archive.storage.statements import PreparedSelect

    pointers = [pointer(archive, "doc-1", "text 1")]
    assert read(archive, pointers) == ["text 1"]
    before = reader_of_this_thread(archive)
    missing = PreparedSelect("SELECT * FROM no_such_table", None, (), (), (None,))
    with pytest.raises(StoreUnavailable, match="archive store"):
        archive.store.select(missing, {})
    assert is_closed(before)
    assert read(archive, pointers) == ["text 1"]  # a fresh connection


def test_an_in_memory_archive_reads_through_the_pool() -> None:
    # An in-memory database is its connection's own: a reader of its own would see none of it.
    archive = Archive.open("sqlite+pysqlite:///:memory:")
    try:
        assert archive.store._readers is None
        assert read(archive, [pointer(archive, "doc-1", "text 1")]) == ["text 1"]
    finally:
        archive.close()


def server_connections(url: str, settled_at: int) -> int:
    """Connections the PostgreSQL server holds open to this test's database, counted by the
    server itself (from a connection of its own, which is left out), once the count has
    settled at `settled_at` or a bound on a hang has passed. A backend ends on its own after
    its client closed the connection, so for a moment one already closed is still listed
    (a busy machine made a count taken at once read 2 where 0 was right)."""
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    with psycopg.connect(
        host=parsed.host, port=parsed.port, user=parsed.username, dbname=parsed.database, autocommit=True
    ) as conn:  # autocommit: each count reads the list anew
        deadline = time.monotonic() + 60  # bounds a hang only; the count is what is asserted
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            assert row is not None
            count = int(row[0])
            if count == settled_at or time.monotonic() > deadline:
                return count
            time.sleep(0.05)


@pytest.mark.postgres
def test_a_postgresql_thread_reads_in_autocommit_on_a_connection_of_its_own(pg_migrated_url: str) -> None:
    """No BEGIN before the statement, no ROLLBACK after it, no pool checkout: the reader stays
    idle between reads, the pool lends nothing out, and the next write transaction is all or
    nothing as ever."""
    import psycopg
    from sqlalchemy import func, select

    from mnemo_sea.archive.storage import schema as t

    archive = Archive.open(pg_migrated_url)
    try:
        store = archive.store
        pointers = [pointer(archive, "doc-1", "text 1")]
        for _ in range(3):
            assert read(archive, pointers) == ["text 1"]
        reader = reader_of_this_thread(archive)
        assert reader.autocommit is True
        assert reader.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert store.engine.pool.checkedout() == 0
        with pytest.raises(RuntimeError), store.write() as conn:
            conn.execute(t.evidence.update().values(locator="changed"))
            raise RuntimeError("abort after an update")
        with store.read() as conn:
            assert conn.execute(select(t.evidence.c.locator)).scalars().all() != ["changed"]
            assert conn.execute(select(func.count()).select_from(t.evidence)).scalar_one() == 1
        assert reader_of_this_thread(archive) is reader
    finally:
        archive.close()
    assert server_connections(pg_migrated_url, settled_at=0) == 0  # the reader closed with the pool


@pytest.mark.postgres
def test_postgresql_keeps_at_most_the_limit_of_readers_and_reads_beyond_it_through_the_pool(
    pg_migrated_url: str,
) -> None:
    import psycopg

    from mnemo_sea.archive.storage.readers import PG_READER_LIMIT

    archive = Archive.open(pg_migrated_url)
    try:
        pointers = [pointer(archive, "doc-1", "text 1")]
        threads = PG_READER_LIMIT + 4
        all_read, done = threading.Barrier(threads + 1), threading.Event()
        answers: list[list[str]] = []

        def reads_then_waits() -> None:  # every thread alive at once, each keeping its reader
            answers.append(read(archive, pointers))
            all_read.wait(120)  # bounds a hang only
            done.wait(120)

        workers = [threading.Thread(target=reads_then_waits) for _ in range(threads)]
        for w in workers:
            w.start()
        all_read.wait(120)
        try:
            assert answers == [["text 1"]] * threads
            readers = archive.store._readers
            assert readers is not None
            assert len(readers._registry.open) == PG_READER_LIMIT
            pool = archive.store.engine.pool
            assert pool.checkedout() == 0
            # Beyond the limit the pool served: what it holds is out of autocommit and idle.
            pooled = [archive.store.engine.raw_connection() for _ in range(pool.checkedin())]
            try:
                assert pooled
                for fairy in pooled:
                    assert fairy.driver_connection.autocommit is False
                    status = fairy.driver_connection.info.transaction_status
                    assert status == psycopg.pq.TransactionStatus.IDLE
            finally:
                for fairy in pooled:
                    fairy.close()
            expected = PG_READER_LIMIT + len(pooled)
            assert server_connections(pg_migrated_url, settled_at=expected) == expected
        finally:
            done.set()
            for w in workers:
                w.join()
        gc.collect()  # the threads' locals are gone: their readers are closed
        assert len(readers._registry.open) == 0
    finally:
        archive.close()
    assert server_connections(pg_migrated_url, settled_at=0) == 0


@pytest.mark.postgres
def test_a_kept_postgresql_reader_whose_server_side_ended_is_replaced_and_read_again(
    pg_migrated_url: str,
) -> None:
    """What the pool's pre-ping does for its connections: a reader whose backend went away
    since its last statement (a server restart) is replaced, and the read answers."""
    import psycopg
    from sqlalchemy.engine import make_url

    archive = Archive.open(pg_migrated_url)
    try:
        pointers = [pointer(archive, "doc-1", "text 1")]
        assert read(archive, pointers) == ["text 1"]
        reader = reader_of_this_thread(archive)
        parsed = make_url(pg_migrated_url)
        admin = {"host": parsed.host, "port": parsed.port, "user": parsed.username, "dbname": "postgres"}
        with psycopg.connect(**admin) as c:
            c.execute("SELECT pg_terminate_backend(%s)", (reader.info.backend_pid,))
        assert read(archive, pointers) == ["text 1"]
        assert reader.closed
        assert reader_of_this_thread(archive) is not reader
    finally:
        archive.close()


@pytest.mark.postgres
def test_a_postgresql_connection_lost_during_a_read_is_store_unavailable(pg_migrated_url: str) -> None:
    """The connection dies under the statement, on the kept reader and again on the fresh one
    it is read on once more: the read fails as StoreUnavailable, the dead connection is not
    reused, and the next read answers. Through the pool too (a store keeping no readers)."""
    from mnemo_sea.archive.storage.readers import ThreadReaders
    from mnemo_sea.archive.storage.statements import PreparedSelect

    archive = Archive.open(pg_migrated_url)
    try:
        pointers = [pointer(archive, "doc-1", "text 1")]
        assert read(archive, pointers) == ["text 1"]  # this thread keeps a reader from here on
        suicide = PreparedSelect("SELECT pg_terminate_backend(pg_backend_pid())", None, (), (), (None,))
        with pytest.raises(StoreUnavailable, match="archive store"):
            archive.store.select(suicide, {})
        assert read(archive, pointers) == ["text 1"]
        archive.store._readers = ThreadReaders(archive.store.engine, limit=0)  # the pool's path
        with pytest.raises(StoreUnavailable, match="archive store"):
            archive.store.select(suicide, {})
        assert read(archive, pointers) == ["text 1"]
        assert archive.store.engine.pool.checkedout() == 0
    finally:
        archive.close()


def test_a_forked_child_never_touches_its_parents_reader(archive: Archive) -> None:
    """SQLite allows no use of a connection across fork(): the child opens its own reader and
    neither uses nor closes the parent's, which keeps answering in the parent."""
    pointers = [pointer(archive, "doc-1", "text 1")]
    assert read(archive, pointers) == ["text 1"]
    mine = reader_of_this_thread(archive)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report, and leave without running the parent's cleanups
        ok = False
        try:
            theirs = reader_of_this_thread(archive)
            ok = theirs is not mine and read(archive, pointers) == ["text 1"]
            archive.close()
        finally:
            os.write(write_end, b"ok" if ok else b"no")
            os._exit(0)
    os.close(write_end)
    os.waitpid(child, 0)
    assert os.read(read_end, 2) == b"ok"
    os.close(read_end)
    assert not is_closed(mine)
    assert reader_of_this_thread(archive) is mine
    assert read(archive, pointers) == ["text 1"]


def test_a_connection_that_refuses_to_leave_autocommit_is_invalidated_not_raised() -> None:
    """psycopg refuses to switch autocommit on a connection whose state is unknown (it broke
    under the statement): the statement's own error must stay the one raised, and the pool
    must not get that connection back for reuse."""
    from mnemo_sea.archive.storage.store import _leave_autocommit

    class Driver:
        closed = False

        @property
        def autocommit(self) -> bool:
            return True

        @autocommit.setter
        def autocommit(self, value: bool) -> None:
            raise RuntimeError("can't change 'autocommit' now: connection in transaction status UNKNOWN")

    class Fairy:
        invalidated = 0

        def invalidate(self) -> None:
            self.invalidated += 1

    broken = Fairy()
    _leave_autocommit(broken, Driver())
    assert broken.invalidated == 1
    closed_driver = Driver()
    closed_driver.closed = True
    gone = Fairy()
    _leave_autocommit(gone, closed_driver)
    assert gone.invalidated == 1


def test_a_sqlite_file_is_read_through_a_memory_map_on_every_connection(archive: Archive) -> None:
    from mnemo_sea.archive.storage.store import SQLITE_MMAP_BYTES

    p = pointer(archive, "doc-1", "potassium 4.1 mmol/L")
    assert archive.read_hits(AGENT, [p])[0] is not None  # this thread's reader is open now
    reader = reader_of_this_thread(archive)
    assert reader.execute("PRAGMA mmap_size").fetchone()[0] == SQLITE_MMAP_BYTES
    with archive.store.read() as conn:  # a pooled connection, as the transactions use
        assert conn.exec_driver_sql("PRAGMA mmap_size").scalar_one() == SQLITE_MMAP_BYTES
    # What a map reads is what was written: a new version after the map was made is served.
    q = pointer(archive, "doc-1", "potassium 3.9 mmol/L")
    found = archive.read_hits(AGENT, [q])[0]
    assert found is not None and found.snippet == "potassium 3.9 mmol/L"


def test_a_pooled_read_keeps_no_reader_for_its_thread(archive: Archive) -> None:
    """`select(pooled=True)` (the outbox reads of a drain, which may run on a thread of its own
    each round) answers what a kept reader answers, without opening one for the thread."""
    from mnemo_sea.archive.storage.outbox import pending_rows, pending_total

    pointer(archive, "doc-0", "text 0")
    readers = archive.store._readers
    assert readers is not None  # a SQLite file or PostgreSQL: readers are kept
    seen: list[tuple[int, int, int]] = []

    def drain_thread() -> None:
        before = len(readers._registry.open)
        rows, total = pending_rows(archive.store, 100), pending_total(archive.store)
        seen.append((len(rows), total, len(readers._registry.open) - before))

    worker = threading.Thread(target=drain_thread)
    worker.start()
    worker.join()
    assert seen == [(2, 2, 0)]  # the evidence's index row and cache purge; no reader opened
