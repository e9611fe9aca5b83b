"""Deletion inside the archive: a record, a session or an owner, cascading to unreferenced
originals, derived summaries and derived memory facts, with outbox rows in the same transaction,
a receipt, `verify_deleted`, admin-only access, tenant isolation and an audit event."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import func, select

from mnemo_sea.archive import (
    Archive,
    DeletionReceipt,
    EvidenceInput,
    Forbidden,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    StateConflict,
    StoreUnavailable,
)
from mnemo_sea.archive import deletion as deletion_module
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.archive.storage.blobs import put_blob


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def count(archive: Archive, table: Any, **where: Any) -> int:
    with archive.store.read() as conn:
        stmt = select(func.count()).select_from(table)
        for column, value in where.items():
            stmt = stmt.where(table.c[column] == value)
        return int(conn.execute(stmt).scalar_one())


def outbox_of(archive: Archive, receipt: DeletionReceipt) -> list[tuple[str, str, str, dict[str, Any]]]:
    with archive.store.read() as conn:
        rows = conn.execute(
            select(t.outbox).where(t.outbox.c.id.in_(receipt.outbox_ids)).order_by(t.outbox.c.id)
        ).all()
    assert len(rows) == len(receipt.outbox_ids)
    assert all(r.tenant_id == receipt.tenant_id and r.done_at is None for r in rows)
    return [(r.op, r.entity, r.entity_ref, json.loads(r.payload_json)) for r in rows]


def put(archive: Archive, who: Principal, eid: str, body: str, **kw: Any) -> None:
    archive.put_evidence(who, EvidenceInput(evidence_id=eid, body=body, source="doc", **kw))


def table_counts(archive: Archive) -> dict[str, int]:
    tables = [t.evidence, t.blobs, t.sessions, t.tool_results, t.archive_entries, t.memory_facts]
    tables += [t.summaries, t.summary_sources, t.outbox, t.audit_events]
    return {table.name: count(archive, table) for table in tables}


# ---- delete_evidence -----------------------------------------------------------------------


def test_delete_evidence_cascades(archive: Archive, agent: Principal, admin: Principal) -> None:
    put(archive, agent, "policy:delivery", "ships Mon-Wed")
    put(archive, agent, "policy:delivery", "ships Mon-Thu")
    put(archive, agent, "faq:shipping", "ships Mon-Wed")  # shares the v1 original
    put(archive, agent, "policy:delivery-2", "another policy")
    both = archive.create_summary(
        agent, "delivery days", ["evidence:policy:delivery", "evidence:faq:shipping"]
    )
    faq_only = archive.create_summary(agent, "faq", ["evidence:faq:shipping"])
    lookalike = archive.create_summary(agent, "other policy", ["evidence:policy:delivery-2"])
    archive.remember(
        agent, "user-7", "delivery_days", "Mon-Wed", "document", derived_from="evidence:policy:delivery"
    )
    archive.remember(
        agent, "user-7", "delivery_days", "Mon-Thu", "document", derived_from="evidence:policy:delivery"
    )
    archive.remember(agent, "user-7", "timezone", "UTC", "user_claim")
    archive.remember(agent, "user-8", "policy", "x", "document", derived_from="evidence:policy:delivery-2")

    receipt = archive.delete_evidence(admin, "policy:delivery")

    assert receipt.tenant_id == "clinic-a" and receipt.target == "evidence:policy:delivery"
    assert sorted(receipt.evidence_versions) == [("policy:delivery", 1), ("policy:delivery", 2)]
    assert receipt.summaries == (both.summary_id,)
    assert sorted(receipt.memory_facts) == [("user-7", "delivery_days", 1), ("user-7", "delivery_days", 2)]
    assert receipt.blobs == (sha("ships Mon-Thu"),)  # the shared original survives
    assert receipt.content_sha256 == tuple(sorted([sha("ships Mon-Wed"), sha("ships Mon-Thu")]))
    assert receipt.tool_results == () and receipt.sessions == ()
    assert receipt.counts == {
        "evidence_versions": 2,
        "tool_results": 0,
        "sessions": 0,
        "memory_facts": 2,
        "summaries": 1,
        "task_states": 0,
        "blobs": 1,
    }

    # Gone from every read path ...
    with pytest.raises(NotFound):
        archive.get_evidence(agent, "policy:delivery")
    with pytest.raises(NotFound):
        archive.get_evidence(agent, "policy:delivery", version=1)
    with pytest.raises(NotFound):
        archive.evidence_history(agent, "policy:delivery")
    with pytest.raises(NotFound):
        archive.get_summary(agent, both.summary_id)
    assert archive.current(agent, "user-7", "delivery_days") is None
    assert archive.memory_history(agent, "user-7", "delivery_days") == []
    assert count(archive, t.summary_sources, summary_id=both.summary_id) == 0
    # ... while what merely shares an original or an id prefix is untouched.
    _, body = archive.get_evidence(agent, "faq:shipping", with_content=True)
    assert body == b"ships Mon-Wed"
    assert archive.get_summary(agent, faq_only.summary_id).text == "faq"
    assert archive.get_summary(agent, lookalike.summary_id).text == "other policy"
    assert archive.get_evidence(agent, "policy:delivery-2")[0].version == 1
    assert archive.current(agent, "user-7", "timezone") is not None
    assert archive.current(agent, "user-8", "policy") is not None

    outbox = outbox_of(archive, receipt)
    assert sorted((op, entity, ref) for op, entity, ref, _ in outbox) == sorted(
        [
            ("index_delete", "evidence", "policy:delivery@1"),
            ("index_delete", "evidence", "policy:delivery@2"),
            ("index_delete", "memory", "user-7/delivery_days@1"),
            ("index_delete", "memory", "user-7/delivery_days@2"),
            ("index_delete", "summary", both.summary_id),
            ("cache_purge", "tenant", "clinic-a"),
        ]
    )
    purge = next(payload for op, _, _, payload in outbox if op == "cache_purge")
    assert purge["content_sha256"] == sorted([sha("ships Mon-Wed"), sha("ships Mon-Thu")])

    assert archive.verify_deleted(admin, receipt) == []
    event = archive.audit_events(admin)[-1]
    assert (event.seq, event.action, event.target, event.actor) == (
        receipt.audit_seq,
        "delete",
        "evidence:policy:delivery",
        "admin-1",
    )
    assert event.detail == receipt.counts


def test_verify_deleted_names_what_came_back(archive: Archive, agent: Principal, admin: Principal) -> None:
    put(archive, agent, "policy:delivery", "ships Mon-Wed")
    archive.remember(agent, "user-7", "days", "Mon-Wed", "document", derived_from="evidence:policy:delivery")
    summary = archive.create_summary(agent, "s", ["evidence:policy:delivery"])
    receipt = archive.delete_evidence(admin, "policy:delivery")
    assert archive.verify_deleted(admin, receipt) == []

    put(archive, agent, "policy:delivery", "ships Mon-Wed")  # same id, same original
    assert archive.verify_deleted(admin, receipt) == ["evidence policy:delivery@1", "originals (blobs)"]
    archive.remember(agent, "user-7", "days", "Mon-Wed", "document", derived_from="evidence:policy:delivery")
    assert "memory user-7/days@1" in archive.verify_deleted(admin, receipt)
    # A summary re-inserted under the receipt's id (as a restore from backup would) is named too.
    with archive.store.write() as conn:
        conn.execute(
            t.summaries.insert().values(
                tenant_id="clinic-a",
                summary_id=summary.summary_id,
                text="restored",
                trace_ref=None,
                created_at=summary.created_at,
                created_by="backup",
                sensitivity=1,
            )
        )
    assert "summaries" in archive.verify_deleted(admin, receipt)


def test_deleting_what_does_not_exist_is_not_found_and_changes_nothing(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    put(archive, agent, "kb", "text")
    before = table_counts(archive)
    with pytest.raises(NotFound) as err:
        archive.delete_evidence(admin, "no-such-id")
    assert err.value.message == "evidence 'no-such-id' not found"
    with pytest.raises(NotFound) as err:
        archive.delete_session(admin, "s-none")
    assert err.value.message == "session 's-none' not found"
    assert table_counts(archive) == before

    # An owner with nothing stored yields an empty receipt, and the request is audited.
    receipt = archive.delete_owner(admin, "nobody")
    assert receipt.counts == dict.fromkeys(receipt.counts, 0)
    assert (receipt.evidence_versions, receipt.memory_facts, receipt.summaries) == ((), (), ())
    assert archive.verify_deleted(admin, receipt) == []
    event = archive.audit_events(admin)[-1]
    assert (event.action, event.target, event.seq) == ("delete", "owner:nobody", receipt.audit_seq)


# ---- delete_session ------------------------------------------------------------------------


def test_delete_session_cascades(archive: Archive, agent: Principal, admin: Principal) -> None:
    archive.record(agent, "s1", "orders.lookup", "order O-1042: shipped", arguments={"id": "O-1042"})
    archive.record(agent, "s1", "kb.read", "refund window is 30 days")
    archive.archive_results(agent, "s1", [("r1", "order shipped")])
    archive.recover(agent, "s1", "r1")  # r3, a copy that shares r1's original
    put(archive, agent, "kb:refunds", "refund window is 30 days")  # shares r2's original
    archive.record(agent, "s10", "orders.lookup", "order O-2000: pending")  # an id with s1 as prefix
    from_s1 = archive.create_summary(agent, "O-1042 shipped", ["result:s1/r1"])
    from_s10 = archive.create_summary(agent, "O-2000 pending", ["result:s10/r1"])
    archive.remember(agent, "user-7", "refund_window", "30d", "tool_fact", derived_from="result:s1/r2")
    archive.remember(agent, "user-7", "order", "O-2000", "tool_fact", derived_from="result:s10/r1")
    # Evidence recorded from a session's tool result belongs to that session.
    put(archive, agent, "fact:O-1042", "order O-1042: shipped", kind="tool_result", session_id="s1")
    put(archive, agent, "fact:O-2000", "order O-2000: pending", kind="tool_result", session_id="s10")
    from_fact = archive.create_summary(agent, "O-1042 fact", ["evidence:fact:O-1042"])

    receipt = archive.delete_session(admin, "s1")

    assert receipt.target == "session:s1" and receipt.sessions == ("s1",)
    assert sorted(receipt.tool_results) == ["s1/r1", "s1/r2", "s1/r3"]
    assert receipt.evidence_versions == (("fact:O-1042", 1),)
    assert sorted(receipt.summaries) == sorted([from_s1.summary_id, from_fact.summary_id])
    assert receipt.memory_facts == (("user-7", "refund_window", 1),)
    assert receipt.blobs == (sha("order O-1042: shipped"),)
    assert receipt.content_sha256 == tuple(
        sorted([sha("order O-1042: shipped"), sha("refund window is 30 days")])
    )

    for call in (
        lambda: archive.live_view(agent, "s1"),
        lambda: archive.list_results(agent, "s1"),
        lambda: archive.recover(agent, "s1", "r1"),
    ):
        with pytest.raises(NotFound):
            call()
    assert count(archive, t.archive_entries, session_id="s1") == 0
    assert count(archive, t.tool_results, session_id="s1") == 0
    for gone in (from_s1.summary_id, from_fact.summary_id):
        with pytest.raises(NotFound):
            archive.get_summary(agent, gone)
    with pytest.raises(NotFound):
        archive.evidence_history(agent, "fact:O-1042")
    assert archive.get_evidence(agent, "fact:O-2000")[0].session_id == "s10"
    assert archive.current(agent, "user-7", "refund_window") is None

    assert archive.get_evidence(agent, "kb:refunds", with_content=True)[1] == b"refund window is 30 days"
    assert "O-2000: pending" in archive.live_view(agent, "s10").text
    assert archive.get_summary(agent, from_s10.summary_id).derived_from == ("result:s10/r1",)
    assert archive.current(agent, "user-7", "order") is not None

    outbox = outbox_of(archive, receipt)
    assert sorted((op, entity, ref) for op, entity, ref, _ in outbox) == sorted(
        [
            ("index_delete", "tool_result", "s1/r1"),
            ("index_delete", "tool_result", "s1/r2"),
            ("index_delete", "tool_result", "s1/r3"),
            ("index_delete", "evidence", "fact:O-1042@1"),
            ("index_delete", "memory", "user-7/refund_window@1"),
            ("index_delete", "summary", from_s1.summary_id),
            ("index_delete", "summary", from_fact.summary_id),
            ("cache_purge", "tenant", "clinic-a"),
        ]
    )
    purge = next(payload for op, _, _, payload in outbox if op == "cache_purge")
    assert purge["content_sha256"] == list(receipt.content_sha256)

    assert archive.verify_deleted(admin, receipt) == []
    # Rows put back behind the archive's back (a restore from an old backup) are named.
    with archive.store.write() as conn:
        digest = put_blob(conn, "clinic-a", b"order O-1042: shipped", "text/plain; charset=utf-8")
    assert archive.verify_deleted(admin, receipt) == ["originals (blobs)"]
    with archive.store.write() as conn:
        conn.execute(
            t.tool_results.insert().values(
                tenant_id="clinic-a",
                session_id="s1",
                result_no=1,
                tool_name="orders.lookup",
                arguments_json="{}",
                blob_sha256=digest,
                media_type="text/plain; charset=utf-8",
                size=21,
                observed_at=receipt.deleted_at,
                recorded_at=receipt.deleted_at,
                recorded_by="backup",
                sensitivity=1,
                policy_class="default",
                state="live",
                recovered_from_no=None,
            )
        )
    assert archive.verify_deleted(admin, receipt) == ["results of session s1", "originals (blobs)"]


# ---- delete_owner --------------------------------------------------------------------------


def test_delete_owner_removes_everything_of_one_owner(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    u7 = Principal("clinic-a", "user-7", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)
    archive.record(u7, "s-u7", "chat", "I am allergic to penicillin")  # a session owned by user-7
    archive.record(agent, "s-staff", "chat", "staff notes")
    archive.remember(u7, "user-7", "timezone", "UTC", "user_claim")
    archive.remember(u7, "user-7", "timezone", "Asia/Shanghai", "user_correction")
    archive.remember(u7, "user-7", "language", "zh", "user_claim")
    archive.remember(agent, "user-8", "timezone", "Europe/Paris", "user_claim")
    put(archive, agent, "note:u7", "allergy: penicillin", owner="user-7")
    put(archive, agent, "note:u7", "allergy: penicillin, latex", owner="user-7")
    put(archive, agent, "note:u8", "allergy: none", owner="user-8")
    put(archive, agent, "kb", "general knowledge")
    archive.remember(agent, "user-8", "seen_case", "u7 allergy", "document", derived_from="evidence:note:u7")
    s_note = archive.create_summary(agent, "u7 allergies", ["evidence:note:u7"])
    s_chat = archive.create_summary(agent, "u7 chat", ["result:s-u7/r1"])
    s_kb = archive.create_summary(agent, "kb", ["evidence:kb"])

    receipt = archive.delete_owner(admin, "user-7")

    assert receipt.target == "owner:user-7"
    assert sorted(receipt.memory_facts) == [
        ("user-7", "language", 1),
        ("user-7", "timezone", 1),
        ("user-7", "timezone", 2),
        ("user-8", "seen_case", 1),
    ]
    assert sorted(receipt.evidence_versions) == [("note:u7", 1), ("note:u7", 2)]
    assert receipt.sessions == ("s-u7",) and receipt.tool_results == ("s-u7/r1",)
    assert sorted(receipt.summaries) == sorted([s_note.summary_id, s_chat.summary_id])
    assert sorted(receipt.blobs) == sorted(
        [sha("I am allergic to penicillin"), sha("allergy: penicillin"), sha("allergy: penicillin, latex")]
    )

    assert archive.facts(agent, "user-7") == []
    assert archive.memory_history(agent, "user-7", "timezone") == []
    with pytest.raises(NotFound):
        archive.get_evidence(agent, "note:u7", version=1)
    with pytest.raises(NotFound):
        archive.live_view(agent, "s-u7")
    for sid in (s_note.summary_id, s_chat.summary_id):
        with pytest.raises(NotFound):
            archive.get_summary(agent, sid)
    # Everyone else's data stays.
    assert [f.key for f in archive.facts(agent, "user-8")] == ["timezone"]
    assert archive.get_evidence(agent, "note:u8")[0].owner == "user-8"
    assert archive.get_evidence(agent, "kb")[0].version == 1
    assert archive.get_summary(agent, s_kb.summary_id).text == "kb"
    assert "staff notes" in archive.live_view(agent, "s-staff").text

    refs = {(op, entity, ref) for op, entity, ref, _ in outbox_of(archive, receipt)}
    assert refs == {
        ("index_delete", "memory", "user-7/language@1"),
        ("index_delete", "memory", "user-7/timezone@1"),
        ("index_delete", "memory", "user-7/timezone@2"),
        ("index_delete", "memory", "user-8/seen_case@1"),
        ("index_delete", "evidence", "note:u7@1"),
        ("index_delete", "evidence", "note:u7@2"),
        ("index_delete", "tool_result", "s-u7/r1"),
        ("index_delete", "summary", s_note.summary_id),
        ("index_delete", "summary", s_chat.summary_id),
        ("cache_purge", "tenant", "clinic-a"),
    }
    assert archive.verify_deleted(admin, receipt) == []
    archive.remember(agent, "user-7", "timezone", "UTC", "user_claim")
    assert archive.verify_deleted(admin, receipt) == ["memory user-7/timezone@1"]


# ---- access --------------------------------------------------------------------------------


def test_deletion_needs_the_admin_role(archive: Archive, agent: Principal, admin: Principal) -> None:
    put(archive, agent, "kb", "text")
    archive.record(agent, "s1", "t", "result")
    archive.remember(agent, "user-7", "k", "v", "user_claim")
    receipt = archive.delete_owner(admin, "nobody")
    before = table_counts(archive)

    for call in (
        lambda: archive.delete_evidence(agent, "kb"),
        lambda: archive.delete_session(agent, "s1"),
        lambda: archive.delete_owner(agent, "user-7"),
        lambda: archive.verify_deleted(agent, receipt),
    ):
        with pytest.raises(Forbidden) as err:
            call()
        assert err.value.detail["needed_role"] == "admin"

    after = table_counts(archive)
    assert after.pop("audit_events") == before.pop("audit_events") + 4  # four 'denied' events
    assert after == before
    denied = archive.audit_events(admin)[-4:]
    assert [e.action for e in denied] == ["denied"] * 4
    assert [e.target for e in denied] == ["evidence:kb", "session:s1", "owner:user-7", "owner:nobody"]
    assert {e.actor for e in denied} == {"agent-1"}


def test_another_tenant_cannot_delete_and_sees_nothing(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    put(archive, agent, "kb", "shared text")
    archive.record(agent, "s1", "t", "result")
    archive.remember(agent, "user-7", "k", "v", "user_claim")
    put(archive, other_tenant, "own-kb", "shared text")  # the same bytes, its own original

    with pytest.raises(NotFound) as err:
        archive.delete_evidence(other_tenant, "kb")
    with pytest.raises(NotFound) as missing:
        archive.delete_evidence(other_tenant, "kb-missing")
    assert err.value.message == "evidence 'kb' not found"
    assert missing.value.message == "evidence 'kb-missing' not found"
    with pytest.raises(NotFound) as err:
        archive.delete_session(other_tenant, "s1")
    assert err.value.message == "session 's1' not found"
    empty = archive.delete_owner(other_tenant, "user-7")
    assert empty.tenant_id == "shop-b" and empty.memory_facts == ()

    assert archive.get_evidence(agent, "kb", with_content=True)[1] == b"shared text"
    assert "result" in archive.live_view(agent, "s1").text
    assert archive.current(agent, "user-7", "k") is not None
    # Tenant A's deletion of the same bytes leaves tenant B's original alone.
    receipt = archive.delete_evidence(admin, "kb")
    assert receipt.blobs == (sha("shared text"),)
    # A receipt is verified only by its own tenant: elsewhere it would vacuously look complete.
    with pytest.raises(NotFound):
        archive.verify_deleted(other_tenant, receipt)
    with pytest.raises(NotFound):
        archive.verify_deleted(admin, empty)
    assert archive.get_evidence(other_tenant, "own-kb", with_content=True)[1] == b"shared text"
    # Tenant B's audit chain has its own delete; A's chain has A's.
    assert [e.target for e in archive.audit_events(other_tenant) if e.action == "delete"] == ["owner:user-7"]
    assert [e.target for e in archive.audit_events(admin) if e.action == "delete"] == ["evidence:kb"]


# ---- atomicity -----------------------------------------------------------------------------


def test_a_deletion_that_fails_at_its_last_step_changes_nothing(
    archive: Archive, agent: Principal, admin: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows, originals, derived data and outbox rows go in one transaction: a failure while
    writing the audit event (the last step) leaves every one of them in place."""
    put(archive, agent, "kb", "text", owner="user-7")
    archive.record(agent, "s1", "t", "result")
    archive.create_summary(agent, "summary", ["evidence:kb", "result:s1/r1"])
    archive.remember(agent, "user-7", "k", "v", "document", derived_from="evidence:kb")
    before = table_counts(archive)

    def broken_append(*args: Any, **kwargs: Any) -> int:
        raise sa_exc.OperationalError("INSERT INTO audit_events", {}, Exception("connection lost"))

    monkeypatch.setattr(deletion_module, "append_event", broken_append)
    calls: list[Callable[[], object]] = [
        lambda: archive.delete_evidence(admin, "kb"),
        lambda: archive.delete_session(admin, "s1"),
        lambda: archive.delete_owner(admin, "user-7"),
    ]
    for call in calls:
        with pytest.raises(StoreUnavailable):
            call()
        assert table_counts(archive) == before
    monkeypatch.undo()

    assert archive.get_evidence(agent, "kb", with_content=True)[1] == b"text"
    assert archive.current(agent, "user-7", "k") is not None
    # With the store healthy again the same deletion goes through whole.
    receipt = archive.delete_owner(admin, "user-7")
    assert receipt.counts["evidence_versions"] == 1 and receipt.counts["summaries"] == 1
    assert archive.verify_deleted(admin, receipt) == []


def test_delete_owner_reaches_sessions_an_agent_recorded_for_that_owner(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.record(agent, "visit-u7", "lab.query", "user-7's lab values", owner="user-7")
    archive.record(agent, "visit-u8", "lab.query", "user-8's lab values", owner="user-8")
    with pytest.raises(StateConflict):
        archive.record(agent, "visit-u7", "lab.query", "someone else's", owner="user-8")
    receipt = archive.delete_owner(admin, "user-7")
    assert receipt.sessions == ("visit-u7",)
    assert archive.verify_deleted(admin, receipt) == []
    with pytest.raises(NotFound):
        archive.live_view(agent, "visit-u7")
    assert [r.result_id for r in archive.list_results(agent, "visit-u8")] == ["r1"]
