"""fsck finds every kind of drift between the index and the archive, and repairs it from the archive."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import HashingEmbedder
from sqlalchemy import select, update

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.outbox import MAX_ATTEMPTS
from mnemo_sea.retrieval import EvidenceDocument
from mnemo_sea.system.fsck import run_fsck
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("clinic", "assistant", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


@pytest.fixture
def mnemo(tmp_path: Path) -> Iterator[Mnemo]:
    m = Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())
    m.ingest(
        AGENT,
        [EvidenceInput(body=f"policy text number {i}", source="kb", evidence_id=f"p:{i}") for i in range(4)],
    )
    m.ingest(AGENT, [EvidenceInput(body="policy text number 0, revised", source="kb", evidence_id="p:0")])
    m.record(AGENT, "s1", "logs", "a long log")
    m.archive_results(AGENT, "s1", [("r1", "the log said nothing new")])
    m.sync()  # the original's page, which the trail would index on a thread of its own
    m.remember(AGENT, "owner-1", "city", "Hangzhou", "user_claim")
    try:
        yield m
    finally:
        m.close()


def test_a_consistent_system_has_no_problems(mnemo: Mnemo) -> None:
    report = run_fsck(mnemo)
    assert report.ok, report.problems
    # 4 evidence ids + 1 superseded version + 1 archived note and its original's page + 1 memory fact
    assert report.checked["documents"] == 8 == report.checked["indexed"]


def test_drift_is_reported_and_repaired_from_the_archive(mnemo: Mnemo) -> None:
    mnemo.index.delete("clinic", "p:2", 1)  # missing point
    mnemo.index.upsert([EvidenceDocument("clinic", "ghost:1", 1, "never archived")])  # orphan
    mnemo.index.set_status("clinic", "p:3", 1, "superseded")  # stale status
    with mnemo.archive.store.write() as conn:  # an outbox row left pending, as after a crash
        conn.execute(update(t.outbox).where(t.outbox.c.id == 1).values(done_at=None))
    report = run_fsck(mnemo)
    kinds = sorted((p.kind, p.ref) for p in report.problems)
    assert kinds == [
        ("missing_point", "p:2@1"),
        ("orphan_point", "ghost:1@1"),
        ("pending_outbox", "outbox"),
        ("stale_point", "p:3@1"),
    ]
    repaired = run_fsck(mnemo, repair=True)
    assert repaired.ok, repaired.problems
    assert repaired.repaired >= 4
    assert mnemo.search(AGENT, "policy text number 2").hits[0].evidence_id == "p:2"


def test_a_corrupt_original_is_reported_not_repaired(mnemo: Mnemo) -> None:
    record, _ = mnemo.archive.get_evidence(AGENT, "p:1")
    with mnemo.archive.store.write() as conn:
        conn.execute(
            update(t.blobs).where(t.blobs.c.sha256 == record.content_sha256).values(content=b"tampered")
        )
    report = run_fsck(mnemo, repair=True)
    assert [(p.kind, p.ref, p.repairable) for p in report.problems] == [
        ("blob_hash", record.content_sha256, False)
    ]


def test_a_version_the_index_refuses_is_reported_not_a_crash(mnemo: Mnemo) -> None:
    """A label stored before the archive refused what the index does (here written straight to
    the table): fsck names the version and goes on checking, with and without --repair."""
    with mnemo.archive.store.write() as conn:
        conn.execute(
            update(t.evidence)
            .where(t.evidence.c.evidence_id == "p:1", t.evidence.c.status == "active")
            .values(source="kb\tlegacy")
        )
    for repair in (False, True):
        report = run_fsck(mnemo, repair=repair)
        refused = [(p.kind, p.ref, p.repairable) for p in report.problems if p.kind == "unindexable"]
        assert refused == [("unindexable", "p:1@1", False)]
        assert "source" in next(p.detail for p in report.problems if p.kind == "unindexable")
        assert report.checked["documents"] == 7  # every other document was still checked


def test_repair_retries_the_rows_set_aside_after_their_last_failure(mnemo: Mnemo) -> None:
    """A row set aside (MAX_ATTEMPTS failures) whose cause is gone: --repair applies it and
    marks it done, instead of indexing the record around a row left pending for ever."""
    with mnemo.archive.store.write() as conn:
        conn.execute(
            update(t.outbox)
            .where(t.outbox.c.id == 1)
            .values(done_at=None, applied_at=None, attempts=MAX_ATTEMPTS)
        )
    assert mnemo.sync().applied == 0  # not claimed any more
    assert [p.kind for p in run_fsck(mnemo).problems] == ["pending_outbox"]
    repaired = run_fsck(mnemo, repair=True)
    assert repaired.ok, repaired.problems
    with mnemo.archive.store.read() as conn:
        row = conn.execute(select(t.outbox.c.done_at, t.outbox.c.attempts).where(t.outbox.c.id == 1)).one()
    assert row.done_at is not None and row.attempts == 0
