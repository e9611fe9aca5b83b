"""`Mnemo.context` end to end: the archive's state, the search and the task state in one context."""

from __future__ import annotations

import re

import pytest
from leftovers import new_marker, scan_database
from sqlalchemy import func, select

from mnemo_sea.archive import EvidenceInput, NotFound, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.context import ContextOverBudget
from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.system.mnemo import Mnemo, SearchResult

BUDGET = 200_000


def _clinic_visit(mnemo: Mnemo, agent: Principal) -> None:
    mnemo.record(agent, "visit-1", "lab.log", "血常规 正常\n" * 400, arguments={"pet": "pet-7"})
    mnemo.record(
        agent, "visit-1", "lab.mdr1", "MDR1 突变型 mut/mut：禁用伊维菌素", policy_class="prescription_basis"
    )
    mnemo.record(agent, "visit-1", "pharmacy.stock", "伊维菌素 库存 3", policy_class="stock")
    mnemo.record(agent, "visit-1", "vet.approval", "王医生 已批准 多拉菌素 方案", policy_class="vet_approval")
    mnemo.archive_results(agent, "visit-1", [{"id": "r1", "note": "血常规 400 行，全部正常"}])


def test_a_visit_renders_in_order_with_pinned_protected_results(mnemo: Mnemo, agent: Principal) -> None:
    _clinic_visit(mnemo, agent)
    mnemo.ingest(
        agent,
        [
            EvidenceInput(
                "MDR1 突变犬禁用伊维菌素，可改用多拉菌素", source="formulary", evidence_id="drug:ivermectin"
            )
        ],
    )
    mnemo.update_task_state(
        agent,
        "visit-1",
        goal="为 pet-7 制定驱虫方案",
        constraints=["处方须有兽医批准"],
        confirmed=[{"fact": "MDR1 突变型", "evidence_id": "result:visit-1/r2"}],
        unresolved=["库存是否足够"],
    )
    ctx = mnemo.context(
        agent, "visit-1", budget_tokens=BUDGET, instructions="你是诊所助手。", query="伊维菌素 MDR1"
    )
    kinds = [s.kind for s in ctx.segments]
    assert kinds[:4] == ["instructions", "constraints", "task_state", "archived_stub"]
    assert kinds[4:7] == ["protected_result", "live_result", "protected_result"]
    assert "evidence" in kinds[7:]
    assert ctx.task_state_version == 1
    assert '<archived_result id="r1">' in ctx.text and "血常规 正常" not in ctx.text
    assert '<evidence id="drug:ivermectin" version="1"' in ctx.text
    assert ctx.used_tokens == mnemo.token_counter.count(ctx.text)
    # The pinned part alone is the floor: below it nothing is assembled.
    with pytest.raises(ContextOverBudget) as caught:
        mnemo.context(
            agent,
            "visit-1",
            budget_tokens=ctx.pinned_tokens - 1,
            output_reserve=0,
            instructions="你是诊所助手。",
        )
    assert caught.value.detail["pinned_tokens"] == ctx.pinned_tokens


def test_recovered_copies_appear_where_they_were_appended(mnemo: Mnemo, agent: Principal) -> None:
    _clinic_visit(mnemo, agent)
    mnemo.recover(agent, "visit-1", "r1")
    ctx = mnemo.context(agent, "visit-1", budget_tokens=BUDGET)
    history = [(s.kind, s.ids) for s in ctx.segments if s.component == "history"]
    assert history[0] == ("archived_stub", ("r1",))
    assert history[-1] == ("recovered_copy", ("r5", "r1"))
    assert 'recovered_from="r1" status="historical"' in ctx.text
    assert [c.result_id for c in ctx.candidates] == ["r5"]  # the copy may be archived again after use


def test_a_superseded_cited_version_is_shown_beside_the_current_one(mnemo: Mnemo, agent: Principal) -> None:
    mnemo.ingest(
        agent,
        [
            EvidenceInput(
                "refunds within 30 days", source="policy", evidence_id="policy:refund", statement="30 days"
            )
        ],
    )
    mnemo.update_task_state(
        agent,
        "o-1042",
        goal="answer the refund question",
        confirmed=[{"fact": "refund window 30 days", "evidence_id": "policy:refund"}],
    )
    mnemo.ingest(
        agent,
        [
            EvidenceInput(
                "refunds within 14 days", source="policy", evidence_id="policy:refund", statement="14 days"
            )
        ],
    )
    ctx = mnemo.context(agent, "o-1042", budget_tokens=BUDGET, query="refund days")
    conflict = next(s for s in ctx.segments if s.kind == "evidence_conflict")
    assert conflict.pinned and conflict.ids == ("policy:refund@1", "policy:refund@2")
    assert "refund window 30 days" in conflict.text and "14 days" in conflict.text
    assert "[policy:refund@1] [conflict:" in ctx.text
    assert sum(1 for s in ctx.segments if "policy:refund@2" in s.ids) == 1  # not shown twice
    # A retraction is a conflict too: the fact rests on a version no longer in force.
    mnemo.retract(agent, "policy:refund", "withdrawn")
    ctx = mnemo.context(agent, "o-1042", budget_tokens=BUDGET)
    assert "current: none (policy:refund has no active version: it was retracted)" in ctx.text


def test_two_sources_disagreeing_on_a_memory_key_are_shown_and_marked(mnemo: Mnemo, agent: Principal) -> None:
    mnemo.remember(agent, "pet-7", "allergy", "none known", "document")
    mnemo.remember(agent, "pet-7", "allergy", "penicillin", "tool_fact")
    mnemo.record(agent, "visit-2", "note", "pet-7 revisit")
    ctx = mnemo.context(agent, "visit-2", budget_tokens=BUDGET, query="allergy penicillin", kinds=["memory"])
    seg = next(s for s in ctx.segments if s.kind == "memory_conflict")
    assert "penicillin" in seg.text and "none known" in seg.text and 'status="unresolved"' in seg.text


def test_the_same_state_renders_the_same_bytes(mnemo: Mnemo, agent: Principal) -> None:
    _clinic_visit(mnemo, agent)
    mnemo.update_task_state(agent, "visit-1", goal="plan", constraints=["vet approval first"])
    a = mnemo.context(
        agent, "visit-1", budget_tokens=BUDGET, tools=[{"name": "recover_result", "b": 1, "a": 2}]
    )
    b = mnemo.context(
        agent, "visit-1", budget_tokens=BUDGET, tools=[{"a": 2, "name": "recover_result", "b": 1}]
    )
    assert a.text == b.text
    mnemo.record(agent, "visit-1", "pharmacy.stock", "伊维菌素 库存 0", policy_class="stock")
    c = mnemo.context(
        agent, "visit-1", budget_tokens=BUDGET, tools=[{"name": "recover_result", "b": 1, "a": 2}]
    )
    assert c.text.startswith(a.text)


def test_context_reads_as_the_caller(mnemo: Mnemo, agent: Principal, other_tenant: Principal) -> None:
    _clinic_visit(mnemo, agent)
    with pytest.raises(NotFound):
        mnemo.context(other_tenant, "visit-1", budget_tokens=BUDGET)
    low = Principal("clinic-a", "agent-2", frozenset({Role.AGENT}), Sensitivity.PUBLIC)
    ctx = mnemo.context(low, "visit-1", budget_tokens=BUDGET)
    assert {s.kind for s in ctx.segments} == {"withheld_result"}
    assert "MDR1" not in ctx.text


def test_a_search_that_cannot_run_raises_instead_of_leaving_evidence_out(
    mnemo: Mnemo, agent: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clinic_visit(mnemo, agent)
    monkeypatch.setattr(
        mnemo, "search", lambda *a, **kw: SearchResult(status="unavailable", reason="index down")
    )
    with pytest.raises(IndexUnavailable):
        mnemo.context(agent, "visit-1", budget_tokens=BUDGET, query="伊维菌素")


def test_deleting_cited_evidence_takes_its_facts_out_of_the_context(
    mnemo: Mnemo, agent: Principal, admin: Principal
) -> None:
    marker = new_marker()
    mnemo.ingest(agent, [EvidenceInput(f"policy text {marker}", source="policy", evidence_id="policy:x")])
    mnemo.record(agent, "o-7", "orders.get", "order O-7 shipped")
    mnemo.update_task_state(
        agent,
        "o-7",
        goal="check O-7",
        confirmed=[
            {"fact": f"policy says {marker}", "evidence_id": "policy:x"},
            {"fact": "order shipped", "evidence_id": "result:o-7/r1"},
        ],
    )
    receipt = mnemo.delete_evidence(admin, "policy:x")
    ctx = mnemo.context(agent, "o-7", budget_tokens=BUDGET, query=marker)
    assert marker not in ctx.text and "[result:o-7/r1] order shipped" in ctx.text
    assert mnemo.verify_deleted(admin, receipt).ok
    assert scan_database(mnemo.archive.store.engine, marker) == []
    assert t.task_states.name in {tbl for tbl in t.metadata.tables}
    assert re.search(r"<task_state [^>]*version=\"1\"", ctx.text)


def test_a_newer_version_above_the_callers_clearance_is_a_conflict_without_its_text(
    mnemo: Mnemo, agent: Principal, admin: Principal
) -> None:
    mnemo.ingest(
        agent, [EvidenceInput("shipped", source="orders", evidence_id="order:O-1", statement="shipped")]
    )
    mnemo.update_task_state(
        agent, "o-1", goal="g", confirmed=[{"fact": "shipped", "evidence_id": "order:O-1"}]
    )
    mnemo.ingest(
        admin,
        [EvidenceInput("SECRET v2", source="orders", evidence_id="order:O-1", sensitivity="confidential")],
    )
    ctx = mnemo.context(agent, "o-1", budget_tokens=BUDGET)
    conflict = next(s for s in ctx.segments if s.kind == "evidence_conflict")
    assert "above your clearance" in conflict.text and "SECRET" not in ctx.text


def test_an_evidence_id_holding_an_at_sign_is_not_taken_for_a_version(mnemo: Mnemo, agent: Principal) -> None:
    mnemo.ingest(agent, [EvidenceInput("note one", source="n", evidence_id="note@1")])
    mnemo.ingest(agent, [EvidenceInput("other v1", source="n", evidence_id="note")])
    mnemo.ingest(agent, [EvidenceInput("other v2 UNRELATED", source="n", evidence_id="note")])
    mnemo.update_task_state(agent, "n-1", goal="g", confirmed=[{"fact": "f", "evidence_id": "note@1"}])
    ctx = mnemo.context(agent, "n-1", budget_tokens=BUDGET)
    assert "evidence_conflict" not in [s.kind for s in ctx.segments] and "UNRELATED" not in ctx.text


def test_a_reader_whose_task_state_repeats_another_owners_data_gets_a_marker(
    mnemo: Mnemo, agent: Principal
) -> None:
    mnemo.remember(agent, "carol", "allergy", "penicillin", "user_claim")
    mnemo.record(agent, "bob-visit", "note", "bob's visit", owner="bob")
    mnemo.update_task_state(
        agent,
        "bob-visit",
        goal="g",
        confirmed=[{"fact": "carol: penicillin", "evidence_id": "memory:carol/allergy"}],
    )
    bob = Principal("clinic-a", "bob", frozenset({Role.READER}))
    ctx = mnemo.context(bob, "bob-visit", budget_tokens=BUDGET)
    assert "withheld_task_state" in [s.kind for s in ctx.segments] and "penicillin" not in ctx.text
    assert "bob's visit" in ctx.text


def test_assembling_changes_nothing_stored(mnemo: Mnemo, agent: Principal) -> None:
    """The assembler proposes archive candidates and never archives: the raw tables are the same
    before and after, however tight the budget."""
    _clinic_visit(mnemo, agent)
    mnemo.record(agent, "visit-1", "lab.log2", "血常规 复查\n" * 800)

    def rows() -> dict[str, int]:
        with mnemo.archive.store.read() as conn:
            return {
                tbl.name: conn.execute(select(func.count()).select_from(tbl)).scalar_one()
                for tbl in (t.tool_results, t.archive_entries, t.task_states, t.audit_events, t.outbox)
            }

    before = rows()
    ctx = mnemo.context(agent, "visit-1", budget_tokens=600, output_reserve=0)
    assert ctx.left_out and ctx.candidates  # something did not fit, and is only proposed
    assert rows() == before
    states = [(r.result_id, r.state) for r in mnemo.archive.list_results(agent, "visit-1")]
    assert states == [("r1", "archived"), ("r2", "live"), ("r3", "live"), ("r4", "live"), ("r5", "live")]
