"""What one caller does stays its own: a tenant's admin learns nothing of another tenant's
backlog, a reader reads no summary of another owner's data, an idempotency key belongs to the
caller that used it."""

from __future__ import annotations

import pytest

from mnemo_sea.archive import (
    EvidenceInput,
    Forbidden,
    IdempotencyMismatch,
    Principal,
    Role,
    Sensitivity,
)
from mnemo_sea.system.fsck import run_fsck
from mnemo_sea.system.mnemo import Mnemo

A_AGENT = Principal("ta", "agent-a", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
A_OTHER = Principal("ta", "agent-b", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
A_RITA = Principal("ta", "rita", frozenset({Role.READER}), Sensitivity.INTERNAL)
B_ADMIN = Principal("tb", "admin-b", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
B_AGENT = Principal("tb", "agent-b", frozenset({Role.AGENT}), Sensitivity.INTERNAL)


def test_another_tenants_backlog_is_invisible_to_fsck_and_deletion_checks(mnemo: Mnemo) -> None:
    mnemo.sync_writes = False
    mnemo.ingest(A_AGENT, [EvidenceInput(body="tenant a pending text", source="kb", evidence_id="a:1")])
    mnemo.ingest(B_AGENT, [EvidenceInput(body="tenant b text", source="kb", evidence_id="b:1")])
    mnemo.sync_writes = True
    receipt = mnemo.delete_evidence(B_ADMIN, "b:1")  # syncs everything, then A writes again
    mnemo.sync_writes = False
    mnemo.ingest(A_AGENT, [EvidenceInput(body="tenant a more text", source="kb", evidence_id="a:2")])
    # A receipt naming A's outbox rows too, signed with the deployment key (only the deployment
    # could issue one; an edited receipt is refused before any count: test_receipts.py).
    from dataclasses import replace

    from mnemo_sea.archive.storage.receipts import sign_receipt

    forged = sign_receipt(mnemo.archive.store.receipt_key, replace(receipt, outbox_ids=tuple(range(1, 100))))
    assert mnemo.verify_deleted(B_ADMIN, forged).pending_outbox == 0  # A's pending rows are not B's
    assert run_fsck(mnemo, tenant_id="tb").ok
    assert "pending_outbox" in {p.kind for p in run_fsck(mnemo, tenant_id="ta").problems}


def test_a_reader_cannot_read_a_summary_of_another_owners_data(mnemo: Mnemo) -> None:
    mnemo.record(A_AGENT, "s1", "lab", "alice ALT 112 high", owner="alice")
    summary = mnemo.create_summary(A_AGENT, "Alice has ALT 112", ["result:s1/r1"])
    with pytest.raises(Forbidden):
        mnemo.archive.get_summary(A_RITA, summary.summary_id)
    alice = Principal("ta", "alice", frozenset({Role.READER}), Sensitivity.INTERNAL)
    assert mnemo.archive.get_summary(alice, summary.summary_id).text == "Alice has ALT 112"


def test_idempotency_keys_belong_to_one_caller(mnemo: Mnemo) -> None:
    first = mnemo.record(A_AGENT, "s1", "lab", "result one", idempotency_key="K1")
    # Another caller of the tenant may use the same key for its own request...
    other = mnemo.record(A_OTHER, "s1", "lab", "result one", idempotency_key="K1")
    assert other.result_id != first.result_id
    # ...and a different request under it neither collides nor learns about agent-a's use.
    mnemo.remember(A_OTHER, "alice", "pet", "cat", "user_claim", idempotency_key="K2")
    with pytest.raises(IdempotencyMismatch):
        mnemo.record(A_AGENT, "s1", "lab", "something else", idempotency_key="K1")
