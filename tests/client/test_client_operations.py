"""Every operation of the REST client against a real API process, sync and async, on the
embedded default and on PostgreSQL + Redis (see conftest.py).

Each test reads back what it changed: through the client (the library's own types, rebuilt
from the JSON) and in the archive's tables (what the server really wrote).
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from client_helpers import Tenant

from mnemo_sea.archive import (
    ArchiveReceipt,
    DeletionReceipt,
    EvidenceInput,
    EvidenceRecord,
    InvalidInput,
    InvalidSpan,
    LiveView,
    MemoryFact,
    Recovered,
    RememberOutcome,
    SessionInfo,
    Summary,
    TaskState,
    ToolResult,
)
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.client import Health
from mnemo_sea.context import AssembledContext
from mnemo_sea.system.citations import Citation, CitationReport
from mnemo_sea.system.results import DeletionCheck, IngestReport, SearchHit, SearchResult, SearchResultStatus


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_evidence_search_citations_and_summaries(tenant: Tenant) -> None:
    mnemo = tenant.client("agent")
    scope = unique("formulary")
    evidence_id = f"{scope}/amoxicillin#dose.."  # '/', '#' and '..' travel percent-encoded
    dose = EvidenceInput("Amoxicillin: 10 mg/kg twice daily.", "formulary.pdf", evidence_id, scope=scope)
    first = mnemo.put_evidence(dose)
    assert isinstance(first, IngestReport) and (first.new_versions, first.unchanged) == (1, 0)
    (stored,) = first.stored
    assert isinstance(stored, EvidenceRecord) and stored.evidence_id == evidence_id and stored.version == 1
    unchanged = mnemo.put_evidence(dose)
    assert (unchanged.new_versions, unchanged.unchanged) == (0, 1) and unchanged.stored == first.stored

    raised = EvidenceInput("Amoxicillin: 12 mg/kg twice daily.", "formulary.pdf", evidence_id, scope=scope)
    melox = EvidenceInput("Meloxicam: 0.1 mg/kg once daily.", "formulary.pdf", f"{scope}/melox", scope=scope)
    batch = mnemo.ingest([raised, melox])
    assert batch.new_versions == 2 and [r.version for r in batch.stored] == [2, 1]
    assert tenant.count(t.evidence, evidence_id=evidence_id) == 2  # two versions, none overwritten

    record, body = mnemo.get_evidence(evidence_id, with_content=True)
    assert record.version == 2 and body == b"Amoxicillin: 12 mg/kg twice daily."
    assert mnemo.get_evidence(evidence_id, version=1)[0].status == "superseded"
    assert mnemo.get_evidence(evidence_id, as_of=stored.recorded_at)[0].version == 1
    assert [r.version for r in mnemo.evidence_history(evidence_id)] == [1, 2]

    found = mnemo.search("amoxicillin twice daily", scopes=[scope], limit=5)
    assert isinstance(found, SearchResult) and found.status is SearchResultStatus.RESULTS
    assert found.raise_for_status() is found  # code written for the facade runs unchanged
    hit = found.hits[0]
    assert isinstance(hit, SearchHit) and (hit.evidence_id, hit.version) == (evidence_id, 2)
    assert hit.snippet == "Amoxicillin: 12 mg/kg twice daily." and hit.span == (0, len(hit.snippet))
    assert mnemo.search("amoxicillin", scopes=[scope], mode="bm25", kinds=["memory"]).status == "no_match"

    retracted = mnemo.retract(f"{scope}/melox", "wrong species")
    assert retracted.status == "retracted"
    assert all(h.evidence_id != f"{scope}/melox" for h in mnemo.search("meloxicam", scopes=[scope]).hits)

    report = mnemo.check_citations(
        [
            Citation(evidence_id, "12 mg/kg twice daily"),
            {"evidence_id": f"{scope}/melox", "quote": "0.1 mg/kg"},
        ]
    )
    assert isinstance(report, CitationReport) and report.total == 2
    assert [c.verdict for c in report.checks] == ["ok", "retracted"] and report.precision == 0.5

    summary = mnemo.create_summary(
        "Amoxicillin dose went up to 12 mg/kg.", [f"evidence:{evidence_id}"], trace_ref="run-1"
    )
    assert isinstance(summary, Summary) and summary.derived_from == (f"evidence:{evidence_id}",)
    assert mnemo.get_summary(summary.summary_id) == summary
    assert tenant.count(t.summaries, summary_id=summary.summary_id) == 1


def test_a_session_records_archives_recovers_assembles_and_keeps_its_task_state(tenant: Tenant) -> None:
    mnemo = tenant.client("agent")
    session = unique("visit")
    r1 = mnemo.record(
        session, "lab_results", "CBC: all normal except ALT 112 (high)", arguments={"panel": "cbc"}
    )
    image = b"\x89PNG\x00binary"
    r2 = mnemo.record(session, "xray", image, media_type="image/png", policy_class="default")
    assert isinstance(r1, ToolResult) and (r1.result_id, r2.result_id) == ("r1", "r2")
    assert r1.arguments == {"panel": "cbc"} and r2.size == len(image)
    assert [r.result_id for r in mnemo.list_results(session)] == ["r1", "r2"]
    assert [r.result_id for r in mnemo.list_results(session, offset=1, limit=5)] == ["r2"]
    listed = mnemo.list_sessions()
    assert [(i.session_id, i.results) for i in listed] == [(session, 2)]
    assert isinstance(listed[0], SessionInfo) and mnemo.list_sessions(offset=1) == []
    assert mnemo.session_info(session) == listed[0]
    looked, shown = mnemo.get_result(session, "r2", with_content=True, expected_sha256=r2.content_sha256)
    assert (looked, shown) == (r2, image) and mnemo.get_result(session, "r1") == (r1, None)
    assert tenant.count(t.tool_results, session_id=session) == 2  # looking appends nothing
    mnemo.record(unique("other"), "t", "x")
    assert len(mnemo.list_sessions()) == 2 and len(mnemo.list_sessions(limit=1)) == 1

    receipt = mnemo.archive_results(
        session, [("r1", "CBC: ALT 112 high"), {"result_id": "r2", "note": "x-ray"}]
    )
    assert isinstance(receipt, ArchiveReceipt) and receipt.archived == ("r1", "r2")
    view = mnemo.live_view(session)
    assert isinstance(view, LiveView) and [i.result.state for i in view.items] == ["archived", "archived"]
    assert 'recover_result("r1")' in view.text

    recovered = mnemo.recover(session, "r2")
    assert isinstance(recovered, Recovered) and recovered.content == image
    assert recovered.appended.result_id == "r3" and recovered.appended.recovered_from == "r2"
    assert tenant.count(t.tool_results, session_id=session) == 3  # the copy appended, once

    excerpt = mnemo.recover(session, "r1", match="alt 112", around=0, expected_sha256=r1.content_sha256)
    assert excerpt.content == b"CBC: all normal except ALT 112 (high)"
    assert excerpt.appended.excerpt is not None and excerpt.appended.excerpt.first_line == 1
    with pytest.raises(InvalidSpan) as refused:
        mnemo.recover(session, "r1", lines=(2, 3))
    assert (refused.value.lines, refused.value.size) == (1, r1.size)
    assert tenant.count(t.tool_results, session_id=session) == 4  # the excerpt, once; the refusal, nothing
    report = mnemo.record(session, "lab_report", "panel: cbc\nALT 112 (high)\nnext check in 2 weeks\n")
    mnemo.archive_results(session, [(report.result_id, "lab report")])
    line = mnemo.recover(session, report.result_id, lines=(2, 2))
    # The client checks each envelope of a live view, an excerpt's too (its size, not its hash:
    # the whole original it was cut from is not sent).
    shown = mnemo.live_view(session).items[-1]
    assert shown.result.excerpt == line.appended.excerpt and "ALT 112 (high)" in shown.rendered
    # ... and the marks of old observations: a stale price's warning, a replaced call's note.
    hours_ago = datetime.now(UTC) - timedelta(hours=2)
    price = mnemo.record(
        session, "shop.price", "4 EUR", arguments={"sku": "W"}, policy_class="price", observed_at=hours_ago
    )
    newer = mnemo.record(session, "shop.price", "5 EUR", arguments={"sku": "W"}, policy_class="price")
    marked = {i.result.result_id: i for i in mnemo.live_view(session).items}
    assert marked[price.result_id].superseded_by == newer.result_id
    assert "[warning: price data goes stale" in marked[price.result_id].rendered
    # The automatic policy and recall, as the library's own types.
    curated = mnemo.curate(session, budget_tokens=10, keep_recent=1, need="next check in 2 weeks", around=0)
    assert curated.recall is not None and curated.recall.status == "recovered"
    assert curated.recall.recovered is not None  # a short original comes back whole
    assert curated.recall.recovered.content.endswith(b"next check in 2 weeks\n")
    assert {a.reason for a in curated.archived} <= {"large", "budget"} and curated.receipt is not None
    assert mnemo.recall(session, "no such need anywhere").status == "not_found"

    assembled = mnemo.context(session, budget_tokens=4000, instructions="You are a vet assistant.")
    assert isinstance(assembled, AssembledContext) and assembled.session_id == session
    assert assembled.text.startswith("<instructions") and "CBC: ALT 112 high" in assembled.text
    assert assembled.used_tokens == sum(s.tokens for s in assembled.segments) <= assembled.budget_tokens

    state = mnemo.update_task_state(
        session,
        goal="dose the dog safely",
        confirmed=[{"fact": "ALT is high", "evidence_id": f"result:{session}/r1"}],
        constraints=["no NSAIDs: liver"],
        unresolved=["owner's consent"],
    )
    assert isinstance(state, TaskState) and state.version == 1 and state.constraints == ("no NSAIDs: liver",)
    carried = mnemo.update_task_state(
        session,
        goal="dose the dog safely",
        confirmed=state.confirmed,  # read back, sent again as they are
        constraints=["no NSAIDs: liver"],
        release=[{"item": "owner's consent", "reason": "the owner consented by phone"}],
        expected_version=1,
    )
    assert carried.version == 2 and carried.released[0].item == "owner's consent"
    assert mnemo.task_state(session) == carried
    first = mnemo.task_state(session, version=1)
    assert first is not None and (first.version, first.status, first.goal) == (1, "superseded", state.goal)
    assert [s.version for s in mnemo.task_state_history(session)] == [1, 2]
    stateless = unique("visit")
    mnemo.record(stateless, "lab_results", "sodium 139")
    assert mnemo.task_state(stateless) is None  # a session without a task state yet
    assert tenant.count(t.task_states, session_id=session) == 2


def test_memory_remember_read_forget_and_purge(tenant: Tenant) -> None:
    mnemo = tenant.client("agent")
    owner = unique("pat")
    outcome = mnemo.remember(owner, "allergy", "penicillin", "user_claim")
    assert isinstance(outcome, RememberOutcome) and outcome.persisted
    corrected = mnemo.remember(owner, "allergy", "amoxicillin", "user_correction")
    assert corrected.fact.version == 2
    fact = mnemo.current(owner, "allergy")
    assert isinstance(fact, MemoryFact) and fact.value == "amoxicillin"
    assert [f.status for f in mnemo.memory_history(owner, "allergy")] == ["superseded", "active"]
    assert mnemo.current(owner, "diet") is None  # no such fact: None, as in process

    receipt = mnemo.forget(owner, "allergy")
    assert isinstance(receipt, DeletionReceipt) and len(receipt.memory_facts) == 2
    assert mnemo.current(owner, "allergy") is None and tenant.count(t.memory_facts, owner=owner) == 0

    admin = tenant.client("admin")
    mnemo.remember(owner, "price_quote", "42 EUR", "tool_fact", ttl_seconds=0.2)
    # The server is another process, on the real clock: wait for the expiry (the bound ends a hang).
    deadline = time.monotonic() + 120
    while mnemo.current(owner, "price_quote") is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    purged = admin.purge_expired()
    assert purged is not None and [k for _, k, _ in purged.memory_facts] == ["price_quote"]
    assert admin.purge_expired() is None and tenant.count(t.memory_facts, owner=owner) == 0


def test_deletions_with_receipts_that_verify(tenant: Tenant) -> None:
    agent, admin = tenant.client("agent"), tenant.client("admin")
    owner, session = unique("pat"), unique("visit")
    evidence_id = unique("ev")
    agent.put_evidence(EvidenceInput(body="note on the dog", source="chart", evidence_id=evidence_id))
    agent.record(session, "lab_results", "potassium 5.9", owner=owner)
    agent.remember(owner, "allergy", "latex", "user_claim")
    agent.put_evidence(
        EvidenceInput(body=f"about {owner}", source="chart", evidence_id=unique("ev"), owner=owner)
    )

    for receipt in (
        admin.delete_evidence(evidence_id),
        admin.delete_session(session),
        admin.delete_owner(owner),
    ):
        assert isinstance(receipt, DeletionReceipt) and receipt.tenant_id == tenant.id and receipt.signature
        check = admin.verify_deleted(receipt)
        assert isinstance(check, DeletionCheck) and check.ok and check.receipt == receipt
    assert tenant.count(t.evidence) == 0 and tenant.count(t.tool_results) == 0
    assert tenant.count(t.memory_facts) == 0


def test_health_says_each_store_answers(tenant: Tenant) -> None:
    health = tenant.client("reader").health()
    assert isinstance(health, Health) and health.ok and health.mode == tenant.served.mode
    assert set(health.components) == {"archive", "index", "cache"}
    assert all(c.ok for c in health.components.values())


def test_search_with_a_floor_and_each_legs_score(tenant: Tenant) -> None:
    mnemo = tenant.client("agent")
    scope = unique("ferries")
    mnemo.ingest(
        [
            EvidenceInput(
                "The ferry to the island leaves at noon.", "timetable", f"{scope}/noon", scope=scope
            ),
            EvidenceInput(
                "The cafeteria menu changes every Monday.", "notices", f"{scope}/menu", scope=scope
            ),
        ]
    )
    hits = mnemo.search("ferry island noon", scopes=[scope]).hits
    top = hits[0]
    assert top.evidence_id == f"{scope}/noon" and top.bm25_rank == 1
    assert top.bm25_score is not None and top.bm25_score > 0
    assert top.dense_score is not None and top.relevance is not None and top.relevance >= top.dense_score
    kept = mnemo.search("ferry island noon", scopes=[scope], min_score=top.relevance).hits
    assert [h.evidence_id for h in kept] == [f"{scope}/noon"] and kept[0] == top
    for refused in ({"min_score": 1.5}, {"min_score": float("nan")}, {"min_score": 0.5, "mode": "bm25"}):
        with pytest.raises(InvalidInput) as caught:
            mnemo.search("ferry", scopes=[scope], **refused)
        assert "min_score" in str(caught.value), refused
