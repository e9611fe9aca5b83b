"""The group commit of the embedded index: a single write is applied at once and marked done
only after the flush that follows it (GROUP_COMMIT_ROWS rows, 1 s, sync, close, or a deletion), on a SQLite
archive and on PostgreSQL (the process owning an embedded index is its only drainer).

Each test reads the outbox table itself, not only the reports: `applied_at` set and `done_at`
empty while a row awaits the flush, both the other way round once it is done. The group commit's
clock and timers are a `ManualClock` given at construction: no flush comes because the machine
was slow (a timer started by the first write runs only when a test advances the clock); one test
runs the real thread timer, and bounds only a hang.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import HashingEmbedder, ManualClock
from sqlalchemy import select

from mnemo_sea.archive import ArchiveTarget, EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.archive.rules.errors import OutboxOwned
from mnemo_sea.archive.rules.limits import BATCH_ITEMS
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.outbox import backlog, pending_count
from mnemo_sea.retrieval.edge_backend import EdgeIndex
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.projection.indexer import GROUP_COMMIT_ROWS, GROUP_COMMIT_SECONDS, GroupCommit
from mnemo_sea.system.wiring.settings import MnemoSettings

AGENT = Principal("gc", "agent", frozenset({Role.AGENT, Role.ADMIN}), Sensitivity.RESTRICTED)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["sqlite", pytest.param("postgres+edge", marks=pytest.mark.postgres)])
def mnemo(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[Mnemo]:
    """The embedded default, and PostgreSQL with an embedded index: this process owns the
    index either way, so it is the only drainer and the group commit applies to both. Timed
    by `clock`: its timer never runs unless a test advances it."""
    if request.param == "sqlite":
        m = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder(), group_commit=clock.group_commit())
    else:
        settings = MnemoSettings(
            database_url=request.getfixturevalue("pg_migrated_url"), index_path=tmp_path / "index"
        )
        m = Mnemo.from_settings(settings, embedder=HashingEmbedder(), group_commit=clock.group_commit())
    try:
        yield m
    finally:
        m.close()


def _rows(m: Mnemo) -> list[tuple[int, bool, bool]]:
    """(id, applied_at set, done_at set) of every outbox row of the writes: the pages of an
    archived original are the trail's, indexed behind them (tests/system/test_original_search.py)."""
    with m.archive.store.read() as conn:
        rows = conn.execute(
            select(t.outbox.c.id, t.outbox.c.applied_at, t.outbox.c.done_at).where(
                t.outbox.c.entity != "result_original"
            )
        )
        return [(r.id, r.applied_at is not None, r.done_at is not None) for r in rows]


def _archive_one(m: Mnemo, session: str, note: str) -> None:
    result = m.record(AGENT, session, "logs.search", f"raw output for {note}")
    m.archive_results(AGENT, session, [ArchiveTarget(result.result_id, note)])


def test_a_single_write_is_searchable_at_once_and_done_only_after_the_flush(mnemo: Mnemo) -> None:
    _archive_one(mnemo, "s1", "quokkanote kept aside")
    rows = _rows(mnemo)
    assert rows and all(applied and not done for _, applied, done in rows)
    assert mnemo.indexer.awaiting_flush == len(rows)
    with mnemo.archive.store.read() as conn:
        assert pending_count(conn, lane="writes") == 0  # applied, not a backlog
        # The backlog is the original's one page, the trail's (not started here).
        assert backlog(conn)[0] == pending_count(conn, lane="trailing") == 1
    assert [h.kind for h in mnemo.search(AGENT, "quokkanote", mode="bm25").hits] == ["tool_result"]
    report = mnemo.sync()
    assert (report.pending, report.awaiting_flush) == (0, 0)
    assert all(not applied and done for _, applied, done in _rows(mnemo))


def test_the_row_bound_forces_the_flush(mnemo: Mnemo) -> None:
    mnemo.indexer.group_commit_rows = 4  # an archive writes 2 rows (the note, a cache purge)
    _archive_one(mnemo, "s1", "first note")
    assert mnemo.indexer.awaiting_flush == 2
    _archive_one(mnemo, "s1", "second note")
    assert mnemo.indexer.awaiting_flush == 0
    assert all(done for _, _, done in _rows(mnemo))


def _batch(first: int, size: int) -> list[EvidenceInput]:
    return [
        EvidenceInput(body=f"ingested record wombat{i}zq", source="kb", evidence_id=f"b:{i}")
        for i in range(first, first + size)
    ]


def test_an_ingest_batch_is_searchable_at_once_and_shares_the_flush(mnemo: Mnemo) -> None:
    report = mnemo.ingest(AGENT, _batch(0, 3))
    assert report.index is not None and (report.index.pending, report.index.failed) == (0, 0)
    rows = _rows(mnemo)
    assert len(rows) == 4  # an upsert per record, one cache purge for the batch
    assert all(applied and not done for _, applied, done in rows)
    assert report.index.awaiting_flush == mnemo.indexer.awaiting_flush == 4
    assert [h.evidence_id for h in mnemo.search(AGENT, "wombat1zq", mode="bm25").hits] == ["b:1"]
    mnemo.ingest(AGENT, _batch(3, 2))
    assert mnemo.indexer.awaiting_flush == 7  # one flush to come for both calls
    assert mnemo.sync().awaiting_flush == 0
    assert all(not applied and done for _, applied, done in _rows(mnemo))


def test_batches_of_the_largest_share_a_flush_eight_by_eight(mnemo: Mnemo) -> None:
    # The default bound: a batch of the archive's largest writes 1,001 rows (an upsert per
    # record, one cache purge), which wait for the next calls'; the eighth batch's reach it.
    assert mnemo.indexer.group_commit_rows == GROUP_COMMIT_ROWS == 8 * (BATCH_ITEMS + 1)
    for k in range(7):
        report = mnemo.ingest(AGENT, _batch(k * BATCH_ITEMS, BATCH_ITEMS))
        assert report.index is not None and report.index.awaiting_flush == (k + 1) * (BATCH_ITEMS + 1)
    assert not any(done for _, _, done in _rows(mnemo))
    eighth = mnemo.ingest(AGENT, _batch(7 * BATCH_ITEMS, BATCH_ITEMS))
    assert eighth.index is not None and eighth.index.awaiting_flush == 0
    assert all(not applied and done for _, applied, done in _rows(mnemo))


def test_a_batch_reaching_the_row_bound_is_flushed_before_the_call_returns(mnemo: Mnemo) -> None:
    mnemo.indexer.group_commit_rows = 6
    mnemo.ingest(AGENT, _batch(0, 2))
    assert mnemo.indexer.awaiting_flush == 3
    report = mnemo.ingest(AGENT, _batch(2, 2))  # 3 more rows: 6 awaiting, the bound
    assert report.index is not None and report.index.awaiting_flush == 0
    assert all(not applied and done for _, applied, done in _rows(mnemo))
    assert [h.evidence_id for h in mnemo.search(AGENT, "wombat3zq", mode="bm25").hits] == ["b:3"]


def test_a_write_after_the_time_bound_flushes_what_waited(mnemo: Mnemo, clock: ManualClock) -> None:
    _archive_one(mnemo, "s1", "first note")
    first = {i for i, _, _ in _rows(mnemo)}
    # As long as a row may wait, and the timer has not run yet (a busy process): the next
    # write's own pass sees the bound passed and flushes.
    clock.now += GROUP_COMMIT_SECONDS
    _archive_one(mnemo, "s1", "second note")
    assert all(done for _, _, done in _rows(mnemo)) and first
    assert mnemo.indexer.awaiting_flush == 0 and clock.armed == 0  # its timer cancelled


def test_the_timer_flushes_without_another_write(mnemo: Mnemo, clock: ManualClock) -> None:
    _archive_one(mnemo, "s1", "timed note")
    assert clock.armed == 1
    clock.advance(GROUP_COMMIT_SECONDS / 2)
    assert mnemo.indexer.awaiting_flush == 2  # not yet due
    assert all(applied and not done for _, applied, done in _rows(mnemo))
    clock.advance(GROUP_COMMIT_SECONDS / 2)
    assert mnemo.indexer.awaiting_flush == 0 and clock.armed == 0
    assert all(not applied and done for _, applied, done in _rows(mnemo))


def test_a_timer_that_runs_after_its_rows_were_flushed_does_nothing(mnemo: Mnemo, clock: ManualClock) -> None:
    """A real timer may already be running when a pass settles its rows (it waits for the
    drain's lock): it must not flush rows a later write left awaiting before their time."""
    _archive_one(mnemo, "s1", "first note")
    (stale,) = [t for t in clock._timers if not t.cancelled]
    mnemo.sync()
    _archive_one(mnemo, "s1", "second note")
    stale.action()  # as if it ran at last
    assert mnemo.indexer.awaiting_flush == 2
    assert sum(applied and not done for _, applied, done in _rows(mnemo)) == 2


def test_the_thread_timer_flushes_without_another_write(tmp_path: Path) -> None:
    """The real timer (a thread): waited for with an event, the bound only ends a hang."""
    m = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder(), group_commit=GroupCommit(seconds=0.05))
    flushed = threading.Event()
    settle = m.indexer._settle

    def watched(*args: object, **kw: object) -> int:
        out = settle(*args, **kw)  # type: ignore[arg-type]
        flushed.set()
        return out

    try:
        m.indexer._settle = watched  # type: ignore[method-assign]
        _archive_one(m, "s1", "timed note")
        assert flushed.wait(120), "the group-commit timer never flushed"
        assert all(done for _, _, done in _rows(m))
    finally:
        m.close()


def test_a_deletion_is_never_deferred_and_settles_what_waited(mnemo: Mnemo) -> None:
    _archive_one(mnemo, "s1", "wombatnote to delete")
    _archive_one(mnemo, "s2", "kept note")
    assert mnemo.indexer.awaiting_flush == 4
    receipt = mnemo.delete_session(AGENT, "s1")
    assert mnemo.indexer.awaiting_flush == 0
    assert all(not applied and done for _, applied, done in _rows(mnemo))
    assert mnemo.verify_deleted(AGENT, receipt).ok
    assert mnemo.search(AGENT, "wombatnote", mode="bm25").hits == ()


@pytest.mark.postgres
def test_a_qdrant_server_index_keeps_flushing_every_pass(pg_migrated_url: str) -> None:
    """Over a Qdrant server several processes drain one outbox (rows claimed with SKIP LOCKED
    in the transaction that marks them done): nothing is deferred, every row is done at once."""
    settings = MnemoSettings(database_url=pg_migrated_url, qdrant_url=":memory:")
    with Mnemo.from_settings(settings, embedder=HashingEmbedder()) as m:
        assert not m.index.owned_by_this_process
        _archive_one(m, "s1", "server note")
        assert m.indexer.awaiting_flush == 0
        assert _rows(m) and all(not applied and done for _, applied, done in _rows(m))


def test_close_settles_and_the_next_open_has_nothing_to_replay(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    clock = ManualClock()
    with Mnemo.open(folder, embedder=HashingEmbedder(), group_commit=clock.group_commit()) as m:
        _archive_one(m, "s1", "closing note")
        assert m.indexer.awaiting_flush == 2
    assert clock.armed == 0  # close cancelled the timer: the rows were flushed by close itself
    with Mnemo.open(folder, embedder=HashingEmbedder()) as m:
        assert all(not applied and done for _, applied, done in _rows(m))
        # The note, and the original's page, which the trail never ran for: the open indexed it.
        labels = sorted(h.label for h in m.search(AGENT, "closing note", mode="bm25").hits)
        assert labels == ["archived original", "archived result note"]


def test_edge_flushes_only_when_something_was_written(tmp_path: Path) -> None:
    edge = EdgeIndex.open(tmp_path / "index", dense_dimension=8)
    try:
        assert not edge.dirty  # a new shard's payload indexes are flushed at creation
        edge.delete_ids([uuid.uuid4()])
        assert edge.dirty
        edge.flush()
        assert not edge.dirty
    finally:
        edge.close()


@pytest.mark.postgres
def test_a_second_process_with_its_own_embedded_index_is_refused(
    pg_migrated_url: str, tmp_path: Path
) -> None:
    """The group commit on PostgreSQL relies on one drainer: a second deployment process with an
    embedded index of its own (another MNEMO_INDEX_PATH, another host) would apply rows to an
    index the first never sees and reset the first one's unflushed rows. It is refused at start,
    and may start once the first has closed (or died: the server drops its session's lock).
    The first one's timer cannot run meanwhile (a manual clock): the rows it holds stay awaiting
    however long the refused start takes."""
    clock = ManualClock()
    first = Mnemo.from_settings(
        MnemoSettings(database_url=pg_migrated_url, index_path=tmp_path / "one"),
        embedder=HashingEmbedder(),
        group_commit=clock.group_commit(),
    )
    second = MnemoSettings(database_url=pg_migrated_url, index_path=tmp_path / "two")
    try:
        _archive_one(first, "s1", "held by the first")
        with pytest.raises(OutboxOwned, match="one such process per database"):
            Mnemo.from_settings(second, embedder=HashingEmbedder())
        assert first.indexer.awaiting_flush == 2 and clock.armed == 1
        assert all(applied and not done for _, applied, done in _rows(first))  # none reclaimed
    finally:
        first.close()
    with Mnemo.from_settings(second, embedder=HashingEmbedder()) as m:
        assert m.index.owned_by_this_process


def test_a_cache_purge_is_applied_without_reading_the_archive(
    mnemo: Mnemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache_purge row reads nothing of the archive, so its drain opens no transaction for it:
    with every read transaction refused, it is applied (the tenant's generation bumped), while
    a row that must read its target does open one (the refusal reaches the caller)."""
    from mnemo_sea.archive.storage.outbox import enqueue_many

    with mnemo.archive.store.write() as conn:
        enqueue_many(conn, [("clinic-a", "cache_purge", "tenant", "clinic-a", {"drop_search": False})])
    before = mnemo.cache.tenant_generation("clinic-a")

    def refused() -> None:
        raise AssertionError("a read transaction was opened")

    monkeypatch.setattr(mnemo.indexer.store, "read", refused)
    report = mnemo.indexer.drain(lane="writes")
    assert (report.applied, report.failed, report.pending) == (1, 0, 0)
    assert mnemo.cache.tenant_generation("clinic-a") == before + 1
    with mnemo.archive.store.write() as conn:
        enqueue_many(conn, [("clinic-a", "index_upsert", "evidence", "doc:9@1", None)])
    with pytest.raises(AssertionError, match="read transaction"):
        mnemo.indexer.drain(lane="writes")
