"""Signing deletion receipts and checking the ones callers bring back.

A receipt proves that this deployment performed this deletion: it is signed with the
deployment key (see signing.py) and names the deletion's audit event by sequence number and
hash. `check_receipt` rejects, with ReceiptInvalid naming the failed check, a receipt that is
unsigned, signed by another key, edited after signing, or whose audit event the chain no longer
holds as signed (a rewound or rewritten chain).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from ..rules.errors import ReceiptInvalid
from ..rules.records import DeletionReceipt
from . import schema as t
from .audit import TARGET_LIMIT, AuditAnchor, check_signed
from .signing import ReceiptKey, canonical_time

RECEIPT_PURPOSE = "mnemo-sea/deletion-receipt/v1"


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return canonical_time(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


# Fields added after receipts were first issued: left out of the payload while empty, so a receipt
# signed before a field existed (its payload never had it) still verifies.
_OMITTED_WHEN_EMPTY = frozenset({"task_states"})
# Not covered at all: the signature itself, and the erasure state when the receipt was issued
# (it describes the files at one moment; verify_deleted checks them again).
_UNSIGNED = frozenset({"signature", "erasure"})


def receipt_payload(receipt: DeletionReceipt) -> dict[str, Any]:
    """What the signature covers: every field but the signature and the erasure state (and a
    later field while it is empty)."""
    return {
        f.name: _plain(getattr(receipt, f.name))
        for f in dataclasses.fields(receipt)
        if f.name not in _UNSIGNED and not (f.name in _OMITTED_WHEN_EMPTY and not getattr(receipt, f.name))
    }


def sign_receipt(key: ReceiptKey, receipt: DeletionReceipt) -> DeletionReceipt:
    unsigned = dataclasses.replace(receipt, key_id=key.key_id, signature="")
    return dataclasses.replace(unsigned, signature=key.sign(RECEIPT_PURPOSE, receipt_payload(unsigned)))


def _check_signature(key: ReceiptKey, receipt: DeletionReceipt) -> None:
    check_signed(
        key, RECEIPT_PURPOSE, "deletion receipt", receipt_payload(receipt), receipt.key_id, receipt.signature
    )


def check_receipt(conn: Connection, key: ReceiptKey, receipt: DeletionReceipt) -> None:
    """Raise ReceiptInvalid unless this deployment issued `receipt` and its audit event stands."""
    _check_signature(key, receipt)
    event = conn.execute(
        select(t.audit_events.c.hash, t.audit_events.c.action, t.audit_events.c.target).where(
            t.audit_events.c.tenant_id == receipt.tenant_id, t.audit_events.c.seq == receipt.audit_seq
        )
    ).first()
    if event is None:
        raise ReceiptInvalid(
            "unknown_audit_event",
            f"the audit chain holds no event {receipt.audit_seq}, which recorded this deletion "
            "(the chain was rewound)",
            audit_seq=receipt.audit_seq,
        )
    if (
        event.hash != receipt.audit_hash
        or event.action != "delete"
        or event.target != receipt.target[:TARGET_LIMIT]
    ):
        raise ReceiptInvalid(
            "audit_mismatch",
            f"audit event {receipt.audit_seq} is not the deletion this receipt records "
            "(the chain was rewritten)",
            audit_seq=receipt.audit_seq,
        )


def receipt_anchor(key: ReceiptKey, receipt: DeletionReceipt, tenant_id: str) -> AuditAnchor:
    """A receipt as an anchor of its tenant's chain: its audit event was the head when it was
    issued. Raises ReceiptInvalid unless this deployment signed it for this tenant."""
    _check_signature(key, receipt)
    if receipt.tenant_id != tenant_id:
        raise ReceiptInvalid(
            "tenant", f"the deletion receipt is of tenant {receipt.tenant_id!r}, not of {tenant_id!r}"
        )
    return AuditAnchor(
        receipt.tenant_id, receipt.audit_seq, receipt.audit_hash, receipt.deleted_at, receipt.key_id
    )
