"""Deletion receipts and audit anchors as JSON, both ways: what `delete --json` prints (and
`--receipt-out` writes) and `audit anchor --out` writes, read back by every surface a person hands
one to (the CLI's files, the console's form) with the types REST parses them with.

A receipt comes back from outside: its integers are REST's strict ones (`"5"` is not a version,
archive/rules/json_types.py) and no larger than SQL stores, so a bad document is InvalidInput
naming what is wrong instead of a failure in the database driver. Whether this deployment issued
it is the archive's check (`verify_deleted`, ReceiptInvalid), not this module's.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from mnemo_sea.archive import AuditAnchor, DeletionReceipt, InvalidInput
from mnemo_sea.system.json_ready import json_ready
from mnemo_sea.system.json_text import validation_problems

# The largest integer SQL stores (BIGINT, SQLite INTEGER): a larger one fails in the driver.
MAX_SQL_INT = 2**63 - 1

_RECEIPT: TypeAdapter[DeletionReceipt] = TypeAdapter(DeletionReceipt)
_ANCHOR: TypeAdapter[AuditAnchor] = TypeAdapter(AuditAnchor)
# Problems a refusal names: enough to fix a document, short enough to read.
_SHOWN_PROBLEMS = 3


def receipt_to_dict(receipt: DeletionReceipt) -> dict[str, Any]:
    data: dict[str, Any] = json_ready(receipt)
    return data


def anchor_to_dict(anchor: AuditAnchor) -> dict[str, Any]:
    data: dict[str, Any] = json_ready(anchor)
    return data


def check_receipt_numbers(receipt: DeletionReceipt) -> DeletionReceipt:
    """`receipt` itself when every version, outbox id and audit seq it names fits SQL; else
    InvalidInput (REST's verify-deleted and every reader of a receipt file run this)."""
    numbers = [v for _, v in receipt.evidence_versions] + [v for _, _, v in receipt.memory_facts]
    numbers += [v for _, v in receipt.task_states]
    numbers += [*receipt.outbox_ids, receipt.audit_seq]
    if any(not 0 <= n <= MAX_SQL_INT for n in numbers):
        raise InvalidInput("receipt", f"versions, outbox ids and audit_seq are between 0 and {MAX_SQL_INT}")
    return receipt


def receipt_from_dict(data: Any) -> DeletionReceipt:
    """The receipt `delete ... --json` printed (or `--receipt-out` wrote). InvalidInput when the
    JSON is not one, naming the fields that are wrong."""
    if not isinstance(data, dict):
        raise InvalidInput("receipt", f"not a deletion receipt: a JSON object is, not {type(data).__name__}")
    try:
        return check_receipt_numbers(_RECEIPT.validate_python(data))
    except ValidationError as e:
        raise InvalidInput(
            "receipt", f"not a deletion receipt: {validation_problems(e, _SHOWN_PROBLEMS)}"
        ) from None


def anchor_from_dict(data: Any) -> AuditAnchor | DeletionReceipt:
    """What `audit anchor --out` wrote, or a deletion receipt (it anchors the chain of its time).
    InvalidInput when it is neither."""
    if isinstance(data, dict) and "target" in data:
        return receipt_from_dict(data)
    if not isinstance(data, dict):
        raise InvalidInput("anchor", f"not an audit anchor: a JSON object is, not {type(data).__name__}")
    try:
        anchor = _ANCHOR.validate_python(data)
    except ValidationError as e:
        raise InvalidInput(
            "anchor", f"not an audit anchor: {validation_problems(e, _SHOWN_PROBLEMS)}"
        ) from None
    if not 0 <= anchor.seq <= MAX_SQL_INT:
        raise InvalidInput("anchor", f"seq is between 0 and {MAX_SQL_INT}")
    return anchor


__all__ = [
    "MAX_SQL_INT",
    "anchor_from_dict",
    "anchor_to_dict",
    "check_receipt_numbers",
    "receipt_from_dict",
    "receipt_to_dict",
]
