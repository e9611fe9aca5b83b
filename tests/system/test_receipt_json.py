"""Receipts and anchors read back from JSON with REST's types, by the CLI's files and the
console's form alike: what was printed parses to the same receipt, and a document that is not
one is InvalidInput naming what is wrong (never a driver error or a silently coerced number)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from mnemo_sea.archive import AuditAnchor, DeletionReceipt, InvalidInput
from mnemo_sea.system.receipt_json import (
    MAX_SQL_INT,
    anchor_from_dict,
    anchor_to_dict,
    receipt_from_dict,
    receipt_to_dict,
)

RECEIPT = DeletionReceipt(
    tenant_id="clinic-a",
    target="session:s1",
    deleted_at=datetime(2026, 5, 1, 9, 30, tzinfo=UTC),
    evidence_versions=(("kb", 2),),
    tool_results=("s1/r1",),
    sessions=("s1",),
    memory_facts=(("pet-7", "diet", 1),),
    task_states=(("s1", 3),),
    blobs=("ab" * 32,),
    outbox_ids=(7, 8),
    audit_seq=5,
    counts={"tool_results": 1},
    audit_hash="cd" * 32,
    key_id="k1",
    signature="sig",
)


def printed(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_a_printed_receipt_and_anchor_read_back_as_they_were() -> None:
    assert receipt_from_dict(printed(receipt_to_dict(RECEIPT))) == RECEIPT
    anchor = AuditAnchor("clinic-a", 5, "cd" * 32, datetime(2026, 5, 1, tzinfo=UTC), "k1", "sig")
    assert anchor_from_dict(printed(anchor_to_dict(anchor))) == anchor
    assert anchor_from_dict(printed(receipt_to_dict(RECEIPT))) == RECEIPT  # a receipt anchors too


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"audit_seq": "5"}, "audit_seq"),  # text is not a number
        ({"audit_seq": True}, "audit_seq"),
        ({"evidence_versions": [["kb", 2.5]]}, "evidence_versions"),
        ({"deleted_at": 1_700_000_000}, "deleted_at"),  # a number is not a time
        ({"deleted_at": "2026-05-01T09:30:00"}, "deleted_at"),  # nor a time without its zone
        ({"target": None}, "target"),
        ({"erasure": "maybe"}, "erasure"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(change: dict[str, Any], named: str) -> None:
    data = {**printed(receipt_to_dict(RECEIPT)), **change}
    with pytest.raises(InvalidInput, match=named) as err:
        receipt_from_dict(data)
    assert err.value.field == "receipt" and "not a deletion receipt" in err.value.problem


def test_numbers_sql_cannot_hold_and_documents_that_are_no_receipt_are_refused() -> None:
    with pytest.raises(InvalidInput, match="between 0 and"):
        receipt_from_dict({**printed(receipt_to_dict(RECEIPT)), "outbox_ids": [MAX_SQL_INT + 1]})
    for document in ([], "receipt", None, {"target": "session:s1"}):
        with pytest.raises(InvalidInput, match="not a deletion receipt"):
            receipt_from_dict(document)
    with pytest.raises(InvalidInput, match="not an audit anchor"):
        anchor_from_dict({"tenant_id": "clinic-a", "seq": "5"})
