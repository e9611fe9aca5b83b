"""Memory facts that are forgotten: TTL expiry shown as `expired` and purged like a deletion,
`forget` of one fact, `derived_from` checked like a summary's sources, and the provenance
precedence (a lower-ranked write never silently supersedes a higher-ranked current fact)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from fakes import ManualWallClock
from sqlalchemy import select

from mnemo_sea.archive import (
    Archive,
    ArchivePolicy,
    EvidenceInput,
    Forbidden,
    MemoryConflict,
    NotFound,
    Principal,
    Role,
    Sensitivity,
    StateConflict,
)
from mnemo_sea.archive.deletion import PURGE_SUBJECT
from mnemo_sea.archive.storage import schema as t


def user(subject: str) -> Principal:
    return Principal("clinic-a", subject, frozenset({Role.READER}), Sensitivity.INTERNAL)


def rows_holding(archive: Archive, marker: str) -> list[str]:
    """Every row of every archive table (any column) whose text holds `marker`."""
    found: list[str] = []
    with archive.store.read() as conn:
        for table in t.metadata.sorted_tables:
            for row in conn.execute(select(table)):
                texts = [
                    bytes(v).decode("utf-8", "replace") if isinstance(v, bytes | memoryview) else str(v)
                    for v in row
                ]
                if any(marker in text for text in texts):
                    found.append(table.name)
    return found


def memory_outbox(archive: Archive) -> list[tuple[str, str]]:
    with archive.store.read() as conn:
        rows = conn.execute(select(t.outbox).where(t.outbox.c.entity == "memory").order_by(t.outbox.c.id))
        return [(r.op, r.entity_ref) for r in rows]


# ---- TTL: expired everywhere, then purged ----------------------------------------------------


def test_an_expired_fact_reads_expired_and_the_purge_deletes_it(
    archive: Archive, agent: Principal, admin: Principal, wall_clock: ManualWallClock
) -> None:
    ttl = 0.3
    archive.remember(agent, "user-7", "city", "Berlin", "user_claim")  # no TTL: kept as history
    paris = archive.remember(agent, "user-7", "city", "Paris-marker-7f3a", "user_claim", ttl_seconds=ttl).fact
    mood = archive.remember(agent, "user-7", "mood", "hungry-marker-91c2", "user_claim", ttl_seconds=ttl).fact
    lasting = archive.remember(agent, "user-7", "diet", "vegan", "user_claim", ttl_seconds=86_400).fact
    assert paris.status == "active"
    wall_clock.past(max(paris.expires_at, mood.expires_at))  # type: ignore[type-var]

    # Expired is shown as expired, not active, before any purge ran.
    assert [(f.value, f.status) for f in archive.memory_history(agent, "user-7", "city")] == [
        ("Berlin", "superseded"),
        ("Paris-marker-7f3a", "expired"),
    ]
    assert archive.current(agent, "user-7", "mood") is None
    assert [f.key for f in archive.facts(agent, "user-7")] == ["diet"]

    with pytest.raises(Forbidden):
        archive.purge_expired(agent)  # a deletion: admins only
    events_before = len(archive.audit_events(admin))
    receipt = archive.purge_expired(admin)
    assert receipt is not None
    assert sorted(receipt.memory_facts) == [("user-7", "city", 2), ("user-7", "mood", 1)]
    assert archive.verify_deleted(admin, receipt) == []

    # Nothing of the expired values is left in any table: rows, outbox payloads, audit details.
    assert rows_holding(archive, "marker-7f3a") == []
    assert rows_holding(archive, "marker-91c2") == []
    # The superseded value without a TTL and the fact that has not expired stay.
    assert [(f.value, f.status) for f in archive.memory_history(agent, "user-7", "city")] == [
        ("Berlin", "superseded")
    ]
    assert archive.memory_history(agent, "user-7", "mood") == []
    assert archive.current(agent, "user-7", "diet") == lasting
    # The index points and cached searches go through the outbox of the same transaction.
    outbox = memory_outbox(archive)
    assert ("index_delete", "user-7/city@2") in outbox and ("index_delete", "user-7/mood@1") in outbox
    with archive.store.read() as conn:
        purges = conn.execute(
            select(t.outbox.c.id).where(t.outbox.c.op == "cache_purge", t.outbox.c.id.in_(receipt.outbox_ids))
        ).all()
    assert len(purges) == 1
    events = archive.audit_events(admin)
    assert len(events) == events_before + 1
    assert (events[-1].action, events[-1].target, events[-1].actor, events[-1].seq) == (
        "delete",
        "memory:expired",
        "admin-1",
        receipt.audit_seq,
    )
    assert events[-1].detail["memory_facts"] == 2

    # A second purge finds nothing, writes nothing, audits nothing.
    assert archive.purge_expired(admin) is None
    assert len(archive.audit_events(admin)) == events_before + 1
    # A new value after the purge is a fact like any other.
    again = archive.remember(agent, "user-7", "mood", "calm", "user_claim")
    assert again.persisted and archive.current(agent, "user-7", "mood") == again.fact


def test_the_scheduled_purge_covers_every_tenant_and_only_what_expired(
    archive: Archive, agent: Principal, other_tenant: Principal
) -> None:
    day = timedelta(days=1)
    archive.remember(agent, "user-7", "k", "a", "user_claim", ttl_seconds=day.total_seconds())
    archive.remember(other_tenant, "user-7", "k", "b", "user_claim", ttl_seconds=day.total_seconds())
    archive.remember(agent, "user-8", "k", "c", "user_claim", ttl_seconds=3 * day.total_seconds())
    assert archive.purge_expired_everywhere() == []  # nothing has expired yet
    receipts = archive.purge_expired_everywhere(now=datetime.now(UTC) + 2 * day)
    assert sorted((r.tenant_id, r.memory_facts) for r in receipts) == [
        ("clinic-a", (("user-7", "k", 1),)),
        ("shop-b", (("user-7", "k", 1),)),
    ]
    assert archive.memory_history(agent, "user-7", "k") == []
    assert archive.memory_history(other_tenant, "user-7", "k") == []
    assert [f.value for f in archive.memory_history(agent, "user-8", "k")] == ["c"]
    for who in (agent, other_tenant):
        admin = Principal(who.tenant_id, "a", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
        last = archive.audit_events(admin)[-1]
        assert (last.actor, last.action, last.target) == (PURGE_SUBJECT, "delete", "memory:expired")


def test_one_tenant_failing_its_purge_does_not_stop_the_others(
    archive: Archive, agent: Principal, other_tenant: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemo_sea.archive import IntegrityFailure, deletion

    day = timedelta(days=1)
    archive.remember(agent, "user-7", "k", "a", "user_claim", ttl_seconds=day.total_seconds())
    archive.remember(other_tenant, "user-7", "k", "b", "user_claim", ttl_seconds=day.total_seconds())
    purge = deletion.purge_expired

    def failing_for_clinic(store: object, principal: Principal, **kw: object) -> object:
        if principal.tenant_id == agent.tenant_id:  # sorted first: it must not block shop-b
            raise IntegrityFailure("audit chain of clinic-a is broken")
        return purge(store, principal, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(deletion, "purge_expired", failing_for_clinic)
    with pytest.raises(IntegrityFailure):
        archive.purge_expired_everywhere(now=datetime.now(UTC) + 2 * day)
    assert archive.memory_history(other_tenant, "user-7", "k") == []
    assert [f.value for f in archive.memory_history(agent, "user-7", "k")] == ["a"]


# ---- forget ----------------------------------------------------------------------------------


def test_forget_deletes_every_version_like_a_deletion(archive: Archive, admin: Principal) -> None:
    me = user("user-7")
    archive.remember(me, "user-7", "address", "12 Elm-marker-5d1e", "user_claim")
    archive.remember(me, "user-7", "address", "34 Oak-marker-5d1e", "user_correction")
    archive.remember(me, "user-7", "language", "zh", "user_claim")

    with pytest.raises(Forbidden):
        archive.forget(user("user-8"), "user-7", "address")  # not theirs to forget
    receipt = archive.forget(me, "user-7", "address", idempotency_key="forget-1")
    assert (receipt.target, sorted(receipt.memory_facts)) == (
        "memory:user-7/address",
        [("user-7", "address", 1), ("user-7", "address", 2)],
    )
    assert archive.verify_deleted(admin, receipt) == []
    assert archive.current(me, "user-7", "address") is None
    assert archive.memory_history(me, "user-7", "address") == []
    assert rows_holding(archive, "marker-5d1e") == []
    assert ("index_delete", "user-7/address@1") in memory_outbox(archive)
    assert ("index_delete", "user-7/address@2") in memory_outbox(archive)
    last = archive.audit_events(admin)[-1]
    assert (last.actor, last.action, last.target) == ("user-7", "delete", "memory:user-7/address")
    # Other facts of the owner stay; a retry replays the receipt; a missing fact is NotFound.
    assert [f.key for f in archive.facts(me, "user-7")] == ["language"]
    assert archive.forget(me, "user-7", "address", idempotency_key="forget-1") == receipt
    with pytest.raises(NotFound):
        archive.forget(me, "user-7", "address")


# ---- derived_from is checked like a summary's sources ----------------------------------------


def test_derived_from_must_name_a_source_the_caller_can_read(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    archive.put_evidence(agent, EvidenceInput(evidence_id="form:7", body="tz UTC", source="intake"))
    archive.put_evidence(
        admin,
        EvidenceInput(evidence_id="chart:7", body="x", source="ehr", sensitivity=Sensitivity.RESTRICTED),
    )
    archive.put_evidence(agent, EvidenceInput(evidence_id="note:u8", body="y", source="ehr", owner="user-8"))
    archive.put_evidence(other_tenant, EvidenceInput(evidence_id="theirs", body="z", source="kb"))
    archive.record(agent, "s1", "crm.lookup", "city: Paris")

    cases: list[tuple[Principal, str, type[Exception], str]] = [
        (agent, "evidence:never-stored", NotFound, "evidence:never-stored"),
        (agent, "evidence:theirs", NotFound, "evidence:theirs"),  # another tenant's is missing
        (agent, "result:s1/r9", NotFound, "result:s1/r9"),
        (agent, "result:s-none/r1", NotFound, "result:s-none/r1"),
        (agent, "evidence:chart:7", Forbidden, "evidence:chart:7"),  # above the agent's clearance
        (user("user-7"), "evidence:note:u8", Forbidden, "evidence:note:u8"),  # another owner's
    ]
    for who, ref, error, named in cases:
        for provenance in ("document", "model_inference"):  # a candidate is checked too
            with pytest.raises(error) as err:
                archive.remember(who, "user-7", "tz", "UTC", provenance, derived_from=ref)
            assert named in err.value.message, (ref, err.value.message)
            if isinstance(err.value, NotFound):
                assert err.value.detail["ref"] == ref
    with archive.store.read() as conn:
        assert conn.execute(select(t.memory_facts)).all() == []

    ok = archive.remember(agent, "user-7", "tz", "UTC", "document", derived_from="evidence:form:7")
    assert ok.persisted and ok.fact.derived_from == "evidence:form:7"
    from_result = archive.remember(agent, "user-7", "city", "Paris", "tool_fact", derived_from="result:s1/r1")
    assert from_result.fact.derived_from == "result:s1/r1"


# ---- provenance precedence -------------------------------------------------------------------


def test_a_user_claim_does_not_silently_supersede_a_user_correction(
    archive: Archive, db_url: str, wall_clock: ManualWallClock
) -> None:
    me = user("user-7")
    archive.remember(me, "user-7", "timezone", "UTC", "user_claim")
    corrected = archive.remember(me, "user-7", "timezone", "Asia/Shanghai", "user_correction").fact

    for provenance in ("user_claim", "document", "tool_fact"):
        with pytest.raises(MemoryConflict) as err:
            archive.remember(me, "user-7", "timezone", "Europe/Paris", provenance)
        assert isinstance(err.value, StateConflict)  # 409 over REST, exit 5 in the CLI
        assert err.value.code == "memory_conflict"
        assert {k: err.value.detail[k] for k in ("current_version", "current_provenance", "provenance")} == {
            "current_version": 2,
            "current_provenance": "user_correction",
            "provenance": provenance,
        }
    assert archive.current(me, "user-7", "timezone") == corrected
    assert len(archive.memory_history(me, "user-7", "timezone")) == 2

    # The same rank supersedes (the user corrected themselves again), and so does a higher one.
    again = archive.remember(me, "user-7", "timezone", "Europe/Paris", "user_correction")
    assert again.fact.version == 3
    archive.remember(me, "user-7", "city", "Berlin", "tool_fact")
    claimed = archive.remember(me, "user-7", "city", "Paris", "user_claim")
    assert claimed.reason == "supersedes version 1"
    with pytest.raises(MemoryConflict):
        archive.remember(me, "user-7", "city", "Rome", "tool_fact")  # a tool does not overrule the user

    # A model inference stays a candidate even where the policy persists inferences.
    permissive = Archive.open(db_url, ArchivePolicy(persist_model_inferences=True))
    try:
        guess = permissive.remember(me, "user-7", "timezone", "UTC", "model_inference")
        assert not guess.persisted and "does not supersede the current user_correction" in guess.reason
    finally:
        permissive.close()
    current = archive.current(me, "user-7", "timezone")
    assert current is not None and current.value == "Europe/Paris"

    # An expired higher-ranked fact is no longer current: it does not block a new value.
    archive.remember(me, "user-7", "mood", "tired", "user_correction", ttl_seconds=0.2)
    wall_clock.advance(0.25)
    after = archive.remember(me, "user-7", "mood", "fine", "user_claim")
    assert after.persisted and after.fact.version == 2


def test_conflict_detail_and_outbox_stay_clean(archive: Archive, agent: Principal) -> None:
    archive.remember(agent, "user-7", "allergy", "penicillin", "user_correction")
    with archive.store.read() as conn:
        before = conn.execute(select(t.outbox.c.id)).all()
    with pytest.raises(MemoryConflict) as err:
        archive.remember(agent, "user-7", "allergy", "none", "document")
    assert json.dumps(err.value.to_dict())  # a typed error every surface can serialise
    with archive.store.read() as conn:
        assert conn.execute(select(t.outbox.c.id)).all() == before
