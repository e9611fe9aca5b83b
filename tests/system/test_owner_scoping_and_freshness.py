"""Readers see only what is about them; caches and as_of never hide the current truth; a poison
outbox row never stalls the queue; fsck finds orphans of tenants the archive no longer knows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from mnemo_sea.archive import EvidenceInput, Forbidden, InvalidInput, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.outbox import MAX_ATTEMPTS, enqueue
from mnemo_sea.retrieval import EvidenceDocument
from mnemo_sea.system.caches import CacheUnavailable
from mnemo_sea.system.fsck import run_fsck
from mnemo_sea.system.mnemo import Mnemo

AGENT = Principal("t1", "assistant", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
ALICE = Principal("t1", "alice", frozenset({Role.READER}), Sensitivity.INTERNAL)
BOB = Principal("t1", "bob", frozenset({Role.READER}), Sensitivity.INTERNAL)


def test_a_reader_finds_only_notes_and_summaries_about_itself(mnemo: Mnemo) -> None:
    mnemo.record(AGENT, "s-alice", "lookup", "zebrafish lab values", owner="alice")
    mnemo.archive_results(AGENT, "s-alice", [("r1", "alice zebrafish diagnosis note")])
    mnemo.create_summary(AGENT, "summary of the zebrafish case", ["result:s-alice/r1"])
    assert {h.kind for h in mnemo.search(ALICE, "zebrafish diagnosis case summary").hits} == {
        "tool_result",
        "summary",
    }
    assert mnemo.search(BOB, "zebrafish diagnosis case summary").hits == ()
    assert {h.kind for h in mnemo.search(AGENT, "zebrafish diagnosis case summary").hits} == {
        "tool_result",
        "archived_original",  # the agent may recover the original: its page is a hit too
        "summary",
    }


def test_a_reader_cannot_read_another_owners_session(mnemo: Mnemo) -> None:
    mnemo.record(AGENT, "s-alice", "lookup", "live secret walrus content", owner="alice")
    assert "walrus" in mnemo.live_view(ALICE, "s-alice").text
    with pytest.raises(Forbidden):
        mnemo.live_view(BOB, "s-alice")
    with pytest.raises(Forbidden):
        mnemo.archive.list_results(BOB, "s-alice")


def test_cached_searches_show_memory_corrections_and_new_notes(mnemo: Mnemo) -> None:
    mnemo.remember(AGENT, "alice", "diet", "vegetarian quokka", "user_claim")
    assert [h.snippet for h in mnemo.search(AGENT, "quokka diet").hits] == ["diet: vegetarian quokka"]
    mnemo.remember(AGENT, "alice", "diet", "vegan quokka", "user_correction")
    after = mnemo.search(AGENT, "quokka diet")
    assert not after.cached and [h.snippet for h in after.hits] == ["diet: vegan quokka"]
    mnemo.record(AGENT, "s1", "logs", "x")
    assert mnemo.search(AGENT, "kangaroo", kinds=["tool_result"]).status == "no_match"
    mnemo.archive_results(AGENT, "s1", [("r1", "kangaroo sighting log")])
    found = mnemo.search(AGENT, "kangaroo", kinds=["tool_result"]).hits
    # The new note; its original ("x") answers too, from the dense leg only (hashing vectors).
    assert [(h.locator, h.label) for h in found if h.bm25_rank is not None] == [
        ("s1/r1", "archived result note")
    ]


def test_as_of_now_finds_the_current_version_not_the_superseded_one(mnemo: Mnemo) -> None:
    mnemo.ingest(
        AGENT, [EvidenceInput(body="berlin delivery takes five days", source="kb", evidence_id="pol:1")]
    )
    between = datetime.now(UTC)
    mnemo.ingest(
        AGENT, [EvidenceInput(body="berlin delivery takes seven days", source="kb", evidence_id="pol:1")]
    )
    now = mnemo.search(AGENT, "berlin delivery", limit=1, as_of=datetime.now(UTC))
    assert [(h.version, h.snippet) for h in now.hits] == [(2, "berlin delivery takes seven days")]
    then = mnemo.search(AGENT, "berlin delivery", limit=1, as_of=between)
    assert [(h.version, h.snippet) for h in then.hits] == [(1, "berlin delivery takes five days")]


def test_memory_keys_fit_the_index_and_poison_rows_never_stall_the_queue(mnemo: Mnemo) -> None:
    with pytest.raises(InvalidInput):
        mnemo.remember(AGENT, "alice", "k" * 101, "armadillo", "user_claim")
    with mnemo.archive.store.write() as conn:
        for _ in range(2):
            enqueue(conn, "t1", "index_upsert", "evidence", "broken-ref-without-version")
    mnemo.sync_writes = False
    mnemo.remember(AGENT, "alice", "pet", "capybara", "user_claim")
    for _ in range(MAX_ATTEMPTS):
        report = mnemo.indexer.drain(limit=2)  # the two poison rows fill every batch...
        assert report.failed == 2 and report.applied == 0
    report = mnemo.indexer.drain(limit=2)  # ...until they are set aside
    assert report.applied == 2 and report.pending == 2
    assert [h.snippet for h in mnemo.search(AGENT, "capybara").hits] == ["pet: capybara"]
    assert [p.kind for p in run_fsck(mnemo).problems] == ["pending_outbox"]


def test_fsck_finds_orphans_of_a_tenant_the_archive_does_not_know(mnemo: Mnemo) -> None:
    mnemo.index.upsert(
        [EvidenceDocument(tenant_id="ghost", evidence_id="x:1", version=1, text="leaked text")]
    )
    report = run_fsck(mnemo)
    assert [(p.kind, p.tenant_id, p.ref) for p in report.problems] == [("orphan_point", "ghost", "x:1@1")]
    assert run_fsck(mnemo, repair=True).ok
    assert mnemo.index.count("ghost") == 0


def test_an_outage_never_sets_rows_aside_and_never_fails_a_committed_write(
    mnemo: Mnemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cache_down(tenant: str) -> int:
        raise CacheUnavailable("redis://cache:6379 unreachable (bump_generation failed)")

    monkeypatch.setattr(mnemo.cache, "bump_generation", cache_down)
    for i in range(MAX_ATTEMPTS + 2):  # each write's sync meets the dead cache
        outcome = mnemo.remember(AGENT, "alice", f"pet{i}", "capybara", "user_claim")
        assert outcome.persisted  # the write stands; the call does not fail
    with mnemo.archive.store.read() as conn:
        rows = conn.execute(select(t.outbox).where(t.outbox.c.done_at.is_(None))).all()
    assert rows and all(r.attempts == 0 for r in rows)  # an outage is not the rows' fault
    assert {r.last_error is not None for r in rows} == {True, False}  # the pass stopped at the outage
    monkeypatch.undo()
    report = mnemo.sync()
    assert report.pending == 0 and report.failed == 0
    assert len(mnemo.search(AGENT, "capybara", limit=20).hits) == MAX_ATTEMPTS + 2
