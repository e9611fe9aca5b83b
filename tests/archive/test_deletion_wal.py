"""Deleted text in SQLite's write-ahead log: a read snapshot held by another process keeps a
checkpoint from copying and emptying the log, so the page images written before the deletion
(the deleted text among them) stay in `archive.db-wal`, and the old pages in `archive.db`.

Until a checkpoint empties the log, the receipt says `erasure: pending_reader` and
`verify_deleted` names the log; once the reader lets go, the next write, `verify_deleted` or
closing the store checkpoints it, and no byte of the text is left in any file. Every claim is
checked on the raw bytes of the files; the other process is sequenced through pipes
(tests/snapshots.py), never by time.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from hits import index_hit
from leftovers import files_holding, new_marker
from snapshots import SnapshotReader

from mnemo_sea.archive import Archive, DeletionReceipt, EvidenceInput, Principal
from mnemo_sea.archive.storage.receipts import receipt_payload


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "data" / "archive.db"


@pytest.fixture
def archive(db_file: Path) -> Iterator[Archive]:
    db_file.parent.mkdir()
    a = Archive.open(str(db_file))
    try:
        yield a
    finally:
        a.close()


def in_both_files(archive: Archive, agent: Principal, db_file: Path, marker: str) -> None:
    """Two versions of a record holding `marker`: the first checkpointed into the file, the second
    only in the log, read back through this thread's reader connection."""
    put = archive.put_evidence
    first = put(agent, EvidenceInput(evidence_id="ev-1", body=f"first {marker}", source="doc"))
    with closing(sqlite3.connect(db_file)) as raw:
        assert raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone() == (0, 0, 0)
    second = put(agent, EvidenceInput(evidence_id="ev-1", body=f"second {marker}", source="doc"))
    assert first.version == 1
    pointer = index_hit(second.evidence_id, second.version, second.kind, 0, 6, second.content_sha256)
    assert [h.snippet for h in archive.read_hits(agent, [pointer], None) if h] == ["second"]
    assert files_holding(db_file.parent, marker) == ["archive.db", "archive.db-wal"]


def test_a_reader_in_another_process_holds_the_erasure_off_and_verify_deleted_says_so(
    archive: Archive, agent: Principal, admin: Principal, db_file: Path
) -> None:
    marker = new_marker()
    in_both_files(archive, agent, db_file, marker)
    with SnapshotReader(db_file) as reader:
        receipt = archive.delete_evidence(admin, "ev-1")
        assert receipt.erasure == "pending_reader"
        # The rows are gone, their bytes are not: the log keeps its page images, the file the
        # pages the reader's snapshot still reads.
        assert files_holding(db_file.parent, marker) == ["archive.db", "archive.db-wal"]
        left = archive.verify_deleted(admin, receipt)
        assert len(left) == 1 and "archive.db-wal" in left[0] and "pending_reader" in left[0], left
        assert files_holding(db_file.parent, marker) == ["archive.db", "archive.db-wal"]

        reader.release()
        assert archive.verify_deleted(admin, receipt) == []  # its checkpoint empties the log now
        assert db_file.with_name("archive.db-wal").stat().st_size == 0
        assert files_holding(db_file.parent, marker) == []


@pytest.mark.parametrize("settled_by", ["the next write", "closing the store"])
def test_the_erasure_owed_completes_once_the_reader_lets_go(
    archive: Archive, agent: Principal, admin: Principal, db_file: Path, settled_by: str
) -> None:
    """The audit's case: the reader ends, and the bytes must go without anyone asking
    `verify_deleted` (they stayed through five more writes, until the last connection closed)."""
    marker = new_marker()
    in_both_files(archive, agent, db_file, marker)
    with SnapshotReader(db_file) as reader:
        receipt = archive.delete_evidence(admin, "ev-1")
        assert receipt.erasure == "pending_reader"
        archive.put_evidence(agent, EvidenceInput(evidence_id="ev-2", body="unrelated", source="doc"))
        assert files_holding(db_file.parent, marker) == ["archive.db", "archive.db-wal"]  # still held
        reader.release()
        if settled_by == "the next write":
            archive.put_evidence(agent, EvidenceInput(evidence_id="ev-3", body="unrelated", source="doc"))
        else:
            # The reader's connection stays open: SQLite's own checkpoint at the last close cannot run.
            archive.close()
        assert files_holding(db_file.parent, marker) == []
        again = Archive.open(str(db_file))
        try:
            assert again.verify_deleted(admin, receipt) == []
        finally:
            again.close()


def test_this_processes_own_readers_never_hold_the_log(
    archive: Archive, agent: Principal, admin: Principal, db_file: Path
) -> None:
    """Reader connections kept per thread (archive/storage/readers.py), here of this thread and of another
    one still alive, hold no snapshot between statements: the deletion's checkpoint empties the log."""
    marker = new_marker()
    in_both_files(archive, agent, db_file, marker)
    done, finish = threading.Event(), threading.Event()
    read: list[bytes | str | None] = []
    released: list[bool] = []

    def read_in_another_thread() -> None:
        try:
            record, content = archive.get_evidence(agent, "ev-1", with_content=True)
            pointer = index_hit(record.evidence_id, record.version, record.kind, 0, 6, record.content_sha256)
            read.extend([content, *(h.snippet for h in archive.read_hits(agent, [pointer], None) if h)])
        finally:
            done.set()
        # Bounded, so a test that never releases the worker fails instead of hanging the run.
        released.append(finish.wait(timeout=120))

    worker = threading.Thread(target=read_in_another_thread)
    worker.start()
    try:
        assert done.wait(timeout=60)
        assert read == [f"second {marker}".encode(), "second"]
        receipt = archive.delete_evidence(admin, "ev-1")
        assert receipt.erasure == "done"
        assert db_file.with_name("archive.db-wal").stat().st_size == 0
        assert files_holding(db_file.parent, marker) == []
    finally:
        finish.set()
        worker.join(timeout=120)
    # A hang guard, not a speed check: the worker was released and ended.
    assert not worker.is_alive() and released == [True]


def test_the_erasure_state_is_not_signed_so_every_receipt_verifies(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    """`erasure` says what the files held when the call returned, not what was deleted: it is left
    out of the signed payload, so receipts issued before it existed verify, and one whose state
    has changed since (or was edited) still proves its deletion."""
    archive.put_evidence(agent, EvidenceInput(evidence_id="ev-1", body="text", source="doc"))
    receipt = archive.delete_evidence(admin, "ev-1")
    assert "erasure" not in receipt_payload(receipt)
    for state in ("done", "pending_reader"):
        edited = DeletionReceipt(**{**receipt.__dict__, "erasure": state})
        assert archive.verify_deleted(admin, edited) == []


def test_an_archive_opened_by_a_uri_filename_reads_its_own_log(
    tmp_path: Path, agent: Principal, admin: Principal
) -> None:
    """A SQLite URL naming its file as a URI (`file:…?uri=true`) still finds the log beside it:
    with the log's path unknown, a checkpoint a reader held would have read as done (no file, no
    bytes) and the receipt would have said `erasure: done` over the text in the log."""
    db_file = tmp_path / "data" / "archive.db"
    db_file.parent.mkdir()
    Archive.open(str(db_file)).close()  # the folder's key and database, made as a new folder is
    archive = Archive.open(f"sqlite+pysqlite:///file:{db_file}?uri=true")
    try:
        assert archive.store.log_path == db_file.with_name("archive.db-wal")
        marker = new_marker()
        in_both_files(archive, agent, db_file, marker)
        with SnapshotReader(db_file) as reader:
            receipt = archive.delete_evidence(admin, "ev-1")
            assert receipt.erasure == "pending_reader"
            reader.release()
            assert archive.verify_deleted(admin, receipt) == []
        assert files_holding(db_file.parent, marker) == []
    finally:
        archive.close()
