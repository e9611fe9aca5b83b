"""Summaries: derived views over existing sources, labelled derived, as sensitive as their most
sensitive source, with the trace they came from."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select

from mnemo_sea.archive import (
    Archive,
    EvidenceInput,
    Forbidden,
    InvalidInput,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    SourceRef,
)
from mnemo_sea.archive.storage import schema as t


def count(archive: Archive, table: Any) -> int:
    with archive.store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def evidence(archive: Archive, who: Principal, eid: str, level: Sensitivity = Sensitivity.INTERNAL) -> None:
    archive.put_evidence(
        who, EvidenceInput(evidence_id=eid, body=f"body of {eid}", source="doc", sensitivity=level)
    )


def test_summary_keeps_sources_trace_and_derived_label(archive: Archive, agent: Principal) -> None:
    evidence(archive, agent, "policy:delivery")
    archive.record(agent, "s1", "orders.lookup", "order O-1042: shipped")
    summary = archive.create_summary(
        agent,
        "Order O-1042 shipped under the delivery policy.",
        ["result:s1/r1", "evidence:policy:delivery", SourceRef.evidence("policy:delivery")],
        trace_ref="trace://run-42/step-7",
    )
    assert summary.summary_id.startswith("sum:")
    # Duplicates collapse; refs are kept in a stable order.
    assert summary.derived_from == ("evidence:policy:delivery", "result:s1/r1")
    assert summary.trace_ref == "trace://run-42/step-7"
    assert "derived" in summary.label and "not original evidence" in summary.label

    read = archive.get_summary(agent, summary.summary_id)
    assert read.text == "Order O-1042 shipped under the delivery policy."
    assert read.derived_from == summary.derived_from
    assert read.trace_ref == "trace://run-42/step-7"
    assert "derived" in read.label
    assert read.sensitivity == summary.sensitivity == Sensitivity.INTERNAL

    with archive.store.read() as conn:
        row = conn.execute(select(t.outbox).where(t.outbox.c.entity == "summary")).one()
    assert (row.op, row.entity_ref) == ("index_upsert", summary.summary_id)
    assert json.loads(row.payload_json) == {"derived_from": list(summary.derived_from)}

    untraced = archive.create_summary(agent, "about the policy", ["evidence:policy:delivery"])
    assert untraced.trace_ref is None
    assert archive.get_summary(agent, untraced.summary_id).trace_ref is None


def test_sensitivity_is_the_highest_of_the_sources(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    evidence(archive, agent, "public-faq", Sensitivity.PUBLIC)
    archive.record(agent, "s1", "chart.read", "diagnosis: ...", sensitivity="confidential")
    summary = archive.create_summary(agent, "the case", ["evidence:public-faq", "result:s1/r1"])
    assert summary.sensitivity == Sensitivity.CONFIDENTIAL
    assert archive.get_summary(admin, summary.summary_id).sensitivity == Sensitivity.CONFIDENTIAL

    internal = Principal("clinic-a", "nurse-1", frozenset({Role.READER}), Sensitivity.INTERNAL)
    with pytest.raises(Forbidden) as err:
        archive.get_summary(internal, summary.summary_id)
    assert "the case" not in err.value.message
    assert err.value.detail["needed_clearance"] == "confidential"

    only_public = archive.create_summary(agent, "faq", ["evidence:public-faq"])
    assert only_public.sensitivity == Sensitivity.PUBLIC
    assert archive.get_summary(internal, only_public.summary_id).text == "faq"


def test_a_summary_may_not_launder_a_source_above_clearance(archive: Archive, admin: Principal) -> None:
    evidence(archive, admin, "board-minutes", Sensitivity.RESTRICTED)
    evidence(archive, admin, "faq", Sensitivity.PUBLIC)
    low = Principal("clinic-a", "agent-2", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
    with pytest.raises(Forbidden):
        archive.create_summary(low, "minutes say ...", ["evidence:faq", "evidence:board-minutes"])
    assert count(archive, t.summaries) == 0 and count(archive, t.summary_sources) == 0


MISSING_SOURCES = [
    ["evidence:missing"],
    ["evidence:present", "evidence:missing"],
    ["result:s1/r9"],
    ["result:no-such-session/r1"],
    ["evidence:present", "result:s1/r2"],
]


def test_sources_must_exist(archive: Archive, agent: Principal) -> None:
    evidence(archive, agent, "present")
    archive.record(agent, "s1", "t", "only r1")
    for refs in MISSING_SOURCES:
        with pytest.raises(NotFound) as err:
            archive.create_summary(agent, "text", refs)
        assert err.value.detail["what"] == "source"
        assert err.value.detail["ref"] in refs and err.value.detail["ref"] not in ("evidence:present",)
    assert count(archive, t.summaries) == 0 and count(archive, t.summary_sources) == 0
    with archive.store.read() as conn:
        assert conn.execute(select(t.outbox).where(t.outbox.c.entity == "summary")).first() is None
    # A retracted source no longer answers as evidence, so nothing can be summarised from it.
    archive.retract(agent, "present", "withdrawn")
    with pytest.raises(NotFound):
        archive.create_summary(agent, "text", ["evidence:present"])


def test_sources_of_another_tenant_do_not_exist(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    evidence(archive, agent, "policy:delivery")
    archive.record(agent, "s1", "t", "r1")
    for ref in ("evidence:policy:delivery", "result:s1/r1"):
        with pytest.raises(NotFound) as err:
            archive.create_summary(other_tenant, "stolen", [ref])
        assert err.value.message == f"source {ref!r} not found"
    assert count(archive, t.summaries) == 0


BAD_INPUT: list[tuple[Any, Any, Any, str]] = [
    ("", ["evidence:a"], None, "text"),
    ("   ", ["evidence:a"], None, "text"),
    ("a\x00b", ["evidence:a"], None, "text"),
    ("x" * 64_001, ["evidence:a"], None, "text"),
    (None, ["evidence:a"], None, "text"),
    ("ok", [], None, "derived_from"),
    ("ok", "evidence:a", None, "derived_from"),
    ("ok", ["a"], None, "derived_from"),
    ("ok", [7], None, "derived_from"),
    ("ok", ["evidence:"], None, "evidence_id"),
    ("ok", ["result:s1/x1"], None, "result_id"),
    ("ok", ["evidence:a"], "t" * 1025, "trace_ref"),
    ("ok", ["evidence:a"], 5, "trace_ref"),
]


def test_bad_input(archive: Archive, agent: Principal) -> None:
    evidence(archive, agent, "a")
    for text, refs, trace_ref, field in BAD_INPUT:
        with pytest.raises(InvalidInput) as err:
            archive.create_summary(agent, text, refs, trace_ref=trace_ref)
        assert err.value.field == field, (text, refs, trace_ref)
    assert count(archive, t.summaries) == 0
    with pytest.raises(NotFound) as missing:
        archive.get_summary(agent, "sum:0000")
    assert missing.value.message == "summary 'sum:0000' not found"
    with pytest.raises(InvalidInput):
        archive.get_summary(agent, "s" * 65)


def test_roles(archive: Archive, agent: Principal) -> None:
    evidence(archive, agent, "a")
    reader = Principal("clinic-a", "user-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
    with pytest.raises(Forbidden):
        archive.create_summary(reader, "text", ["evidence:a"])
    summary = archive.create_summary(agent, "text", ["evidence:a"])
    assert archive.get_summary(reader, summary.summary_id).summary_id == summary.summary_id
