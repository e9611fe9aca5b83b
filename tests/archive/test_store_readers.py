"""The single SELECTs of a SQLite archive run on a reader connection per thread (store.py,
`_SqliteReaders`). What must hold is checked on the connections themselves: one per thread
that read, closed when that thread ends, when the store is closed or collected, and one that
failed replaced by a fresh one, the failure typed as any other. (Open files cannot tell: SQLite
keeps a closed connection's descriptor open while another connection of the process holds a
lock on the file, as every connection to a WAL database does.)"""

from __future__ import annotations

import gc
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemo_sea.archive import Archive, EvidenceInput, Principal, Role, Sensitivity, StoreUnavailable
from mnemo_sea.archive.hits import HitPointer

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
    return readers.connection()


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


def pointer(archive: Archive, evidence_id: str, body: str) -> HitPointer:
    rec = archive.put_evidence(AGENT, EvidenceInput(evidence_id=evidence_id, body=body, source="test"))
    return HitPointer(rec.evidence_id, rec.version, rec.kind, 0, len(body), rec.content_sha256)


def read(archive: Archive, pointers: list[HitPointer]) -> list[str]:
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
        closed.wait(10)

    worker = threading.Thread(target=reads_then_waits)
    worker.start()
    assert opened.wait(10)
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


def test_a_reader_that_failed_is_replaced_and_the_failure_is_typed(archive: Archive) -> None:
    pointers = [pointer(archive, "doc-1", "text 1")]
    assert read(archive, pointers) == ["text 1"]
    readers = archive.store._readers
    assert readers is not None
    readers.connection().close()  # this thread's reader, broken behind the store's back
    with pytest.raises(StoreUnavailable, match="archive store"):
        read(archive, pointers)
    assert read(archive, pointers) == ["text 1"]  # a fresh connection


def test_an_in_memory_archive_reads_through_the_pool() -> None:
    # An in-memory database is its connection's own: a reader of its own would see none of it.
    archive = Archive.open("sqlite+pysqlite:///:memory:")
    try:
        assert archive.store._readers is None
        assert read(archive, [pointer(archive, "doc-1", "text 1")]) == ["text 1"]
    finally:
        archive.close()


@pytest.mark.postgres
def test_a_postgresql_read_leaves_its_pooled_connection_as_transactions_expect_it(
    pg_migrated_url: str,
) -> None:
    """The single SELECT runs in autocommit (no BEGIN before it, no ROLLBACK after it); the
    connection goes back to the pool out of autocommit, idle, and the next write transaction
    is all or nothing as ever."""
    import psycopg
    from sqlalchemy import func, select

    from mnemo_sea.archive import schema as t

    archive = Archive.open(pg_migrated_url)
    try:
        store = archive.store
        assert store._readers is None  # PostgreSQL connections stay pooled
        pointers = [pointer(archive, "doc-1", "text 1")]
        pool = store.engine.pool
        for _ in range(3):
            assert read(archive, pointers) == ["text 1"]
        fairy = store.engine.raw_connection()
        try:
            driver = fairy.driver_connection
            assert driver.autocommit is False
            assert driver.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        finally:
            fairy.close()
        with pytest.raises(RuntimeError), store.write() as conn:
            conn.execute(t.evidence.update().values(locator="changed"))
            raise RuntimeError("abort after an update")
        with store.read() as conn:
            assert conn.execute(select(t.evidence.c.locator)).scalars().all() != ["changed"]
            assert conn.execute(select(func.count()).select_from(t.evidence)).scalar_one() == 1
        assert pool.checkedout() == 0
    finally:
        archive.close()
