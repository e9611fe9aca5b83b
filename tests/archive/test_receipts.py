"""Deletion receipts and audit anchors are proof only this deployment can issue.

A receipt is signed with the deployment key (kept outside the archive's tables) and names its
deletion's audit event; `verify_deleted` rejects, with ReceiptInvalid naming the failed check,
a receipt that is hand-made, edited, signed by another deployment, or whose audit event the
chain no longer holds. A signed anchor (or a receipt) makes a rewound or rewritten chain show
in `verify_audit`, which the chain alone cannot: whoever writes the tables can recompute it.
Key creation and revocation are audited in the transaction that writes the key row.
"""

from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select, update

from mnemo_sea.archive import (
    Archive,
    DeletionReceipt,
    EvidenceInput,
    InvalidInput,
    NotFound,
    Principal,
    ReceiptInvalid,
    ReceiptKey,
    Role,
)
from mnemo_sea.archive import deletion as deletion_module
from mnemo_sea.archive.features.api_keys import create_key, revoke_key
from mnemo_sea.archive.storage import audit as audit_module
from mnemo_sea.archive.storage import receipts as receipts_module
from mnemo_sea.archive.storage import schema as t


def deleted(archive: Archive, agent: Principal, admin: Principal, eid: str = "kb:1") -> DeletionReceipt:
    archive.put_evidence(agent, EvidenceInput(evidence_id=eid, body=f"body of {eid}", source="doc"))
    return archive.delete_evidence(admin, eid)


def rejected(archive: Archive, admin: Principal, receipt: DeletionReceipt) -> ReceiptInvalid:
    with pytest.raises(ReceiptInvalid) as err:
        archive.verify_deleted(admin, receipt)
    assert err.value.code == "receipt_invalid" and err.value.detail["check"] == err.value.check
    return err.value


def test_an_untouched_receipt_is_signed_tied_to_its_audit_event_and_verifies(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    receipt = deleted(archive, agent, admin)
    assert archive.verify_deleted(admin, receipt) == []
    assert receipt.key_id == archive.store.receipt_key.key_id and len(receipt.signature) == 64
    with archive.store.read() as conn:
        row = conn.execute(
            select(t.audit_events).where(
                t.audit_events.c.tenant_id == "clinic-a", t.audit_events.c.seq == receipt.audit_seq
            )
        ).one()
    assert (row.action, row.target, row.hash) == ("delete", "evidence:kb:1", receipt.audit_hash)
    # An idempotent replay returns the same signed receipt.
    archive.put_evidence(agent, EvidenceInput(evidence_id="kb:2", body="two", source="doc"))
    first = archive.delete_evidence(admin, "kb:2", idempotency_key="del-2")
    assert archive.delete_evidence(admin, "kb:2", idempotency_key="del-2") == first
    assert archive.verify_deleted(admin, first) == []


def test_forged_edited_and_foreign_receipts_are_rejected(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal, tmp_path: Path
) -> None:
    receipt = deleted(archive, agent, admin)
    events_before = len(archive.audit_events(admin, limit=1000))

    # The report: a hand-made receipt naming an id that never existed.
    made_up = DeletionReceipt(
        tenant_id="clinic-a",
        target="evidence:never-existed",
        deleted_at=receipt.deleted_at,
        evidence_versions=(("never-existed", 1),),
    )
    assert rejected(archive, admin, made_up).check == "unsigned"
    # A real receipt with a forged id (or any other field changed) keeps a signature that no longer fits.
    forged = dataclasses.replace(receipt, evidence_versions=(("never-existed", 1),), target="evidence:x")
    assert rejected(archive, admin, forged).check == "signature"
    later = dataclasses.replace(receipt, deleted_at=receipt.deleted_at.replace(year=2030))
    assert rejected(archive, admin, later).check == "signature"
    flipped = receipt.signature[:-1] + ("0" if receipt.signature[-1] != "0" else "1")
    assert rejected(archive, admin, dataclasses.replace(receipt, signature=flipped)).check == "signature"

    # Another deployment (its own key) with the same tenant and the same ids.
    other = Archive.open(str(tmp_path / "other.db"), receipt_key=ReceiptKey.from_text("o" * 40))
    try:
        foreign = deleted(other, agent, admin)
        assert other.verify_deleted(admin, foreign) == []
    finally:
        other.close()
    err = rejected(archive, admin, foreign)
    assert err.check == "foreign_key" and foreign.key_id in err.message
    # Relabelled with this deployment's key id, it still cannot pass.
    relabelled = dataclasses.replace(foreign, key_id=receipt.key_id)
    assert rejected(archive, admin, relabelled).check == "signature"

    # Another tenant's receipt: NotFound, as for any of its records; moved into this tenant, forged.
    theirs = deleted(archive, other_tenant, other_tenant, "b:1")
    with pytest.raises(NotFound):
        archive.verify_deleted(admin, theirs)
    moved = dataclasses.replace(theirs, tenant_id="clinic-a")
    assert rejected(archive, admin, moved).check == "signature"

    # Every rejection is audited as an integrity failure, and the untouched receipt still verifies.
    failures = archive.audit_events(admin, limit=1000)[events_before:]
    assert [e.detail["check"] for e in failures if e.action == "integrity_failure"] == [
        "unsigned",
        "signature",
        "signature",
        "signature",
        "foreign_key",
        "signature",
        "signature",
    ]
    assert archive.verify_deleted(admin, receipt) == []


def test_receipts_signed_before_task_states_existed_still_verify(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    """Receipts issued before `task_states` was a field were signed over a payload without it
    (and counts without it): such a receipt, and one loaded from its stored JSON, still verify."""
    receipt = deleted(archive, agent, admin)
    assert receipt.task_states == ()
    old = dataclasses.replace(receipt, counts={k: v for k, v in receipt.counts.items() if k != "task_states"})
    old_payload = {
        f.name: receipts_module._plain(getattr(old, f.name))
        for f in dataclasses.fields(old)
        if f.name not in ("signature", "task_states", "erasure")  # neither existed then
    }
    old = dataclasses.replace(
        old, signature=archive.store.receipt_key.sign(receipts_module.RECEIPT_PURPOSE, old_payload)
    )
    assert archive.verify_deleted(admin, old) == []
    stored = json.loads(json.dumps(dataclasses.asdict(old), default=str))
    del stored["task_states"], stored["erasure"]
    stored["deleted_at"] = old.deleted_at.isoformat()
    assert archive.verify_deleted(admin, deletion_module.replayed_receipt(stored)) == []
    # The omission is for the empty field only: anything named there is signed.
    named = dataclasses.replace(old, task_states=(("s1", 1),))
    assert rejected(archive, admin, named).check == "signature"


def test_a_receipt_naming_task_states_is_signed_over_them(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.put_evidence(agent, EvidenceInput(evidence_id="kb:1", body="body", source="doc"))
    archive.update_task_state(agent, "s1", goal="g", confirmed=[{"fact": "f", "evidence_id": "kb:1"}])
    receipt = archive.delete_evidence(admin, "kb:1", idempotency_key="del-1")
    assert receipt.task_states == (("s1", 1),) and receipt.counts["task_states"] == 1
    assert archive.verify_deleted(admin, receipt) == []
    assert archive.delete_evidence(admin, "kb:1", idempotency_key="del-1") == receipt  # replayed
    for edited in ((), (("s1", 2),)):
        assert rejected(archive, admin, dataclasses.replace(receipt, task_states=edited)).check == "signature"


def rewind(archive: Archive, tenant: str, to_seq: int) -> None:
    """The attack: delete the newest audit rows and set the head back to the survivor."""
    with archive.store.write() as conn:
        conn.execute(
            delete(t.audit_events).where(t.audit_events.c.tenant_id == tenant, t.audit_events.c.seq > to_seq)
        )
        survivor = conn.execute(
            select(t.audit_events.c.hash).where(
                t.audit_events.c.tenant_id == tenant, t.audit_events.c.seq == to_seq
            )
        ).scalar_one()
        conn.execute(
            update(t.audit_heads)
            .where(t.audit_heads.c.tenant_id == tenant)
            .values(last_seq=to_seq, last_hash=survivor)
        )


def test_a_rewound_chain_passes_alone_but_not_against_an_anchor_or_a_receipt(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    archive.record(agent, "s1", "orders.lookup", "order O-1042: shipped")
    archive.archive_results(agent, "s1", [("r1", "order shipped")])  # event 1
    receipt = deleted(archive, agent, admin)  # events 2 (its put) and 3 (the deletion)
    anchor = archive.audit_anchor(admin)
    assert (anchor.tenant_id, anchor.seq, anchor.hash) == ("clinic-a", 3, receipt.audit_hash)
    assert receipt.audit_seq == 3
    deleted(archive, agent, admin, "kb:late")  # events 4 and 5, after the anchor
    assert archive.verify_audit(admin, [anchor, receipt]).ok

    rewind(archive, "clinic-a", 1)
    assert archive.verify_audit(admin).ok  # what the chain alone cannot see
    report = archive.verify_audit(admin, [anchor])
    assert not report.ok
    assert report.problems == (
        f"the chain was rewound: the anchor of {anchor.at.isoformat(timespec='microseconds')} names "
        "event 3, but the chain holds no such event (it ends at event 1)",
    )
    assert not archive.verify_audit(admin, [receipt]).ok  # a receipt anchors its own time
    assert rejected(archive, admin, receipt).check == "unknown_audit_event"


def test_a_rewritten_chain_is_caught_by_anchor_and_receipt(
    archive: Archive, agent: Principal, admin: Principal
) -> None:
    receipt = deleted(archive, agent, admin)  # event 1 its put, event 2 the deletion
    assert receipt.audit_seq == 2
    anchor = archive.audit_anchor(admin)
    # The attacker edits the deletion event and recomputes every hash and the head: the chain
    # verifies, because its hashes are unkeyed.
    with archive.store.write() as conn:
        rows = conn.execute(
            select(t.audit_events)
            .where(t.audit_events.c.tenant_id == "clinic-a")
            .order_by(t.audit_events.c.seq)
        ).all()
        prev = audit_module.GENESIS
        for r in rows:
            target = "evidence:something-else" if r.seq == receipt.audit_seq else r.target
            digest = audit_module._event_hash(
                "clinic-a", r.seq, r.at, r.actor, r.action, target, r.detail_json, prev
            )
            conn.execute(
                update(t.audit_events)
                .where(t.audit_events.c.tenant_id == "clinic-a", t.audit_events.c.seq == r.seq)
                .values(target=target, prev_hash=prev, hash=digest)
            )
            prev = digest
        conn.execute(
            update(t.audit_heads).where(t.audit_heads.c.tenant_id == "clinic-a").values(last_hash=prev)
        )
    assert archive.verify_audit(admin).ok
    report = archive.verify_audit(admin, [anchor])
    assert len(report.problems) == 1 and "the chain was rewritten: event 2 differs" in report.problems[0]
    assert rejected(archive, admin, receipt).check == "audit_mismatch"


def test_forged_or_foreign_anchors_are_rejected(
    archive: Archive, agent: Principal, admin: Principal, other_tenant: Principal
) -> None:
    deleted(archive, agent, admin)
    anchor = archive.audit_anchor(admin)
    for bad, check in [
        (dataclasses.replace(anchor, seq=anchor.seq + 5), "signature"),
        (dataclasses.replace(anchor, signature=""), "unsigned"),
        (dataclasses.replace(anchor, key_id="0" * 16), "foreign_key"),
    ]:
        with pytest.raises(ReceiptInvalid) as err:
            archive.verify_audit(admin, [bad])
        assert err.value.check == check
    other_admin = other_tenant  # an admin of tenant shop-b
    with pytest.raises(ReceiptInvalid) as err:
        archive.verify_audit(other_admin, [anchor])
    assert err.value.check == "tenant"
    # (That rejection was audited in shop-b's chain.) An empty chain can be anchored too, and
    # any later chain extends it.
    fresh = Principal("shop-c", "admin-c", frozenset({Role.ADMIN}))
    empty = archive.audit_anchor(fresh)
    assert (empty.seq, empty.hash) == (0, audit_module.GENESIS)
    deleted(archive, fresh, fresh, "c:1")
    assert archive.verify_audit(fresh, [empty]).ok


def test_a_broken_chain_is_not_anchored(archive: Archive, agent: Principal, admin: Principal) -> None:
    deleted(archive, agent, admin)
    with archive.store.write() as conn:
        conn.execute(update(t.audit_events).where(t.audit_events.c.seq == 1).values(actor="someone-else"))
    with pytest.raises(audit_module.IntegrityFailure) as err:
        archive.audit_anchor(admin)
    assert not isinstance(err.value, ReceiptInvalid) and err.value.detail["problems"]


def test_the_sqlite_key_file_sits_beside_the_archive_private_and_outlives_the_process(
    tmp_path: Path, agent: Principal, admin: Principal
) -> None:
    path = tmp_path / "archive.db"
    first = Archive.open(str(path))
    try:
        assert (tmp_path / "receipt.key").is_file()  # made with the new archive, not at first use
        receipt = deleted(first, agent, admin)
    finally:
        first.close()
    key_file = tmp_path / "receipt.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    secret = key_file.read_text().strip()
    assert len(secret) == 64
    # The key is in no database file (the WAL is checkpointed away on close).
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("archive.db*"))
    assert raw and secret.encode() not in raw
    # Another open (another process) of the same file verifies the receipt: same key.
    again = Archive.open(str(path))
    try:
        assert again.verify_deleted(admin, receipt) == []
    finally:
        again.close()
    # A receipt round-trips through JSON (as the CLI and REST carry it) and still verifies.
    from mnemo_sea.system.receipt_json import receipt_from_dict, receipt_to_dict

    carried = receipt_from_dict(json.loads(json.dumps(receipt_to_dict(receipt))))
    assert carried == receipt
    with pytest.raises(InvalidInput, match="32 characters"):
        ReceiptKey.from_text("short")


def key_events(archive: Archive, admin: Principal) -> list[tuple[str, str, str]]:
    return [
        (e.action, e.actor, e.target)
        for e in archive.audit_events(admin, limit=1000)
        if e.action.startswith("api_key")
    ]


def test_key_creation_and_revocation_are_audited_in_the_key_row_transaction(
    archive: Archive, admin: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, info = create_key(archive.store, tenant_id="clinic-a", subject="vet-app", roles=["agent"], name="app")
    revoke_key(archive.store, info.key_id)
    target = f"api_key:{info.key_id}"
    assert key_events(archive, admin) == [
        ("api_key_create", "operator", target),
        ("api_key_revoke", "operator", target),
    ]
    created = next(e for e in archive.audit_events(admin) if e.action == "api_key_create")
    assert created.detail == {"subject": "vet-app", "roles": "agent", "clearance": 1, "name": "app"}
    assert archive.verify_audit(admin).ok

    # One transaction: when the audit event cannot be written, no key row is written or revoked.
    _, second = create_key(archive.store, tenant_id="clinic-a", subject="second", roles=["reader"])

    def broken(*args: Any, **kw: Any) -> int:
        raise RuntimeError("audit write failed")

    monkeypatch.setattr("mnemo_sea.archive.features.api_keys.append_event", broken)
    with pytest.raises(RuntimeError):
        create_key(archive.store, tenant_id="clinic-a", subject="other", roles=["agent"])
    with pytest.raises(RuntimeError):
        revoke_key(archive.store, second.key_id)
    with archive.store.read() as conn:
        rows = conn.execute(select(t.api_keys.c.subject, t.api_keys.c.revoked_at)).all()
    assert sorted((r.subject, r.revoked_at is None) for r in rows) == [("second", True), ("vet-app", False)]


def test_a_folder_whose_key_cannot_be_written_is_not_initialised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(As root, a read-only folder is still writable, so the failure is injected.) The key is
    written before the archive: a folder never holds an archive that never had a key."""
    from mnemo_sea.archive import StoreUnavailable
    from mnemo_sea.system.mnemo import Mnemo
    from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

    def unwritable(path: Path) -> ReceiptKey:
        raise StoreUnavailable(f"receipt key {path} cannot be created: Read-only file system")

    monkeypatch.setattr(ReceiptKey, "create", staticmethod(unwritable))
    with pytest.raises(StoreUnavailable, match="receipt key"):
        Mnemo.open(tmp_path / "data", embedder=HashingEmbedder())
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == []
