"""Evidence writes in the audit chain (issue 30: every write is a new version with its audit event).

A write that makes versions (`put_evidence`, `write_evidence_batch`) appends exactly one
`put_evidence` event in its transaction, naming every version it made; one that makes none (an
unchanged record, an idempotent replay, a refused write) appends nothing. A big batch's event
stays bounded (the first VERSIONS_LISTED versions, their count and a digest of them all). The
chain still verifies, against anchors too, and each tenant's chain holds only its own writes.
Checked on the stored rows of `audit_events`, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from sqlalchemy import select, update

from mnemo_sea.archive import Archive, EvidenceInput, Principal, RetractedContent
from mnemo_sea.archive.features.evidence import VERSIONS_LISTED
from mnemo_sea.archive.storage import schema as t


def stored_events(archive: Archive, tenant: str) -> list[dict[str, Any]]:
    """The tenant's events as the table holds them (detail parsed), oldest first."""
    e = t.audit_events
    with archive.store.read() as conn:
        rows = conn.execute(select(e).where(e.c.tenant_id == tenant).order_by(e.c.seq)).all()
    return [{**r._mapping, "detail": json.loads(r.detail_json)} for r in rows]


def item(eid: str, body: str) -> EvidenceInput:
    return EvidenceInput(evidence_id=eid, body=body, source="kb")


def digest(*versions: str) -> str:
    return hashlib.sha256("\n".join(versions).encode()).hexdigest()


def put_view(event: dict[str, Any]) -> tuple[Any, ...]:
    return (event["seq"], event["action"], event["actor"], event["target"], event["detail"])


def test_a_put_appends_one_event_naming_its_version_and_an_unchanged_put_none(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.put_evidence(agent, item("kb:1", "first"))
    archive.put_evidence(agent, item("kb:1", "second"))
    unchanged = archive.put_evidence(agent, item("kb:1", "second"))
    assert unchanged.version == 2
    events = stored_events(archive, agent.tenant_id)
    assert [put_view(e) for e in events] == [
        (
            1,
            "put_evidence",
            "agent-1",
            "evidence:kb:1@1",
            {"count": 1, "versions": ["kb:1@1"], "versions_sha256": digest("kb:1@1")},
        ),
        (
            2,
            "put_evidence",
            "agent-1",
            "evidence:kb:1@2",
            {"count": 1, "versions": ["kb:1@2"], "versions_sha256": digest("kb:1@2")},
        ),
    ]
    # Each event names a version the archive holds, made by the event's actor.
    with archive.store.read() as conn:
        made = conn.execute(
            select(t.evidence.c.evidence_id, t.evidence.c.version, t.evidence.c.recorded_by)
            .where(t.evidence.c.tenant_id == agent.tenant_id)
            .order_by(t.evidence.c.version)
        ).all()
    assert [(f"{r.evidence_id}@{r.version}", r.recorded_by) for r in made] == [
        (e["detail"]["versions"][0], e["actor"]) for e in events
    ]
    assert archive.verify_audit(admin).ok


def test_a_batch_appends_one_event_naming_every_version_it_made(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.put_evidence(agent, item("b", "b stays"))  # event 1
    batch = archive.write_evidence_batch(
        agent,
        [
            item("a", "a one"),
            item("b", "b stays"),  # unchanged: no version, not named
            item("a", "a two"),  # a second version of the same record in the same write
            item("c", "c one"),
        ],
    )
    assert list(batch.made) == ["a@1", "a@2", "c@1"]
    events = stored_events(archive, agent.tenant_id)
    assert [put_view(e) for e in events[1:]] == [
        (
            2,
            "put_evidence",
            "agent-1",
            "evidence:batch of 3",
            {"count": 3, "versions": ["a@1", "a@2", "c@1"], "versions_sha256": digest("a@1", "a@2", "c@1")},
        )
    ]
    # A batch of which every item is unchanged makes nothing and appends nothing; one that makes
    # a single version names it as a put does.
    archive.write_evidence_batch(agent, [item("a", "a two"), item("c", "c one")])
    archive.write_evidence_batch(agent, [item("a", "a two"), item("c", "c two")])
    assert [
        (e["seq"], e["target"], e["detail"]["versions"]) for e in stored_events(archive, agent.tenant_id)[2:]
    ] == [(3, "evidence:c@2", ["c@2"])]
    assert archive.verify_audit(admin).ok


def test_an_idempotent_replay_appends_no_event(archive: Archive, agent: Principal, admin: Principal) -> None:
    first = archive.put_evidence(agent, item("kb", "text"), idempotency_key="put-1")
    batch = archive.write_evidence_batch(agent, [item("x", "x"), item("y", "y")], idempotency_key="batch-1")
    before = stored_events(archive, agent.tenant_id)
    assert [e["target"] for e in before] == ["evidence:kb@1", "evidence:batch of 2"]
    assert archive.put_evidence(agent, item("kb", "text"), idempotency_key="put-1") == first
    again = archive.write_evidence_batch(agent, [item("x", "x"), item("y", "y")], idempotency_key="batch-1")
    assert again.records == batch.records and again.made == {}
    assert stored_events(archive, agent.tenant_id) == before
    # The head did not move either: nothing was appended and then removed.
    with archive.store.read() as conn:
        head = conn.execute(select(t.audit_heads).where(t.audit_heads.c.tenant_id == agent.tenant_id)).one()
    assert (head.last_seq, head.last_hash) == (2, before[-1]["hash"])
    assert archive.verify_audit(admin).ok


def test_a_refused_write_appends_no_put_event(archive: Archive, agent: Principal) -> None:
    archive.put_evidence(agent, item("kb", "withdrawn text"))
    archive.retract(agent, "kb", "wrong")
    with pytest.raises(RetractedContent):
        archive.write_evidence_batch(agent, [item("new", "fine"), item("kb", "withdrawn text")])
    assert [(e["action"], e["target"]) for e in stored_events(archive, agent.tenant_id)] == [
        ("put_evidence", "evidence:kb@1"),
        ("retract", "evidence:kb@1"),
    ]
    with archive.store.read() as conn:
        ids = conn.execute(select(t.evidence.c.evidence_id).where(t.evidence.c.tenant_id == agent.tenant_id))
        assert [r.evidence_id for r in ids] == ["kb"]  # all or nothing: "new" was not stored either


def test_a_big_batch_s_event_is_bounded_and_binds_every_version(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    """The largest batch (1,000 records) of the longest ids (256 characters) lists the first
    VERSIONS_LISTED versions, not all of them; the count and the digest cover every one."""
    ids = [f"{n:04d}".ljust(256, "x") for n in range(archive.store.policy.max_batch_size)]
    batch = archive.write_evidence_batch(agent, [item(eid, f"body {eid[:4]}") for eid in ids])
    every = [f"{eid}@1" for eid in ids]
    assert list(batch.made) == every
    (event,) = stored_events(archive, agent.tenant_id)
    assert event["target"] == f"evidence:batch of {len(ids)}"
    assert event["detail"] == {
        "count": len(ids),
        "versions": every[:VERSIONS_LISTED],
        "versions_sha256": digest(*every),
    }
    full_list = len(json.dumps(every))
    assert len(event["detail_json"]) < 30_000 < full_list  # about 26 KB, where the whole list is 260 KB
    assert archive.verify_audit(admin).ok


def test_the_chain_verifies_against_anchors_and_an_edited_write_event_is_caught(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    anchor = archive.audit_anchor(admin)  # the empty chain
    archive.put_evidence(agent, item("kb", "one"))
    archive.write_evidence_batch(agent, [item("kb", "two"), item("other", "x")])
    later = archive.audit_anchor(admin)
    assert later.seq == 2
    assert archive.verify_audit(admin, [anchor, later]).ok
    # Claiming the write made another version breaks the chain at that event.
    e = t.audit_events
    with archive.store.write() as conn:
        conn.execute(
            update(e)
            .where(e.c.tenant_id == agent.tenant_id, e.c.seq == 2)
            .values(detail_json='{"count":2,"versions":["kb@2","planted@1"],"versions_sha256":"0"}')
        )
    assert archive.verify_audit(admin).problems == (
        "event 2 was altered (its content no longer matches its hash)",
    )


def test_each_tenant_s_chain_holds_only_its_own_writes(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    # The same ids in both tenants: each write is audited in its writer's tenant only.
    archive.put_evidence(agent, item("shared", "A's text"))
    archive.write_evidence_batch(other_tenant, [item("shared", "B's text"), item("b-only", "B")])
    archive.put_evidence(other_tenant, item("shared", "B's second"))
    a_events, b_events = stored_events(archive, "clinic-a"), stored_events(archive, "shop-b")
    assert [(e["seq"], e["actor"], e["target"]) for e in a_events] == [(1, "agent-1", "evidence:shared@1")]
    assert [(e["seq"], e["actor"], e["target"]) for e in b_events] == [
        (1, "agent-9", "evidence:batch of 2"),
        (2, "agent-9", "evidence:shared@2"),
    ]
    # Through the archive's readers, as each tenant's admin: only its own chain, found by target too.
    assert [e.seq for e in archive.audit_events(admin)] == [1]
    assert [e.seq for e in archive.find_audit_events(admin, action="put_evidence")] == [1]
    assert archive.find_audit_events(admin, target="evidence:shared@2") == []
    assert [e.seq for e in archive.find_audit_events(other_tenant, target_contains="shared")] == [2]
    assert archive.verify_audit(admin).events == 1
    assert archive.verify_audit(other_tenant).events == 2
