"""Access: another tenant's records are indistinguishable from missing ones (same error, same
message), and a missing role or clearance is Forbidden and leaves a 'denied' event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from mnemo_sea.archive import (
    Archive,
    ArchiveError,
    EvidenceInput,
    Forbidden,
    NotFound,
    Principal,
    Role,
    Sensitivity,
)
from mnemo_sea.archive.storage import schema as t


def error_of(call: Callable[[], object]) -> ArchiveError:
    with pytest.raises(ArchiveError) as err:
        call()
    return err.value


def same_answer(before: ArchiveError, after: ArchiveError) -> None:
    assert type(before) is type(after) is NotFound
    assert (before.message, before.detail, before.to_dict()) == (after.message, after.detail, after.to_dict())


def count(archive: Archive, table: Any) -> int:
    with archive.store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


# ---- no existence oracle across tenants ----------------------------------------------------


def test_sessions_and_results_of_another_tenant_look_missing(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    """Tenant B asks the same questions before and after tenant A creates the thing: the answers
    are identical, so B learns nothing about A."""
    archive.record(other_tenant, "s2", "t", "B's own session with one result")
    questions: list[Callable[[], object]] = [
        lambda: archive.live_view(other_tenant, "s1"),
        lambda: archive.list_results(other_tenant, "s1"),
        lambda: archive.recover(other_tenant, "s1", "r1"),
        lambda: archive.archive_results(other_tenant, "s1", [("r1", "note")]),
        lambda: archive.recover(other_tenant, "s2", "r2"),
        lambda: archive.delete_session(other_tenant, "s1"),
    ]
    before = [error_of(q) for q in questions]
    archive.record(agent, "s1", "orders.lookup", "order O-1042")
    archive.archive_results(agent, "s1", [("r1", "order")])
    archive.record(agent, "s2", "orders.lookup", "A's s2 has an r2")
    archive.record(agent, "s2", "orders.lookup", "A's r2")
    archive.archive_results(agent, "s2", [("r2", "note")])
    after = [error_of(q) for q in questions]
    for b, a in zip(before, after, strict=True):
        same_answer(b, a)
    assert before[0].message == "session 's1' not found"
    assert before[4].message == "result 's2/r2' not found"
    # And A's data is intact.
    assert [r.state for r in archive.list_results(agent, "s1")] == ["archived"]


def test_evidence_of_another_tenant_looks_missing(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    questions: list[Callable[[], object]] = [
        lambda: archive.get_evidence(other_tenant, "policy:delivery"),
        lambda: archive.get_evidence(other_tenant, "policy:delivery", version=1),
        lambda: archive.get_evidence(other_tenant, "policy:delivery", with_content=True),
        lambda: archive.evidence_history(other_tenant, "policy:delivery"),
        lambda: archive.retract(other_tenant, "policy:delivery", "mine now"),
        lambda: archive.delete_evidence(other_tenant, "policy:delivery"),
        lambda: archive.create_summary(other_tenant, "s", ["evidence:policy:delivery"]),
    ]
    before = [error_of(q) for q in questions]
    archive.put_evidence(
        agent,
        EvidenceInput(evidence_id="policy:delivery", body="secret terms", source="doc", sensitivity="public"),
    )
    after = [error_of(q) for q in questions]
    for b, a in zip(before, after, strict=True):
        same_answer(b, a)
    assert before[0].message == "evidence 'policy:delivery' not found"
    assert "secret" not in " ".join(e.message for e in after)
    assert archive.get_evidence(agent, "policy:delivery")[0].status == "active"

    # Writing the same id in the other tenant makes a record of its own, not a version of A's.
    theirs = archive.put_evidence(
        other_tenant, EvidenceInput(evidence_id="policy:delivery", body="B's terms", source="doc")
    )
    assert theirs.version == 1
    assert archive.get_evidence(agent, "policy:delivery", with_content=True)[1] == b"secret terms"
    assert archive.get_evidence(other_tenant, "policy:delivery", with_content=True)[1] == b"B's terms"
    assert [h.version for h in archive.evidence_history(agent, "policy:delivery")] == [1]
    # Not found is an answer, not a denial: none of it is written to the asking tenant's chain,
    # which holds only its own write; A's holds only A's (the same target in each chain).
    assert [(e.seq, e.action, e.actor, e.target) for e in archive.audit_events(other_tenant)] == [
        (1, "put_evidence", "agent-9", "evidence:policy:delivery@1")
    ]
    assert [(e.seq, e.action, e.actor, e.target) for e in archive.audit_events(admin)] == [
        (1, "put_evidence", "agent-1", "evidence:policy:delivery@1")
    ]


def test_summaries_of_another_tenant_look_missing(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    archive.put_evidence(agent, EvidenceInput(evidence_id="kb", body="text", source="doc"))
    summary = archive.create_summary(agent, "confidential synthesis", ["evidence:kb"])
    from_other = error_of(lambda: archive.get_summary(other_tenant, summary.summary_id))
    # The same id, truly missing: delete the source (which deletes the summary) and ask again in A.
    archive.delete_evidence(admin, "kb")
    truly_missing = error_of(lambda: archive.get_summary(agent, summary.summary_id))
    same_answer(from_other, truly_missing)
    assert from_other.message == f"summary {summary.summary_id!r} not found"


# ---- Forbidden for role and clearance, audited ---------------------------------------------


def denied_events(archive: Archive, admin: Principal) -> list[tuple[str, str, str]]:
    return [
        (e.actor, e.target, e.detail["action"])
        for e in archive.audit_events(admin, limit=1000)
        if e.action == "denied"
    ]


def test_insufficient_role_is_forbidden_and_audited(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.record(agent, "s1", "t", "result")
    archive.archive_results(agent, "s1", [("r1", "note")])
    archive.put_evidence(agent, EvidenceInput(evidence_id="kb", body="text", source="doc"))
    reader = Principal("clinic-a", "user-7", frozenset({Role.READER}), Sensitivity.RESTRICTED)
    results_before = count(archive, t.tool_results)
    evidence_before = count(archive, t.evidence)

    attempts: list[tuple[Callable[[], object], str, str]] = [
        (lambda: archive.record(reader, "s1", "t", "x"), "session:s1", "record"),
        (lambda: archive.archive_results(reader, "s1", [("r1", "n")]), "session:s1", "archive"),
        (lambda: archive.recover(reader, "s1", "r1"), "session:s1/r1", "recover"),
        (
            lambda: archive.put_evidence(reader, EvidenceInput(evidence_id="kb", body="v2", source="d")),
            "evidence:kb",
            "put_evidence",
        ),
        (lambda: archive.retract(reader, "kb", "no"), "evidence:kb", "retract"),
        (lambda: archive.create_summary(reader, "s", ["evidence:kb"]), "summary", "create_summary"),
        (lambda: archive.delete_evidence(agent, "kb"), "evidence:kb", "delete"),
        (lambda: archive.delete_session(agent, "s1"), "session:s1", "delete"),
        (lambda: archive.verify_audit(agent), "audit", "verify_audit"),
    ]
    for call, _, _ in attempts:
        err = error_of(call)
        assert isinstance(err, Forbidden), err
        assert err.to_dict()["code"] == "forbidden" and "needed_role" in err.detail

    expected = [
        ("agent-1" if action in ("delete", "verify_audit") else "user-7", target, action)
        for _, target, action in attempts
    ]
    assert denied_events(archive, admin) == expected
    assert count(archive, t.tool_results) == results_before
    assert count(archive, t.evidence) == evidence_before
    assert archive.verify_audit(admin).ok


def test_insufficient_clearance_is_forbidden_and_audited(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.put_evidence(
        admin, EvidenceInput(evidence_id="minutes", body="board", source="doc", sensitivity="restricted")
    )
    archive.record(admin, "s1", "hr.read", "salary table", sensitivity="restricted")
    archive.archive_results(admin, "s1", [("r1", "salaries")])
    summary = archive.create_summary(admin, "about the board", ["evidence:minutes"])

    attempts: list[tuple[Callable[[], object], str, str]] = [
        (
            lambda: archive.get_evidence(agent, "minutes", with_content=True),
            "evidence:minutes",
            "get_evidence",
        ),
        (lambda: archive.evidence_history(agent, "minutes"), "evidence:minutes", "evidence_history"),
        (lambda: archive.retract(agent, "minutes", "no"), "evidence:minutes", "retract"),
        (lambda: archive.recover(agent, "s1", "r1"), "session:s1/r1", "recover"),
        (
            lambda: archive.get_summary(agent, summary.summary_id),
            f"summary:{summary.summary_id}",
            "get_summary",
        ),
        (
            lambda: archive.record(agent, "s1", "t", "x", sensitivity="restricted"),
            "session:s1",
            "record",
        ),
    ]
    for call, _, _ in attempts:
        err = error_of(call)
        assert isinstance(err, Forbidden), err
        assert err.detail["needed_clearance"] == "restricted"
        for secret in ("board", "salary"):
            assert secret not in err.message
    assert denied_events(archive, admin) == [("agent-1", target, action) for _, target, action in attempts]
    assert archive.get_evidence(admin, "minutes")[0].status == "active"
    assert [r.result_id for r in archive.list_results(admin, "s1")] == ["r1"]
    # A low-clearance reader of the session sees the result withheld in place, not its content.
    view = archive.live_view(agent, "s1")
    assert "salary" not in view.text and "salaries" not in view.text


def test_a_user_acting_for_another_owner_is_forbidden_and_audited(archive: Archive, admin: Principal) -> None:
    me = Principal("clinic-a", "user-7", frozenset({Role.READER}), Sensitivity.INTERNAL)
    with pytest.raises(Forbidden):
        archive.current(me, "user-8", "timezone")
    with pytest.raises(Forbidden):
        archive.remember(me, "user-8", "timezone", "UTC", "user_claim")
    assert denied_events(archive, admin) == [
        ("user-7", "memory:user-8/timezone", "memory_current"),
        ("user-7", "memory:user-8/timezone", "remember"),
    ]
    assert count(archive, t.memory_facts) == 0
