"""Search over archived originals: an archived result's original is indexed in pages behind the
write, found by its text and by its call, and its hits name the original's lines and bytes.

The trail (the thread indexing pages behind the writes) is started through the group commit's
trail starter, so these tests run it when they choose (`ManualClock.run_trails`) and can look
at the moment between the archive and its pages. The state is read raw: outbox rows, index
points of every version of the result's index id, the blob re-hashed.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import HashingEmbedder, ManualClock
from sqlalchemy import func, select

from mnemo_sea.archive import ArchiveTarget, Principal, Role, Sensitivity
from mnemo_sea.archive.rules.original_pages import PAGE_BYTES, page_count
from mnemo_sea.archive.rules.refs import result_index_id
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.blobs import read_blob
from mnemo_sea.archive.storage.rows import archived_notes
from mnemo_sea.retrieval.filters import evidence_filter, tenant_filter
from mnemo_sea.system.fsck import run_fsck
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.projection import indexer as indexer_module
from mnemo_sea.system.projection.index_documents import page_document
from mnemo_sea.system.wiring.settings import MnemoSettings

AGENT = Principal("clinic-a", "agent-1", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
ADMIN = Principal("clinic-a", "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
# A user of the same tenant: reads sessions about itself only.
OWNER_B = Principal("clinic-a", "owner-b", frozenset({Role.READER}), Sensitivity.RESTRICTED)
OTHER_TENANT = Principal("shop-b", "admin-9", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)

real_thread_trail = indexer_module.thread_trail  # before the suite's fixture replaces it

FACT = "ERROR payment gateway zephyrine timeout on invoice INV-88231"


def log_text(lines: int = 5_000, fact_at: int = 3_210) -> str:
    """A log of `lines` lines (several pages), one of which (line fact_at + 1) holds FACT."""
    rows = [f"2026-12-01 10:{i % 60:02d} INFO worker {i} processed batch ok" for i in range(lines)]
    rows[fact_at] = f"2026-12-01 11:11 {FACT}"
    return "\n".join(rows) + "\n"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def mnemo(tmp_path: Path, clock: ManualClock) -> Iterator[Mnemo]:
    m = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder(), group_commit=clock.group_commit())
    try:
        yield m
    finally:
        m.close()


def archive_log(m: Mnemo, session: str = "s1", text: str | None = None) -> tuple[str, str]:
    body = log_text() if text is None else text
    rid = m.record(
        AGENT, session, "bash", body, arguments={"command": "cat /var/log/payments-eu.log"}
    ).result_id
    m.record(AGENT, session, "notes", "next: check the refunds")
    m.archive_results(AGENT, session, [ArchiveTarget(rid, "a payment worker log")])
    return rid, body


def pending_pages(m: Mnemo) -> int:
    with m.archive.store.read() as conn:
        return int(
            conn.execute(
                select(func.count()).where(
                    t.outbox.c.entity == "result_original",
                    t.outbox.c.done_at.is_(None),
                    t.outbox.c.applied_at.is_(None),
                )
            ).scalar_one()
        )


def points(m: Mnemo, tenant: str, session: str, rid: str) -> dict[int, int]:
    """Points of every version of the result's index id: version -> chunks."""
    out: dict[int, int] = {}
    for p in m.index.points_matching(evidence_filter(tenant, result_index_id(session, rid))):
        out[p.version] = out.get(p.version, 0) + 1
    return out


def test_an_original_becomes_searchable_behind_the_archive_and_search_says_until_then(
    mnemo: Mnemo, clock: ManualClock
) -> None:
    rid, text = archive_log(mnemo)
    pages = page_count(len(text.encode()))
    assert pages > 3
    # The archive call indexed the note only: every page waits in the trailing lane.
    assert pending_pages(mnemo) == pages
    assert points(mnemo, "clinic-a", "s1", rid) == {1: 1}
    before = mnemo.search(AGENT, "zephyrine INV-88231")
    assert before.pending_originals == 1
    assert all(h.label != "archived original" for h in before.hits)

    assert mnemo.search(AGENT, "zephyrine INV-88231").cached  # a page filed before the trail ran
    clock.run_trails()  # the trail runs: one page per pass
    assert pending_pages(mnemo) == 0
    assert set(points(mnemo, "clinic-a", "s1", rid)) == {1, *range(2, 2 + pages)}
    assert not mnemo.search(AGENT, "zephyrine INV-88231").cached  # the pages made it stale
    after = mnemo.search(AGENT, "zephyrine INV-88231", limit=3)
    assert after.pending_originals == 0
    hit = after.hits[0]
    assert (hit.label, hit.locator, hit.kind) == ("archived original", f"s1/{rid}", "archived_original")
    assert FACT in hit.snippet
    # The hit names the original's bytes and lines it quotes: exactly the snippet.
    assert hit.byte_range is not None and hit.lines is not None
    start, end = hit.byte_range
    assert text.encode()[start:end].decode() == hit.snippet
    first, last = hit.lines
    assert first <= 3_211 <= last
    lines = text.splitlines()
    assert lines[first - 1].endswith(hit.snippet.splitlines()[0])  # the snippet starts on `first`
    assert lines[last - 1].startswith(hit.snippet.splitlines()[-1])  # and ends on `last`
    # recover takes them as they are, and brings back those lines only.
    copy = mnemo.recover(AGENT, "s1", rid, lines=hit.lines)
    assert copy.content.decode().splitlines() == text.splitlines()[first - 1 : last]


def test_the_call_is_searched_with_every_page(mnemo: Mnemo, clock: ManualClock) -> None:
    archive_log(mnemo)
    clock.run_trails()
    # The path is in the arguments only, never in the log's text or the note.
    found = mnemo.search(AGENT, "payments-eu.log", limit=5)
    assert any(h.label == "archived original" for h in found.hits), found.hits


def test_a_chinese_original_is_found_by_a_word_in_its_middle(mnemo: Mnemo, clock: ManualClock) -> None:
    rows = [f"第{i}行：库存正常，无异常" for i in range(4_000)]
    rows[2_500] = "阿莫西林 500mg 库存告急：仅剩 3 盒，供应商延迟到 12 月 9 日"
    text = "\n".join(rows) + "\n"
    rid, _ = archive_log(mnemo, text=text)
    clock.run_trails()
    hit = mnemo.search(AGENT, "阿莫西林 库存告急", limit=3).hits[0]
    assert hit.label == "archived original" and "阿莫西林 500mg" in hit.snippet
    assert hit.byte_range is not None
    assert text.encode()[hit.byte_range[0] : hit.byte_range[1]].decode() == hit.snippet
    assert hit.lines is not None and hit.lines[0] <= 2_501 <= hit.lines[1]
    assert mnemo.recover(AGENT, "s1", rid, byte_range=hit.byte_range).content.decode() == hit.snippet


def test_no_other_tenant_or_reader_finds_the_original(mnemo: Mnemo, clock: ManualClock) -> None:
    rid, _ = archive_log(mnemo)
    assert mnemo.search(OTHER_TENANT, "zephyrine").pending_originals == 0  # not even counted
    assert mnemo.search(OWNER_B, "zephyrine").pending_originals == 0
    clock.run_trails()
    for who in (OTHER_TENANT, OWNER_B):
        found = mnemo.search(who, "zephyrine INV-88231 payments-eu.log", limit=10)
        assert [h for h in found.hits if h.locator == f"s1/{rid}"] == [], who
    # In the raw index: every point of the original is the tenant's, none of another's.
    assert mnemo.index.count_matching(tenant_filter("shop-b")) == 0
    # Before the archiving, the original did not exist as a search result.
    wound_back = mnemo.search(AGENT, "zephyrine", as_of=mnemo_archived_at(mnemo) - timedelta(seconds=1))
    assert [h for h in wound_back.hits if h.locator == f"s1/{rid}"] == []


def test_a_reader_who_owns_the_session_finds_its_notes_never_its_originals(
    mnemo: Mnemo, clock: ManualClock
) -> None:
    # A reader reads the notes of sessions about itself but may not recover their originals:
    # their pages are left out in the index, so they neither crowd out the notes nor show in
    # `dropped` (which would tell the reader a word it may not read is in an original).
    rows = [f"2026-12-01 10:{i % 60:02d} INFO zephyrine worker {i} ok" for i in range(4_000)]
    body = "\n".join(rows) + "\n"
    rid = mnemo.record(AGENT, "s1", "bash", body, owner="owner-b").result_id
    mnemo.record(AGENT, "s1", "notes", "next: check the refunds", owner="owner-b")
    mnemo.archive_results(AGENT, "s1", [ArchiveTarget(rid, "zephyrine worker log, all ok")])
    clock.run_trails()
    pages = points(mnemo, "clinic-a", "s1", rid)
    assert len(pages) == 1 + page_count(len(body.encode())), pages  # the index does hold them
    found = mnemo.search(OWNER_B, "zephyrine worker", limit=3)
    assert [(h.label, h.locator) for h in found.hits] == [("archived result note", f"s1/{rid}")]
    assert found.dropped == 0
    refused = mnemo.search(OWNER_B, "zephyrine", kinds=["archived_original"])
    assert refused.status == "forbidden" and "agent role" in refused.reason
    # No kind at all is a mistake, for a reader as for an agent, not a refusal.
    assert mnemo.search(OWNER_B, "zephyrine", kinds=[]).status == "invalid"
    assert mnemo.search(AGENT, "zephyrine", kinds=[]).status == "invalid"
    agent_sees = mnemo.search(AGENT, "zephyrine worker", limit=3, kinds=["archived_original"])
    assert [h.kind for h in agent_sees.hits] == ["archived_original"] * 3


def mnemo_archived_at(m: Mnemo):  # type: ignore[no-untyped-def]
    with m.archive.store.read() as conn:
        return conn.execute(select(t.archive_entries.c.archived_at)).scalar_one()


@pytest.mark.parametrize("indexed_first", [True, False], ids=["indexed", "still-pending"])
def test_deleting_the_session_removes_every_page(
    mnemo: Mnemo, clock: ManualClock, indexed_first: bool
) -> None:
    rid, _ = archive_log(mnemo)
    if indexed_first:
        clock.run_trails()
        assert len(points(mnemo, "clinic-a", "s1", rid)) > 2
    receipt = mnemo.delete_session(ADMIN, "s1")
    # The deletion itself marks the pages' rows done: none waits for the trail to find it gone.
    assert pending_pages(mnemo) == 0
    clock.run_trails()  # a trail started before the deletion runs after it: it finds nothing to index
    assert points(mnemo, "clinic-a", "s1", rid) == {}
    assert pending_pages(mnemo) == 0
    with mnemo.archive.store.read() as conn:
        left = conn.execute(
            select(t.outbox.c.payload_json).where(
                t.outbox.c.entity == "result_original", t.outbox.c.payload_json != "{}"
            )
        ).all()
    assert left == []  # the pages' rows are named by their page and hold nothing
    check = mnemo.verify_deleted(ADMIN, receipt)
    assert check.ok, check
    assert mnemo.search(AGENT, "zephyrine").hits == ()


def test_fsck_finds_missing_pages_and_repairs_them_from_the_archive(mnemo: Mnemo, clock: ManualClock) -> None:
    rid, _ = archive_log(mnemo)
    clock.run_trails()
    mnemo.sync()
    assert run_fsck(mnemo).ok
    mnemo.index.delete("clinic-a", result_index_id("s1", rid), 3)  # lose one page
    report = run_fsck(mnemo)
    assert [(p.kind, p.ref) for p in report.problems] == [("missing_point", f"result:s1/{rid}@3")]
    assert run_fsck(mnemo, repair=True).ok
    assert 3 in points(mnemo, "clinic-a", "s1", rid)
    # A page indexed before pages had a kind of their own (tool_result, as the note) is stale.
    with mnemo.archive.store.read() as conn:
        (note,) = archived_notes(conn, "clinic-a", [("s1", 1)])
        content = read_blob(conn, "clinic-a", note.content_sha256)
    old = page_document("clinic-a", note, content, 1)
    assert old is not None
    mnemo.index.upsert([dataclasses.replace(old, kind="tool_result")])
    mnemo.index.flush()
    report = run_fsck(mnemo)
    assert [(p.kind, p.ref) for p in report.problems] == [("stale_point", f"result:s1/{rid}@3")]
    assert run_fsck(mnemo, repair=True).ok
    indexed = mnemo.index.points_matching(evidence_filter("clinic-a", result_index_id("s1", rid)))
    kinds = {p.kind for p in indexed}
    assert kinds == {"tool_result", "archived_original"}


def test_a_corrupt_original_is_never_quoted(mnemo: Mnemo, clock: ManualClock) -> None:
    _rid, text = archive_log(mnemo)
    clock.run_trails()
    mnemo.sync()
    with mnemo.archive.store.write() as conn:
        conn.execute(t.blobs.update().values(content=text.replace("zephyrine", "ZEPHYRINE").encode()))
    found = mnemo.search(AGENT, "zephyrine INV-88231", limit=5)
    assert [h for h in found.hits if h.label == "archived original"] == []
    assert any(p.kind == "blob_hash" for p in run_fsck(mnemo).problems)


@pytest.mark.parametrize("rows", [1, 4])  # pages per pass: a failure among applied rows too
def test_a_page_that_fails_is_passed_over_and_the_next_originals_are_indexed(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    monkeypatch.setattr(indexer_module, "TRAIL_PASS_PAGES", rows)
    first, _ = archive_log(mnemo, "s1")
    # The first original's first page row names a page no original has: applying it fails.
    with mnemo.archive.store.write() as conn:
        row = conn.execute(
            select(func.min(t.outbox.c.id)).where(t.outbox.c.entity == "result_original")
        ).scalar_one()
        conn.execute(t.outbox.update().where(t.outbox.c.id == row).values(entity_ref=f"s1/{first}#x"))
    second, _ = archive_log(mnemo, "s2")
    clock.run_trails()  # one round: the second archive asked while the first's was waiting
    # Every other page of both originals is indexed; the bad row is pending, tried once a round.
    assert set(points(mnemo, "clinic-a", "s2", second)) == {1, *range(2, 2 + page_count(len(log_text())))}
    assert len(points(mnemo, "clinic-a", "s1", first)) == page_count(len(log_text()))  # note, not page 0
    with mnemo.archive.store.read() as conn:
        failed = conn.execute(
            select(t.outbox.c.attempts, t.outbox.c.done_at, t.outbox.c.last_error).where(t.outbox.c.id == row)
        ).one()
    assert failed.attempts == 1 and failed.done_at is None and "#x" in failed.last_error
    assert pending_pages(mnemo) == 1


def test_a_drain_during_an_archive_leaves_search_saying_originals_may_be_pending(
    mnemo: Mnemo, clock: ManualClock
) -> None:
    clock.run_trails()
    mnemo.sync()
    assert not mnemo.indexer.trail_may_be_pending  # the lane is empty and no archive under way
    # A drain that reads the lane empty while an archive is under way (its pages not yet
    # committed) must not clear the flag: the pages it commits next would go unreported.
    with mnemo.indexer.filling_trail():
        assert mnemo.indexer.drain(lane="trailing").pending == 0
        assert mnemo.indexer.trail_may_be_pending
    assert mnemo.indexer.trail_may_be_pending  # the write started during the drain
    archive_log(mnemo)
    assert mnemo.search(AGENT, "zephyrine").pending_originals == 1
    clock.run_trails()
    assert not mnemo.indexer.trail_may_be_pending
    assert mnemo.search(AGENT, "zephyrine").pending_originals == 0


def test_opening_leaves_pages_to_the_trail(tmp_path: Path) -> None:
    first = ManualClock()
    m = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder(), group_commit=first.group_commit())
    rid, body = archive_log(m)
    m.close()  # before the trail ran: every page is pending
    later = ManualClock()
    m = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder(), group_commit=later.group_commit())
    try:
        # The open replayed the writes and started the trail, which indexes the pages behind it.
        assert pending_pages(m) == page_count(len(body.encode())) and len(later.trails) == 1
        assert m.search(AGENT, "zephyrine").pending_originals == 1
        later.run_trails()
        assert pending_pages(m) == 0
        assert len(points(m, "clinic-a", "s1", rid)) == 1 + page_count(len(body.encode()))
    finally:
        m.close()


def test_a_trail_that_could_not_start_is_started_by_the_next_write(mnemo: Mnemo, clock: ManualClock) -> None:
    starts: list[int] = []

    def no_thread(run: object) -> None:
        starts.append(1)
        raise RuntimeError("can't start new thread")

    clock.run_trails()  # the open's, so the next write starts one
    mnemo.indexer._start_trail = no_thread
    rid, body = archive_log(mnemo, "s1")  # the archive stands; its pages wait
    assert pending_pages(mnemo) == page_count(len(body.encode())) and starts == [1]
    mnemo.indexer._start_trail = clock.trails.append
    archive_log(mnemo, "s2")
    clock.run_trails()
    assert pending_pages(mnemo) == 0
    assert len(points(mnemo, "clinic-a", "s1", rid)) == 1 + page_count(len(body.encode()))


def test_binary_originals_and_recovered_copies_index_no_pages(mnemo: Mnemo, clock: ManualClock) -> None:
    blob = bytes(range(256)) * (PAGE_BYTES // 64)
    rid = mnemo.record(AGENT, "s2", "fetch", blob, media_type="application/octet-stream").result_id
    copied = mnemo.record(AGENT, "s2", "bash", log_text(400, fact_at=100)).result_id
    mnemo.record(AGENT, "s2", "notes", "next")
    mnemo.archive_results(AGENT, "s2", [ArchiveTarget(copied, "a short log")])
    copy = mnemo.recover(AGENT, "s2", copied).appended.result_id
    mnemo.record(AGENT, "s2", "notes", "later")
    mnemo.archive_results(AGENT, "s2", [ArchiveTarget(rid, "a binary"), ArchiveTarget(copy, "the copy")])
    clock.run_trails()
    mnemo.sync()
    assert points(mnemo, "clinic-a", "s2", rid) == {1: 1}  # the note only
    assert points(mnemo, "clinic-a", "s2", copy) == {1: 1}  # its source's pages are the original's
    assert set(points(mnemo, "clinic-a", "s2", copied)) >= {1, 2}
    assert run_fsck(mnemo).ok


def test_a_write_between_pages_waits_for_one_page_not_the_original(mnemo: Mnemo, clock: ManualClock) -> None:
    """The writes' drain never takes a page: pages are the trail's, a page per pass."""
    archive_log(mnemo)
    pages = pending_pages(mnemo)
    mnemo.record(AGENT, "s1", "notes", "another write")  # its drain leaves every page
    assert pending_pages(mnemo) == pages
    report = mnemo.indexer.drain(1, lane="trailing")
    assert report.applied == 1 and report.pending == pages - 1


def test_a_write_arriving_during_a_page_is_applied_before_the_next_page(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass of the trail may take many pages, and a call of the index several, but a write
    that comes while one is embedded waits for that page only: the call writes it and returns,
    the pass ends, and the trail lets the write in first."""
    from mnemo_sea.archive import EvidenceInput

    assert indexer_module.TRAIL_PASS_PAGES > 2 and indexer_module.TRAIL_PAGES_PER_CALL > 2
    rid, _ = archive_log(mnemo)
    pages = page_count(len(log_text().encode()))
    assert pages > indexer_module.TRAIL_PAGES_PER_CALL  # more than one call
    indexer = mnemo.indexer
    index, upsert = indexer.index, indexer.index.upsert
    calls: list[tuple[str, int, int]] = []  # each upsert: its kind, documents handed, written
    writers: list[threading.Thread] = []

    def write() -> None:
        mnemo.ingest(
            AGENT, [EvidenceInput(body="refund window is 30 days", source="policy", evidence_id="p-1")]
        )

    def watched(documents: Any, **kwargs: Any) -> Any:
        if documents[0].kind == "archived_original" and not writers:
            writers.append(threading.Thread(target=write))
            writers[0].start()
            with indexer._turns:  # the write's drain waits for the indexer the trail holds
                indexer._turns.wait_for(lambda: indexer._waiting == 1)
        report = upsert(documents, **kwargs)
        calls.append((documents[0].kind, len(documents), report.documents))
        return report

    monkeypatch.setattr(index, "upsert", watched)
    clock.run_trails()
    writers[0].join()
    per_call = indexer_module.TRAIL_PAGES_PER_CALL
    rest = [min(per_call, pages - 1 - start) for start in range(0, pages - 1, per_call)]
    assert calls == [
        ("archived_original", per_call, 1),  # handed a call's pages, it stopped after the first
        ("knowledge", 1, 1),
        *[("archived_original", n, n) for n in rest],
    ]
    assert pending_pages(mnemo) == 0
    assert set(points(mnemo, "clinic-a", "s1", rid)) == {1, *range(2, 2 + pages)}  # the note, every page


@pytest.mark.postgres
def test_pages_are_indexed_and_deleted_on_postgresql_and_the_qdrant_client(
    pg_migrated_url: str, redis_url: str, redis_prefix: str
) -> None:
    settings = MnemoSettings(
        database_url=pg_migrated_url, qdrant_url=":memory:", redis_url=redis_url, redis_prefix=redis_prefix
    )
    clock = ManualClock()
    with Mnemo.from_settings(settings, embedder=HashingEmbedder(), group_commit=clock.group_commit()) as m:
        rid, text = archive_log(m)
        assert m.search(AGENT, "zephyrine").pending_originals == 1
        clock.run_trails()
        hit = m.search(AGENT, "zephyrine INV-88231", limit=3).hits[0]
        assert hit.label == "archived original" and hit.byte_range is not None
        assert text.encode()[hit.byte_range[0] : hit.byte_range[1]].decode() == hit.snippet
        receipt = m.delete_session(ADMIN, "s1")
        assert points(m, "clinic-a", "s1", rid) == {}
        assert m.verify_deleted(ADMIN, receipt).ok


def test_the_real_trail_is_a_thread_that_indexes_the_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread itself (the suite runs the trail inline): each round's end is signalled, the
    bound only ends a hang. Watched from before the open, whose replay starts a round: on a
    busy machine that round may still run when the archive asks for one, and then does it."""
    monkeypatch.setattr(indexer_module, "thread_trail", real_thread_trail)
    rounds_ended = threading.Semaphore(0)
    trail_threads: list[threading.Thread] = []
    run = indexer_module.Indexer._run_trail

    def watched(self: Any) -> None:
        trail_threads.append(threading.current_thread())
        run(self)
        rounds_ended.release()

    monkeypatch.setattr(indexer_module.Indexer, "_run_trail", watched)
    m = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())
    try:
        rid, text = archive_log(m)
        # A round ending with pages still pending began before they were enqueued; the archive
        # asked for another, whose end comes next.
        while pending_pages(m):
            assert rounds_ended.acquire(timeout=120), "the trail never ran"
        assert trail_threads and threading.main_thread() not in trail_threads
        assert len(points(m, "clinic-a", "s1", rid)) == 1 + page_count(len(text.encode()))
        assert m.search(AGENT, "zephyrine INV-88231", limit=1).hits[0].label == "archived original"
    finally:
        m.close()


def test_a_page_written_while_its_result_was_deleted_elsewhere_is_removed(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With several drainers (PostgreSQL), a deletion may commit, and another drainer remove the
    result's points, while this one embeds a page: the page must not outlive the deletion. The
    race is made deterministic here: the deletion and the other drainer's removal run inside the
    page's upsert, before its points are written."""
    rid, _ = archive_log(mnemo)
    index, upsert = mnemo.indexer.index, mnemo.indexer.index.upsert
    raced: list[str] = []

    def upsert_after_a_deletion(documents: Any, **kwargs: Any) -> Any:
        if not raced and any(d.kind == "archived_original" for d in documents):
            raced.append(mnemo.archive.delete_session(ADMIN, "s1").target)
            index.delete("clinic-a", result_index_id("s1", rid))  # the other drainer's pass
        return upsert(documents, **kwargs)

    monkeypatch.setattr(index, "upsert", upsert_after_a_deletion)
    clock.run_trails()  # the trailing lane only: the deletion's own row is not drained here
    assert raced
    assert points(mnemo, "clinic-a", "s1", rid) == {}


def test_the_worker_applies_a_write_queued_behind_pages_in_its_first_pass(
    mnemo: Mnemo, clock: ManualClock
) -> None:
    """Server mode's worker applies the outbox: a write queued after a large original's pages
    is applied in the worker's next pass, not after every page is embedded."""
    from mnemo_sea.archive import EvidenceInput
    from mnemo_sea.system.worker import run_worker

    rid, body = archive_log(mnemo)
    pages = page_count(len(body.encode()))
    mnemo.sync_writes = False  # as in server mode: the worker applies the outbox
    mnemo.ingest(AGENT, [EvidenceInput(body="refund window is 30 days", source="policy", evidence_id="p-1")])
    stop = threading.Event()

    class OnePass:  # the worker's heartbeat after each pass: stop after the first
        def touch(self) -> None:
            stop.set()

    stats = run_worker(mnemo, stop, poll_seconds=0, batch=2, heartbeat=OnePass(), purge_seconds=None)  # type: ignore[arg-type]
    assert stats.passes == 1
    assert mnemo.search(AGENT, "refund window", kinds=["knowledge"]).hits[0].evidence_id == "p-1"
    assert pending_pages(mnemo) == pages - 1  # one page with the write, the rest behind it
    assert len(points(mnemo, "clinic-a", "s1", rid)) == 2  # the note and that page


def _page_rows(m: Mnemo) -> list[tuple[bool, bool]]:
    """(applied_at set, done_at set) of every page row."""
    with m.archive.store.read() as conn:
        rows = conn.execute(
            select(t.outbox.c.applied_at, t.outbox.c.done_at).where(t.outbox.c.entity == "result_original")
        )
        return [(r.applied_at is not None, r.done_at is not None) for r in rows]


def test_the_trail_flushes_its_pages_at_the_end_of_its_round_not_on_the_writes_timer(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group commit's time bound is the writes': the trail's rows, applied, wait for the end
    of its round (a crash would only make the next open's trail apply them again)."""
    monkeypatch.setattr(indexer_module, "TRAIL_PASS_PAGES", 1)  # a pass per page: many chances to flush
    archive_log(mnemo)
    clock.advance(indexer_module.GROUP_COMMIT_SECONDS)  # the archive call's own rows flushed
    assert mnemo.indexer.awaiting_flush == 0 and clock.armed == 0
    index, upsert, flush = mnemo.indexer.index, mnemo.indexer.index.upsert, mnemo.indexer.index.flush
    seen: list[tuple[int, int]] = []  # at each page: (rows awaiting the flush, timers armed)
    flushes: list[int] = []

    def watched(documents: Any, **kwargs: Any) -> Any:
        seen.append((mnemo.indexer.awaiting_flush, clock.armed))
        clock.now += indexer_module.GROUP_COMMIT_SECONDS  # a slow page: the writes' bound passes
        return upsert(documents, **kwargs)

    monkeypatch.setattr(index, "upsert", watched)
    monkeypatch.setattr(index, "flush", lambda: flushes.append(1) or flush())
    clock.run_trails()
    pages = page_count(len(log_text().encode()))
    assert pages < indexer_module.TRAIL_FLUSH_PAGES
    assert seen == [(n, 0) for n in range(pages)]  # no timer, nothing flushed until the round ended
    assert len(flushes) == 1 and mnemo.indexer.awaiting_flush == 0
    assert _page_rows(mnemo) == [(False, True)] * pages


def test_the_last_pass_of_a_round_writes_its_pages_done_with_its_flush(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass that took the last pages of the lane ends the round: it flushes and writes its
    pages done at once, never applied first; an earlier pass's pages are written applied, and
    done by that same flush."""
    pages = page_count(len(log_text().encode()))
    assert pages > 2
    monkeypatch.setattr(indexer_module, "TRAIL_PASS_PAGES", pages - 1)  # two passes, the last of one page
    archive_log(mnemo)
    clock.advance(indexer_module.GROUP_COMMIT_SECONDS)
    applied: list[int] = []
    flushes: list[int] = []
    mark, flush = indexer_module.mark_applied, mnemo.indexer.index.flush
    monkeypatch.setattr(
        indexer_module, "mark_applied", lambda conn, ids: applied.extend(ids) or mark(conn, ids)
    )
    monkeypatch.setattr(mnemo.indexer.index, "flush", lambda: flushes.append(len(applied)) or flush())
    with mnemo.archive.store.read() as conn:
        page_ids = list(
            conn.execute(select(t.outbox.c.id).where(t.outbox.c.entity == "result_original")).scalars()
        )
    clock.run_trails()
    assert sorted(applied) == sorted(page_ids)[: pages - 1]  # the first pass's, not the last page
    assert flushes == [pages - 1]  # one flush, after the first pass was written applied
    assert _page_rows(mnemo) == [(False, True)] * pages and mnemo.indexer.awaiting_flush == 0


def test_a_write_waiting_when_the_last_pass_ends_goes_before_the_rounds_flush(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flush (tens of milliseconds) that ends a round is left until a write that waits for
    the indexer has been applied: it waited for one page, not for the flush besides."""
    from mnemo_sea.archive import EvidenceInput

    monkeypatch.setattr(indexer_module, "TRAIL_PAGES_PER_CALL", 1)
    pages = page_count(len(log_text().encode()))
    assert 1 < pages <= indexer_module.TRAIL_PASS_PAGES  # one pass
    archive_log(mnemo)
    clock.advance(indexer_module.GROUP_COMMIT_SECONDS)
    indexer = mnemo.indexer
    index, upsert, flush = indexer.index, indexer.index.upsert, indexer.index.flush
    events: list[str] = []
    writers: list[threading.Thread] = []

    def write() -> None:
        policy = EvidenceInput(body="refund window is 30 days", source="policy", evidence_id="p-1")
        mnemo.ingest(AGENT, [policy])

    def watched(documents: Any, **kwargs: Any) -> Any:
        kind = documents[0].kind
        if kind == "archived_original" and events.count(kind) == pages - 1:  # the last page
            writers.append(threading.Thread(target=write))
            writers[0].start()
            with indexer._turns:  # its drain waits for the indexer the trail holds
                indexer._turns.wait_for(lambda: indexer._waiting == 1)
        events.append(kind)
        return upsert(documents, **kwargs)

    monkeypatch.setattr(index, "upsert", watched)
    monkeypatch.setattr(index, "flush", lambda: events.append("flush") or flush())
    clock.run_trails()
    writers[0].join()
    assert events == ["archived_original"] * pages + ["knowledge", "flush"]
    assert _page_rows(mnemo) == [(False, True)] * pages and pending_pages(mnemo) == 0


def test_the_trail_flushes_every_trail_flush_pages_pages(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound on what a crash makes the trail re-embed: a flush once that many pages await."""
    monkeypatch.setattr(indexer_module, "TRAIL_PASS_PAGES", 1)
    monkeypatch.setattr(indexer_module, "TRAIL_FLUSH_PAGES", 2)
    archive_log(mnemo)
    clock.advance(indexer_module.GROUP_COMMIT_SECONDS)
    index, upsert = mnemo.indexer.index, mnemo.indexer.index.upsert
    awaiting: list[int] = []

    def watched(documents: Any, **kwargs: Any) -> Any:
        awaiting.append(mnemo.indexer.awaiting_flush)
        return upsert(documents, **kwargs)

    monkeypatch.setattr(index, "upsert", watched)
    clock.run_trails()
    pages = page_count(len(log_text().encode()))
    assert pages > 2
    assert awaiting == [n % 2 for n in range(pages)]
    assert _page_rows(mnemo) == [(False, True)] * pages and clock.armed == 0


def test_a_write_during_the_trail_flushes_on_its_timer_with_the_pages_applied_so_far(
    mnemo: Mnemo, clock: ManualClock
) -> None:
    """A write's rows keep their time bound while the trail runs; its flush takes the trail's
    applied rows along (marked done with it)."""
    archive_log(mnemo)
    clock.advance(indexer_module.GROUP_COMMIT_SECONDS)
    trail = clock.trails.pop()
    mnemo.indexer.drain(2, defer_flush=True, lane="trailing")  # two pages, as a pass of the trail
    assert clock.armed == 0 and mnemo.indexer.awaiting_flush == 2
    rid = mnemo.record(AGENT, "s2", "notes", "a write between pages").result_id
    mnemo.archive_results(AGENT, "s2", [ArchiveTarget(rid, "a short note")])
    assert clock.armed == 1
    clock.advance(indexer_module.GROUP_COMMIT_SECONDS)
    assert mnemo.indexer.awaiting_flush == 0
    assert _page_rows(mnemo).count((False, True)) == 2
    trail()
    assert pending_pages(mnemo) == 0 and mnemo.indexer.awaiting_flush == 0
    assert set(_page_rows(mnemo)) == {(False, True)}


def test_a_pass_reads_the_note_before_and_after_its_pages_and_bumps_the_cache_once(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its bookkeeping is per pass, not per page; a search cached before the pass finds the
    pages after it (the one bump follows the last page)."""
    from mnemo_sea.archive.internal_reads import InternalReads

    archive_log(mnemo)
    before = mnemo.search(AGENT, "zephyrine INV-88231")  # cached: the pages are not indexed yet
    assert all(hit.label != "archived original" for hit in before.hits)
    reads: list[Any] = []
    bumps: list[str] = []
    read = InternalReads.archived_note
    bump = mnemo.cache.bump_generation
    monkeypatch.setattr(InternalReads, "archived_note", lambda self, *a: reads.append(a) or read(self, *a))
    monkeypatch.setattr(mnemo.cache, "bump_generation", lambda tenant: bumps.append(tenant) or bump(tenant))
    clock.run_trails()
    pages = page_count(len(log_text().encode()))
    assert 1 < pages <= indexer_module.TRAIL_PASS_PAGES  # one pass
    assert len(reads) == 2 and bumps == ["clinic-a"]
    after = mnemo.search(AGENT, "zephyrine INV-88231")
    assert not after.cached and after.hits[0].label == "archived original"


def test_a_sync_builds_the_pages_a_pass_of_the_trail_at_a_time(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sync()` claims every pending page at once; their documents are built (and the note read
    before and after) TRAIL_PASS_PAGES at a time, so a large original is never all in memory."""
    from mnemo_sea.archive.internal_reads import InternalReads

    monkeypatch.setattr(indexer_module, "TRAIL_PASS_PAGES", 2)
    archive_log(mnemo)
    reads: list[Any] = []
    read = InternalReads.archived_note
    monkeypatch.setattr(InternalReads, "archived_note", lambda self, *a: reads.append(a) or read(self, *a))
    mnemo.sync()
    pages = page_count(len(log_text().encode()))
    assert pages > 2 and pending_pages(mnemo) == 0
    assert len(reads) == 2 * -(-pages // 2)


def test_a_call_cut_short_counts_a_page_done_only_once_its_document_is_written() -> None:
    """The pages a call went through when its first n documents are written: a page without a
    document (blank, or not text) needs nothing, but a page with one never counts before it is
    written, or the pass would mark it done unindexed."""
    note = "n"  # stands for the page's document: only None or not matters here
    pages: list[Any] = [
        ("t", "r", None),
        ("t", "r", note),
        ("t", "r", None),
        ("t", "r", note),
        ("t", "r", None),
    ]
    through = indexer_module._pages_through
    assert [through(pages, n) for n in range(3)] == [1, 3, 5]
    assert through([("t", "r", None)] * 3, 0) == 3  # nothing to write: every page done


def test_a_page_failing_inside_a_call_leaves_only_written_pages_done(
    mnemo: Mnemo, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page whose embedding fails in the middle of a call: nothing of the pass is marked done
    from the call, the pass is applied again row by row, and every page but the failing one is
    indexed; no row is done whose page has no points (the raw outbox against the index)."""
    rid, text = archive_log(mnemo)
    pages = page_count(len(text.encode()))
    assert pages > indexer_module.TRAIL_PAGES_PER_CALL
    encode = mnemo.index.encoder.encode
    failing_version = 3  # page 1, inside the trail's first call

    def fail_on_page_one(chunks: Any, *sparse: Any) -> Any:
        if any(
            c.payload.kind == "archived_original" and c.payload.version == failing_version for c in chunks
        ):
            raise ValueError("page 1 cannot be embedded")
        return encode(chunks, *sparse)

    monkeypatch.setattr(mnemo.index.encoder, "encode", fail_on_page_one)
    clock.run_trails()
    held = points(mnemo, "clinic-a", "s1", rid)
    assert set(held) == {1, *range(2, 2 + pages)} - {failing_version}
    with mnemo.archive.store.read() as conn:
        rows = conn.execute(
            select(
                t.outbox.c.entity_ref, t.outbox.c.done_at, t.outbox.c.attempts, t.outbox.c.last_error
            ).where(t.outbox.c.entity == "result_original")
        ).all()
    assert len(rows) == pages
    for row in rows:
        version = int(row.entity_ref.rpartition("#")[2]) + 2
        if version == failing_version:
            assert row.done_at is None and row.attempts == 1 and "page 1 cannot" in row.last_error
        else:
            assert row.done_at is not None and version in held, row.entity_ref
