"""The facade end to end on the embedded default: ingest, search, archive notes, memory, deletion."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fakes import HashingEmbedder
from sqlalchemy import update
from statements import statements_of

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.demo.samples import load_sample_tenant
from mnemo_sea.system.mnemo import Mnemo

CLINIC = Principal("clinic", "assistant", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
CLINIC_ADMIN = Principal("clinic", "dpo", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
SHOP = Principal("shop", "investigator", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)


def test_ingested_knowledge_is_found_hydrated_and_isolated(mnemo: Mnemo) -> None:
    report = mnemo.ingest(CLINIC, load_sample_tenant("clinic"))
    mnemo.ingest(SHOP, load_sample_tenant("shop"))
    assert report.index is not None and report.index.failed == 0 and report.index.pending == 0

    found = mnemo.search(CLINIC, "伊维菌素 柯基 牧羊犬")
    assert found.status == "results"
    top = found.hits[0]
    assert top.evidence_id.startswith("drug:ivermectin")
    record, content = mnemo.archive.get_evidence(CLINIC, top.evidence_id, with_content=True)
    assert content is not None and content.decode("utf-8")[top.span[0] : top.span[1]] == top.snippet
    assert top.locator == record.locator

    # The shop's principal never sees clinic evidence, whatever it asks.
    leaked = mnemo.search(SHOP, "伊维菌素 柯基 牧羊犬", limit=50)
    assert all(not h.evidence_id.startswith("drug:") for h in leaked.hits)


def test_a_deleted_record_is_unreachable_everywhere(mnemo: Mnemo) -> None:
    mnemo.ingest(
        CLINIC, [EvidenceInput(body="O-1042 shipped by sea freight", source="ops", evidence_id="note:1")]
    )
    assert mnemo.search(CLINIC, "sea freight").status == "results"
    receipt = mnemo.delete_evidence(CLINIC_ADMIN, "note:1")
    check = mnemo.verify_deleted(CLINIC_ADMIN, receipt)
    assert check.ok, check
    # The files' erasure decides the rest: a reader holding the log is pending on it; a step that
    # failed outright ("pending") waits on no reader, so it is incomplete, never pending_reader.
    statuses = {
        e: dataclasses.replace(check, erasure=e).status for e in ("done", "pending_reader", "pending")
    }
    assert statuses == {"done": "ok", "pending_reader": "pending_reader", "pending": "incomplete"}
    assert not dataclasses.replace(check, erasure="pending").ok
    for mode in ("hybrid", "bm25", "dense"):
        assert all(h.evidence_id != "note:1" for h in mnemo.search(CLINIC, "sea freight", mode=mode).hits)


def test_archived_notes_and_memory_are_searchable(mnemo: Mnemo) -> None:
    mnemo.record(CLINIC, "visit-1", "logistics.track", "504 upstream timeout " * 50)
    mnemo.archive_results(CLINIC, "visit-1", [("r1", "carrier query timed out three times; status unknown")])
    hits = mnemo.search(CLINIC, "carrier timed out", kinds=["tool_result", "archived_original"]).hits
    # The note, then the original it stands for ("timeout"), both pointing to the result.
    assert [(h.locator, h.label) for h in hits] == [
        ("visit-1/r1", "archived result note"),
        ("visit-1/r1", "archived original"),
    ]
    assert "timed out" in hits[0].snippet and hits[1].lines == (1, 1)

    mnemo.remember(CLINIC, "owner-42", "timezone", "UTC", "user_claim")
    mnemo.remember(CLINIC, "owner-42", "timezone", "Asia/Shanghai", "user_correction")
    memory_hits = mnemo.search(CLINIC, "timezone", kinds=["memory"]).hits
    assert [h.snippet for h in memory_hits] == ["timezone: Asia/Shanghai"]


def test_a_search_result_cache_is_invalidated_by_deletion(mnemo: Mnemo) -> None:
    mnemo.ingest(CLINIC, [EvidenceInput(body="the warehouse in Ningbo", source="ops", evidence_id="wh:1")])
    first = mnemo.search(CLINIC, "warehouse Ningbo")
    again = mnemo.search(CLINIC, "warehouse Ningbo")
    assert not first.cached and again.cached and again.hits == first.hits
    mnemo.delete_evidence(CLINIC_ADMIN, "wh:1")
    after = mnemo.search(CLINIC, "warehouse Ningbo")
    assert not after.cached and after.status == "no_match"


def test_after_deletion_no_path_reaches_the_content(mnemo: Mnemo) -> None:
    from mnemo_sea.archive import NotFound, SourceRef

    secret = "the courier left parcel O-1042 with neighbour Li at flat 1203"
    mnemo.ingest(CLINIC, [EvidenceInput(body=secret, source="ops", evidence_id="ev:secret")])
    mnemo.record(CLINIC, "s-secret", "courier.log", secret)
    mnemo.archive_results(CLINIC, "s-secret", [("r1", "courier left parcel with neighbour Li")])
    summary = mnemo.create_summary(CLINIC, "parcel left with a neighbour", ["evidence:ev:secret"])
    mnemo.remember(
        CLINIC,
        "owner-9",
        "parcel/drop",
        "neighbour Li",
        "tool_fact",
        derived_from=SourceRef.evidence("ev:secret"),
    )
    assert mnemo.search(CLINIC, "neighbour Li parcel").status == "results"  # also fills the result cache
    derived = mnemo.search(CLINIC, "parcel left with a neighbour", kinds=["summary"]).hits
    assert [(h.evidence_id, h.label) for h in derived] == [(summary.summary_id, summary.label)]

    evidence_receipt = mnemo.delete_evidence(CLINIC_ADMIN, "ev:secret")
    session_receipt = mnemo.delete_session(CLINIC_ADMIN, "s-secret")
    assert summary.summary_id in evidence_receipt.summaries and evidence_receipt.memory_facts
    for receipt in (evidence_receipt, session_receipt):
        assert mnemo.verify_deleted(CLINIC_ADMIN, receipt).ok

    for mode in ("hybrid", "bm25", "dense"):  # every leg, every kind, past the result cache
        result = mnemo.search(CLINIC, "neighbour Li parcel courier", mode=mode, limit=50)
        assert not result.cached
        assert all("Li" not in h.snippet for h in result.hits), (mode, result.hits)
    with pytest.raises(NotFound):
        mnemo.archive.get_evidence(CLINIC, "ev:secret")
    with pytest.raises(NotFound):
        mnemo.recover(CLINIC, "s-secret", "r1")
    with pytest.raises(NotFound):
        mnemo.live_view(CLINIC, "s-secret")
    with pytest.raises(NotFound):
        mnemo.archive.get_summary(CLINIC, summary.summary_id)
    assert mnemo.current(CLINIC, "owner-9", "parcel/drop") is None
    report = mnemo.check_citations(CLINIC, [{"evidence_id": "ev:secret", "quote": "neighbour Li"}])
    assert [c.verdict for c in report.checks] == ["unresolved"]


def test_a_lagging_index_never_shows_deleted_or_superseded_text(tmp_path: Path) -> None:
    lagging = Mnemo.open(tmp_path / "lag", embedder=HashingEmbedder())
    try:
        lagging.ingest(CLINIC, [EvidenceInput(body="dose is 10 mg per kg", source="kb", evidence_id="d:1")])
        lagging.sync_writes = False  # from here on the index falls behind the archive
        lagging.ingest(CLINIC, [EvidenceInput(body="dose is 5 mg per kg", source="kb", evidence_id="d:1")])
        stale = lagging.search(CLINIC, "dose mg per kg")
        assert stale.status == "no_match" and stale.dropped == 1  # v1 is superseded: dropped, not shown
        lagging.sync()
        fresh = lagging.search(CLINIC, "dose mg per kg")
        assert [(h.evidence_id, h.version, h.snippet) for h in fresh.hits] == [
            ("d:1", 2, "dose is 5 mg per kg")
        ]
        lagging.archive.delete_evidence(CLINIC_ADMIN, "d:1")  # committed, not yet applied to the index
        gone = lagging.search(CLINIC, "dose mg per kg")
        assert gone.hits == () and gone.dropped == 1
    finally:
        lagging.close()


def test_a_stale_index_payload_never_widens_access(mnemo: Mnemo) -> None:
    reader = Principal("clinic", "owner-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
    mnemo.ingest(
        CLINIC,
        [
            EvidenceInput(body="okapi feeding chart one", source="kb", evidence_id="chart:1"),
            EvidenceInput(body="okapi feeding chart two", source="kb", evidence_id="chart:2"),
        ],
    )
    assert len(mnemo.search(reader, "okapi feeding chart").hits) == 2
    # The archive's rows change behind the index's back (as a payload written before a change
    # would lag): the index still files chart:1 as nobody's and chart:2 as internal.
    with mnemo.archive.store.write() as conn:
        conn.execute(update(t.evidence).where(t.evidence.c.evidence_id == "chart:1").values(owner="owner-8"))
        conn.execute(update(t.evidence).where(t.evidence.c.evidence_id == "chart:2").values(sensitivity=3))
    found = mnemo.search(reader, "okapi feeding chart")
    assert found.status == "no_match" and found.dropped == 2  # the index answered; the archive said no
    assert len(mnemo.search(CLINIC, "okapi feeding chart").hits) == 1  # chart:2 is above its clearance too


def test_hydration_costs_the_same_statements_for_one_hit_or_ten(mnemo: Mnemo) -> None:
    mnemo.ingest(
        CLINIC,
        [
            EvidenceInput(body=f"okapi ferry timetable {n}", source="kb", evidence_id=f"ferry:{n}")
            for n in range(10)
        ],
    )
    per_search = []
    for limit in (1, 10):
        with statements_of(mnemo.archive.store) as seen:
            assert len(mnemo.search(CLINIC, "okapi ferry timetable", limit=limit, mode="bm25").hits) == limit
        per_search.append(len(seen))
    assert per_search == [1, 1], per_search  # one SELECT, whatever the hits, and no transaction


def test_evidence_of_kind_summary_is_hydrated_as_evidence(mnemo: Mnemo) -> None:
    # Only a `sum:` id is a summary of the archive's; an evidence record may be of kind summary
    # too (a digest ingested as a document), and was once dropped as a summary that did not exist.
    mnemo.ingest(
        CLINIC,
        [EvidenceInput(body="quarterly okapi digest", source="kb", evidence_id="digest:1", kind="summary")],
    )
    found = mnemo.search(CLINIC, "okapi digest", mode="bm25")
    assert [(h.evidence_id, h.kind, h.label, h.snippet) for h in found.hits] == [
        ("digest:1", "summary", "evidence", "quarterly okapi digest")
    ]
