"""Evidence records: versions that supersede and never overwrite, retraction, `as_of` reads on
both time axes, hash-verified content, bad input that stores nothing, and owner scoping.

Each test covers one rule with several cases on one database (a PostgreSQL database per test
is the expensive part of the suite)."""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, update

from mnemo_sea.archive import (
    Archive,
    ArchivePolicy,
    ContentTooLarge,
    EvidenceInput,
    Forbidden,
    IntegrityFailure,
    InvalidBatch,
    InvalidInput,
    NotFound,
    Principal,
    RetractedContent,
    Role,
    Sensitivity,
    StateConflict,
)
from mnemo_sea.archive.storage import schema as t

DAY = timedelta(days=1)
TICK = timedelta(microseconds=1)
EID = "policy:delivery:2026-10"


def count(archive: Archive, table: Any) -> int:
    with archive.store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def outbox_rows(archive: Archive) -> list[tuple[str, str, str, dict[str, Any]]]:
    with archive.store.read() as conn:
        rows = conn.execute(select(t.outbox).order_by(t.outbox.c.id)).all()
    return [(r.op, r.entity, r.entity_ref, json.loads(r.payload_json)) for r in rows]


def policy_doc(body: str, evidence_id: str = EID, **kw: Any) -> EvidenceInput:
    return EvidenceInput(
        evidence_id=evidence_id,
        body=body,
        source="handbook/delivery.md",
        locator="#cold-chain",
        statement=kw.pop("statement", body[:40]),
        **kw,
    )


def user(subject: str, clearance: Sensitivity = Sensitivity.CONFIDENTIAL) -> Principal:
    """An end user: reader role, acting for itself."""
    return Principal("clinic-a", subject, frozenset({Role.READER}), clearance)


# ---- versions ------------------------------------------------------------------------------


def test_new_versions_supersede_and_old_ones_stay_readable(archive: Archive, agent: Principal) -> None:
    v1 = archive.put_evidence(agent, policy_doc("Ships Monday to Wednesday."))
    assert (v1.evidence_id, v1.version, v1.status, v1.ended_at) == (EID, 1, "active", None)
    assert v1.content_sha256 == hashlib.sha256(b"Ships Monday to Wednesday.").hexdigest()
    assert (v1.source, v1.locator, v1.kind, v1.provenance) == (
        "handbook/delivery.md",
        "#cold-chain",
        "knowledge",
        "document",
    )
    assert v1.media_type.startswith("text/plain") and v1.recorded_at.tzinfo is not None
    assert archive.get_evidence(agent, EID)[0] == v1

    v2 = archive.put_evidence(agent, policy_doc("Ships Monday to Thursday."))
    assert (v2.version, v2.status) == (2, "active")
    current, body = archive.get_evidence(agent, EID, with_content=True)
    assert current.version == 2 and body == b"Ships Monday to Thursday."
    old, old_body = archive.get_evidence(agent, EID, version=1, with_content=True)
    assert old.status == "superseded"
    assert old.ended_at is not None and old.ended_at == v2.recorded_at  # no gap, no overlap
    assert old_body == b"Ships Monday to Wednesday."
    assert old.content_sha256 == v1.content_sha256 != v2.content_sha256

    # A change of metadata alone is a new version too; it shares the content-addressed original.
    v3 = archive.put_evidence(agent, policy_doc("Ships Monday to Thursday.", sensitivity="confidential"))
    assert (v3.version, v3.sensitivity, v3.content_sha256) == (3, Sensitivity.CONFIDENTIAL, v2.content_sha256)
    assert count(archive, t.blobs) == 2

    history = archive.evidence_history(agent, EID)
    assert [(h.version, h.status) for h in history] == [(1, "superseded"), (2, "superseded"), (3, "active")]
    assert history[0] == old

    # Each version gets its own index point; the superseded one is flagged (not removed, so
    # `as_of` searches still find it) in the same transaction.
    ops = [(op, ref) for op, entity, ref, _ in outbox_rows(archive) if entity == "evidence"]
    assert ops == [
        ("index_upsert", f"{EID}@1"),
        ("index_status", f"{EID}@1"),
        ("index_upsert", f"{EID}@2"),
        ("index_status", f"{EID}@2"),
        ("index_upsert", f"{EID}@3"),
    ]

    # Other ids have chains of their own; no id given means a generated one.
    assert archive.put_evidence(agent, EvidenceInput(evidence_id="other", body="1", source="s")).version == 1
    generated = archive.put_evidence(agent, EvidenceInput(body="no id given", source="s"))
    assert generated.evidence_id.startswith("ev:") and generated.version == 1


def test_identical_reput_is_a_no_op(archive: Archive, agent: Principal) -> None:
    item = policy_doc(
        "Ships Monday to Wednesday.",
        valid_from=datetime(2026, 10, 1, tzinfo=UTC),
        valid_until=datetime(2026, 11, 1, tzinfo=UTC),
        owner="user-7",
    )
    first = archive.put_evidence(agent, item)
    outbox_before = outbox_rows(archive)
    again = archive.put_evidence(agent, item)
    assert again == first
    # The same instants in another time zone are the same record.
    shifted = policy_doc(
        "Ships Monday to Wednesday.",
        valid_from=datetime(2026, 10, 1, 8, tzinfo=ZoneInfo("Asia/Shanghai")),
        valid_until=datetime(2026, 11, 1, 8, tzinfo=ZoneInfo("Asia/Shanghai")),
        owner="user-7",
    )
    assert archive.put_evidence(agent, shifted) == first
    assert archive.evidence_history(agent, EID) == [first]
    assert outbox_rows(archive) == outbox_before
    assert count(archive, t.evidence) == 1 and count(archive, t.blobs) == 1


# ---- retraction ----------------------------------------------------------------------------


def test_retraction(archive: Archive, agent: Principal) -> None:
    with pytest.raises(NotFound):
        archive.retract(agent, EID, "nothing to retract yet")
    archive.put_evidence(agent, policy_doc("v1"))
    archive.put_evidence(agent, policy_doc("v2"))
    with pytest.raises(InvalidInput) as bad:
        archive.retract(agent, EID, "   ")
    assert bad.value.field == "reason"
    assert archive.get_evidence(agent, EID)[0].status == "active"

    retracted = archive.retract(agent, EID, "the policy was withdrawn")
    assert (retracted.version, retracted.status) == (2, "retracted") and retracted.ended_at is not None

    # No active version afterwards; the history is intact and every version readable.
    with pytest.raises(NotFound):
        archive.get_evidence(agent, EID)
    history = archive.evidence_history(agent, EID)
    assert [(h.version, h.status) for h in history] == [(1, "superseded"), (2, "retracted")]
    rec, body = archive.get_evidence(agent, EID, version=2, with_content=True)
    assert rec.status == "retracted" and body == b"v2"
    # As of before the retraction, the retracted version was the one in force.
    assert archive.get_evidence(agent, EID, as_of=retracted.ended_at - TICK)[0].version == 2
    with pytest.raises(NotFound):
        archive.get_evidence(agent, EID, as_of=retracted.ended_at)
    ops = [(op, e, ref) for op, e, ref, _ in outbox_rows(archive)][-2:]
    assert ops == [("index_delete", "evidence", f"{EID}@2"), ("cache_purge", "tenant", "clinic-a")]

    with pytest.raises(StateConflict) as twice:
        archive.retract(agent, EID, "again")
    assert twice.value.detail["evidence_id"] == EID
    assert archive.evidence_history(agent, EID) == history

    # A later put starts a new active version; the retracted one stays in history.
    reinstated = archive.put_evidence(agent, policy_doc("v3"))
    assert (reinstated.version, reinstated.status) == (3, "active")
    assert [h.status for h in archive.evidence_history(agent, EID)] == ["superseded", "retracted", "active"]


# ---- as_of on both axes --------------------------------------------------------------------


def test_as_of_transaction_time(archive: Archive, agent: Principal) -> None:
    v1 = archive.put_evidence(agent, policy_doc("Monday to Wednesday"))
    v2 = archive.put_evidence(agent, policy_doc("Monday to Thursday"))

    with pytest.raises(NotFound) as err:
        archive.get_evidence(agent, EID, as_of=v1.recorded_at - TICK)
    assert "as of" in err.value.message
    assert archive.get_evidence(agent, EID, as_of=v1.recorded_at)[0].version == 1
    assert archive.get_evidence(agent, EID, as_of=v2.recorded_at - TICK)[0].version == 1
    assert archive.get_evidence(agent, EID, as_of=v2.recorded_at)[0].version == 2
    assert archive.get_evidence(agent, EID, as_of=v2.recorded_at + DAY)[0].version == 2
    # Content as of a past moment is that version's original, hash-verified.
    _, body = archive.get_evidence(agent, EID, as_of=v2.recorded_at - TICK, with_content=True)
    assert body == b"Monday to Wednesday"
    # Any time zone names the same instant.
    shanghai = (v2.recorded_at - TICK).astimezone(ZoneInfo("Asia/Shanghai"))
    assert archive.get_evidence(agent, EID, as_of=shanghai)[0].version == 1


def test_as_of_valid_time(archive: Archive, agent: Principal) -> None:
    now = datetime.now(UTC)
    rec = archive.put_evidence(
        agent,
        policy_doc("Autumn", evidence_id="autumn", valid_from=now - 10 * DAY, valid_until=now + 10 * DAY),
    )
    assert rec.valid_from is not None and rec.valid_until is not None
    assert rec.valid_at(now) and not rec.valid_at(rec.valid_until)
    assert archive.get_evidence(agent, "autumn", as_of=now + DAY)[0].version == 1
    assert archive.get_evidence(agent, "autumn", as_of=rec.valid_until - TICK)[0].version == 1
    for outside in (rec.valid_until, now + 20 * DAY):  # valid_until is exclusive
        with pytest.raises(NotFound):
            archive.get_evidence(agent, "autumn", as_of=outside)
    # Without as_of the active version is returned whatever its validity.
    assert archive.get_evidence(agent, "autumn")[0].version == 1

    # Both axes at once: the version read is in force at T *and* valid at T. A superseded
    # version is not resurrected because the current one is not valid yet.
    change = now + 10 * DAY
    archive.put_evidence(agent, policy_doc("summer schedule", valid_until=change))
    v2 = archive.put_evidence(agent, policy_doc("autumn schedule", valid_from=change))
    assert archive.get_evidence(agent, EID, as_of=change)[0].version == 2
    with pytest.raises(NotFound):
        archive.get_evidence(agent, EID, as_of=now + DAY)
    assert archive.get_evidence(agent, EID, as_of=v2.recorded_at - TICK)[0].version == 1


# ---- content -------------------------------------------------------------------------------


def test_content_is_hash_verified(archive: Archive, agent: Principal, admin: Principal) -> None:
    raw = b"\xff\xfe binary \x00 original"
    rec = archive.put_evidence(agent, EvidenceInput(evidence_id="scan:1", body=raw, source="scanner"))
    assert rec.media_type == "application/octet-stream"
    got, body = archive.get_evidence(agent, "scan:1", with_content=True)
    assert body == raw and hashlib.sha256(body).hexdigest() == got.content_sha256
    assert archive.get_evidence(agent, "scan:1")[1] is None  # metadata only unless asked

    with archive.store.write() as conn:
        conn.execute(update(t.blobs).where(t.blobs.c.sha256 == rec.content_sha256).values(content=b"forged"))
    with pytest.raises(IntegrityFailure) as err:
        archive.get_evidence(agent, "scan:1", with_content=True)
    assert err.value.detail["sha256"] == rec.content_sha256
    assert err.value.detail["actual_sha256"] == hashlib.sha256(b"forged").hexdigest()
    # Metadata stays readable; the failure is on the audit chain.
    assert archive.get_evidence(agent, "scan:1")[0].version == 1
    event = archive.audit_events(admin)[-1]
    assert (event.action, event.target) == ("integrity_failure", "evidence:scan:1")


# ---- bad input stores nothing --------------------------------------------------------------

NAIVE = datetime(2026, 10, 1, 12, 0)
AWARE = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


def bad(field: str, **kw: Any) -> tuple[str, EvidenceInput]:
    values: dict[str, Any] = {"evidence_id": "ok", "body": "b", "source": "s"}
    return field, EvidenceInput(**(values | kw))


BAD_INPUT = [
    bad("evidence_id", evidence_id=""),
    bad("evidence_id", evidence_id="has space"),
    bad("evidence_id", evidence_id="-leading-dash"),
    bad("evidence_id", evidence_id="x" * 257),
    bad("evidence_id", evidence_id="nul\x00id"),
    bad("source", source=""),
    bad("source", source="   "),
    bad("source", source="s" * 1025),
    bad("scope", scope=""),
    bad("statement", statement=""),
    bad("statement", statement="x" * 4001),
    bad("locator", locator="a\x00b"),
    bad("kind", kind="rumour"),
    bad("provenance", provenance="hearsay"),
    bad("sensitivity", sensitivity="top-secret"),
    bad("media_type", media_type="not a type"),
    bad("owner", owner="bad owner"),
    bad("session_id", session_id=""),
    bad("content", body=12),
    bad("valid_until", valid_from=AWARE, valid_until=AWARE),
    bad("valid_until", valid_from=AWARE, valid_until=AWARE - DAY),
    bad("valid_from", valid_from=NAIVE),
    bad("valid_until", valid_until=NAIVE),
    bad("observed_at", observed_at=NAIVE),
]


def test_bad_input_is_a_typed_error_and_stores_nothing(archive: Archive, agent: Principal) -> None:
    for field, item in BAD_INPUT:
        with pytest.raises(InvalidInput) as err:
            archive.put_evidence(agent, item)
        assert err.value.field == field, (item, err.value)
        assert err.value.to_dict()["code"] == "invalid_input"
    for table in (t.evidence, t.blobs, t.outbox):
        assert count(archive, table) == 0, table.name
    # (A new SQLite archive's only event is its deployment key's, in the deployment's chain.)
    with archive.store.read() as conn:
        events = conn.execute(select(t.audit_events.c.tenant_id, t.audit_events.c.action)).all()
    assert [tuple(e) for e in events] in ([], [("_deployment", "receipt_key_create")])

    # Nor does bad input touch an existing record.
    v1 = archive.put_evidence(agent, policy_doc("original"))
    outbox_before = outbox_rows(archive)
    for item in (
        policy_doc("changed", provenance="gossip"),
        policy_doc("changed", valid_from=NAIVE),
        policy_doc("changed", valid_from=AWARE, valid_until=AWARE - DAY),
    ):
        with pytest.raises(InvalidInput):
            archive.put_evidence(agent, item)
    assert archive.evidence_history(agent, EID) == [v1]
    assert count(archive, t.blobs) == 1 and outbox_rows(archive) == outbox_before


def test_oversize_body_is_rejected(archive: Archive, db_url: str, agent: Principal) -> None:
    small = Archive.open(db_url, ArchivePolicy(max_content_bytes=1024))
    try:
        small.put_evidence(agent, EvidenceInput(evidence_id="big", body=b"x" * 1024, source="s"))
        with pytest.raises(ContentTooLarge) as err:
            small.put_evidence(agent, EvidenceInput(evidence_id="big", body=b"y" * 1025, source="s"))
        assert (err.value.size, err.value.limit, err.value.field) == (1025, 1024, "content")
        with pytest.raises(ContentTooLarge):  # characters are counted as their UTF-8 bytes
            small.put_evidence(agent, EvidenceInput(evidence_id="big2", body="é" * 513, source="s"))
    finally:
        small.close()
    assert [h.version for h in archive.evidence_history(agent, "big")] == [1]
    assert count(archive, t.blobs) == 1
    with pytest.raises(NotFound):
        archive.evidence_history(agent, "big2")


def test_bad_arguments_on_reads(archive: Archive, agent: Principal) -> None:
    bad_ids: list[Any] = ["", "has space", "a" * 300, "ünïcode", None, 7]
    for bad_id in bad_ids:
        for read in (archive.get_evidence, archive.evidence_history):
            with pytest.raises(InvalidInput) as err:
                read(agent, bad_id)
            assert err.value.field == "evidence_id"
        with pytest.raises(InvalidInput) as err:
            archive.retract(agent, bad_id, "r")
        assert err.value.field == "evidence_id"
    archive.put_evidence(agent, policy_doc("x"))
    for version in (0, -1):
        with pytest.raises(InvalidInput) as err:
            archive.get_evidence(agent, EID, version=version)
        assert err.value.field == "version"
    with pytest.raises(NotFound):
        archive.get_evidence(agent, EID, version=2)
    with pytest.raises(InvalidInput) as err:
        archive.get_evidence(agent, EID, as_of=NAIVE)
    assert err.value.field == "as_of"


# ---- owner scoping, roles and clearance ----------------------------------------------------


def test_owner_scoped_evidence_is_read_by_its_owner_agents_and_admins(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    rec = archive.put_evidence(
        agent,
        EvidenceInput(
            evidence_id="note:user-7:allergy",
            body="allergic to penicillin",
            source="intake form",
            kind="memory",
            provenance="user_claim",
            owner="user-7",
        ),
    )
    assert rec.owner == "user-7"
    for reader in (user("user-7"), agent, admin):
        got, body = archive.get_evidence(reader, rec.evidence_id, with_content=True)
        assert got.version == 1 and body == b"allergic to penicillin"
        assert [h.version for h in archive.evidence_history(reader, rec.evidence_id)] == [1]

    stranger = user("user-8")
    for call in (
        lambda: archive.get_evidence(stranger, rec.evidence_id, with_content=True),
        lambda: archive.get_evidence(stranger, rec.evidence_id, version=1),
        lambda: archive.get_evidence(stranger, rec.evidence_id, as_of=rec.recorded_at),
        lambda: archive.evidence_history(stranger, rec.evidence_id),
    ):
        with pytest.raises(Forbidden) as err:
            call()
        assert err.value.detail["owner"] == "user-7" and "penicillin" not in err.value.message


def test_roles_and_clearance(archive: Archive, agent: Principal, admin: Principal) -> None:
    archive.put_evidence(agent, policy_doc("v1"))
    reader = user("user-7", Sensitivity.RESTRICTED)
    with pytest.raises(Forbidden):
        archive.put_evidence(reader, policy_doc("v2"))
    with pytest.raises(Forbidden):
        archive.retract(reader, EID, "no")
    assert [h.status for h in archive.evidence_history(agent, EID)] == ["active"]

    with pytest.raises(Forbidden):  # an agent cannot store above its own clearance
        archive.put_evidence(agent, policy_doc("top secret", evidence_id="minutes", sensitivity="restricted"))
    with pytest.raises(NotFound):
        archive.evidence_history(admin, "minutes")
    archive.put_evidence(admin, policy_doc("top secret", evidence_id="minutes", sensitivity="restricted"))
    for call in (
        lambda: archive.get_evidence(agent, "minutes"),
        lambda: archive.evidence_history(agent, "minutes"),
        lambda: archive.retract(agent, "minutes", "no"),
    ):
        with pytest.raises(Forbidden) as err:
            call()
        assert err.value.detail["needed_clearance"] == "restricted"
    assert archive.get_evidence(admin, "minutes")[0].status == "active"
    assert archive.get_evidence(reader, "minutes")[0].status == "active"


# ---- concurrent writers -------------------------------------------------------------------


def run_together(n: int, work: Callable[[int], object]) -> list[BaseException]:
    """Run work(0..n-1) in n threads released at once; return the errors raised."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except BaseException as e:  # collected and asserted on by the caller
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_concurrent_writers_of_one_id_take_turns(archive: Archive, agent: Principal) -> None:
    """Writers racing on one evidence id (new or existing) all succeed, one version each, stamped
    in commit order: the chain is the same as if they had written one after another."""
    archive.put_evidence(agent, policy_doc("v0", evidence_id="existing"))
    for eid, first_version in (("fresh", 1), ("existing", 2)):

        def write(i: int, eid: str = eid) -> object:
            return archive.put_evidence(agent, policy_doc(f"writer {i}", evidence_id=eid))

        errors = run_together(6, write)
        assert errors == []
        history = archive.evidence_history(agent, eid)
        assert [h.version for h in history] == list(range(1, first_version + 6))
        assert [h.status for h in history] == ["superseded"] * (first_version + 4) + ["active"]
        for older, newer in itertools.pairwise(history):
            assert older.recorded_at <= newer.recorded_at and older.ended_at == newer.recorded_at
    # A retraction racing with new versions never finds "no active version" while one exists.
    errors = run_together(
        4,
        lambda i: (
            archive.retract(agent, "existing", "withdrawn")
            if i == 0
            else archive.put_evidence(agent, policy_doc(f"late {i}", evidence_id="existing"))
        ),
    )
    assert errors == []
    assert sum(h.status == "retracted" for h in archive.evidence_history(agent, "existing")) == 1


# ---- the version chain as an invariant -----------------------------------------------------


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.sampled_from(["a", "b", "c", "retract"]), min_size=1, max_size=7))
def test_version_chain_invariants(archive: Archive, agent: Principal, ops: list[str]) -> None:
    """Whatever the sequence of puts and retractions: versions are 1..n, at most one is active,
    a superseded version ends exactly when the next begins, and as_of each recorded_at reads it."""
    eid = f"prop:{datetime.now(UTC).timestamp()}:{hashlib.sha256(repr(ops).encode()).hexdigest()[:8]}"
    bodies: list[str] = []
    active: str | None = None
    retracted: set[str] = set()  # a retraction stands until the content changes
    for op in ops:
        if op == "retract":
            with pytest.raises(StateConflict if bodies else NotFound) if active is None else nullcontext():
                archive.retract(agent, eid, "r")
            if active is not None:
                retracted.add(active)
            active = None
        elif op in retracted and op != active:
            with pytest.raises(RetractedContent):
                archive.put_evidence(agent, EvidenceInput(evidence_id=eid, body=op, source="s"))
        else:
            archive.put_evidence(agent, EvidenceInput(evidence_id=eid, body=op, source="s"))
            if op != active:
                bodies.append(op)
            active = op
    if not bodies:
        with pytest.raises(NotFound):
            archive.evidence_history(agent, eid)
        return
    history = archive.evidence_history(agent, eid)
    assert [h.version for h in history] == list(range(1, len(bodies) + 1))
    assert [h.status == "active" for h in history] == [False] * (len(bodies) - 1) + [active is not None]
    for h, body in zip(history, bodies, strict=True):
        rec, content = archive.get_evidence(agent, eid, as_of=h.recorded_at, with_content=True)
        assert rec.version == h.version and content == body.encode()
        assert (h.ended_at is None) == (h.status == "active")
    for older, newer in itertools.pairwise(history):
        assert older.status in ("superseded", "retracted")
        if older.status == "superseded":
            assert older.ended_at == newer.recorded_at
        else:
            assert older.ended_at is not None and older.ended_at <= newer.recorded_at


def test_a_batch_is_stored_all_or_nothing_and_names_each_bad_item(archive: Archive, agent: Principal) -> None:
    good = EvidenceInput(body="v1 text", source="kb", evidence_id="b:1")
    revised = EvidenceInput(body="v2 text", source="kb", evidence_id="b:1")
    bad = EvidenceInput(body="x", source="", evidence_id="b:2")
    worse = EvidenceInput(body="y", source="kb", evidence_id="b 3")
    with pytest.raises(InvalidBatch) as err:
        archive.write_evidence_batch(agent, [good, bad, revised, worse])
    assert [(p["index"], p["field"]) for p in err.value.problems] == [(1, "source"), (3, "evidence_id")]
    with pytest.raises(NotFound):
        archive.get_evidence(agent, "b:1")
    stored = archive.write_evidence_batch(agent, [good, revised]).records
    assert [(r.evidence_id, r.version, r.status) for r in stored] == [
        ("b:1", 1, "active"),
        ("b:1", 2, "active"),
    ]
    assert [h.status for h in archive.evidence_history(agent, "b:1")] == ["superseded", "active"]
