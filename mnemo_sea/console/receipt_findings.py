"""A deletion receipt's verification as the deletions page shows it: each check the archive runs,
in its order (the signature, the deletion's audit event, then each removed item in the archive
and the index, the outbox, the files' erasure), passed, failed or not run after a failure.

The checks are the facade's (`Mnemo.verify_deleted`, as REST's verify-deleted runs them): this
module only lays out what they answered, a DeletionCheck or the ReceiptInvalid naming the check
that failed. Each removed item is matched to what the archive reports left of it by the names
its check gives leftovers (archive/deletion.py); every leftover is also shown as reported, so
none goes unseen if a name changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mnemo_sea.archive import DeletionReceipt, ReceiptInvalid, ResultIndexId
from mnemo_sea.system.mnemo import DeletionCheck

State = Literal["ok", "failed", "pending", "not run"]
# ReceiptInvalid's checks, by the step of the verification that runs them.
_SIGNATURE_CHECKS = frozenset({"unsigned", "foreign_key", "signature"})
# Items listed one by one, at most; the rest are counted.
ITEMS_SHOWN = 500


@dataclass(frozen=True)
class Step:
    """One check of the verification: what it is, how it came out, and what it found."""

    name: str
    state: State
    says: str


ArchiveState = Literal["absent", "present", "rewritten", "still cites"]


@dataclass(frozen=True)
class Item:
    """One thing the receipt says the deletion removed, and whether the archive and the index
    still hold it ("" where that store never held that kind). A task state version of a session
    that was not deleted is rewritten, not removed: it is "rewritten" when it no longer holds a
    fact citing deleted data, "still cites" when it does."""

    kind: str
    name: str
    archive: ArchiveState
    index: Literal["absent", "present", ""]

    @property
    def gone(self) -> bool:
        return self.archive in ("absent", "rewritten") and self.index != "present"


@dataclass(frozen=True)
class Verification:
    """The whole answer: `status` as the facade says it (ok, pending_reader, incomplete) or
    `refused` when the receipt did not check out."""

    receipt: DeletionReceipt
    status: str
    steps: tuple[Step, ...]
    items: tuple[Item, ...]
    more_items: int  # listed beyond ITEMS_SHOWN
    more_present: int  # of those, still held somewhere
    leftovers: tuple[str, ...]  # as the archive reports them
    index_leftovers: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _all_items(receipt: DeletionReceipt, left: set[str], index_left: set[str]) -> list[Item]:
    """Every item of the receipt with its state: an archive leftover is matched by the name the
    archive's check gives it; the index by the id each kind has there."""

    def state(present: bool) -> Literal["absent", "present"]:
        return "present" if present else "absent"

    items: list[Item] = []
    for evidence_id, version in receipt.evidence_versions:
        items.append(
            Item(
                "evidence version",
                f"{evidence_id}@{version}",
                state(f"evidence {evidence_id}@{version}" in left),
                state(evidence_id in index_left),
            )
        )
    for ref in receipt.tool_results:
        session_id = ref.rpartition("/")[0]
        items.append(
            Item(
                "tool result",
                ref,
                state(f"results of session {session_id}" in left),
                state(str(ResultIndexId.of_ref(ref)) in index_left),
            )
        )
    for session_id in receipt.sessions:
        present = (
            f"results of session {session_id}" in left or f"session {session_id} is not a tombstone" in left
        )
        items.append(Item("session", session_id, state(present), ""))
    for owner, key, version in receipt.memory_facts:
        items.append(
            Item(
                "memory fact",
                f"{owner}/{key}@{version}",
                state(f"memory {owner}/{key}@{version}" in left),
                state(f"memory:{owner}/{key}" in index_left),
            )
        )
    for summary_id in receipt.summaries:
        items.append(Item("summary", summary_id, state("summaries" in left), state(summary_id in index_left)))
    deleted_sessions = set(receipt.sessions)
    for session_id, version in receipt.task_states:
        name = f"{session_id} v{version}"
        if session_id in deleted_sessions:
            items.append(
                Item("task state version", name, state("task states of a deleted session" in left), "")
            )
            continue
        cites = any(x.startswith(f"task state {session_id}@{version} ") for x in left)
        items.append(Item("task state version", name, "still cites" if cites else "rewritten", ""))
    for digest in receipt.blobs:
        items.append(Item("original", digest, state("originals (blobs)" in left), ""))
    return items


def verified(check: DeletionCheck) -> Verification:
    """The verification of a receipt the archive accepted: every step ran."""
    receipt = check.receipt
    items = _all_items(receipt, set(check.archive_leftovers), set(check.index_leftovers))
    left = len(check.archive_leftovers) + len(check.index_leftovers)
    present = sum(1 for i in items if not i.gone)
    steps = [
        Step("signature", "ok", f"signed by this deployment (key {receipt.key_id})"),
        Step(
            "audit event",
            "ok",
            f"event {receipt.audit_seq} of the chain is this deletion of {receipt.target}, as signed",
        ),
        Step(
            "removed items",
            "failed" if left else "ok",
            f"{present} of {len(items)} items still held; {left} finding(s) below"
            if left
            else f"none of the {len(items)} items is in the archive or the index",
        ),
        Step(
            "outbox",
            "pending" if check.pending_outbox else "ok",
            f"{check.pending_outbox} index and cache update(s) of this deletion still to apply"
            if check.pending_outbox
            else "every index and cache update of this deletion is applied",
        ),
        _erasure(check),
    ]
    return Verification(
        receipt,
        check.status,
        tuple(steps),
        tuple(items[:ITEMS_SHOWN]),
        max(len(items) - ITEMS_SHOWN, 0),
        sum(1 for i in items[ITEMS_SHOWN:] if not i.gone),
        check.archive_leftovers,
        check.index_leftovers,
    )


def _erasure(check: DeletionCheck) -> Step:
    if check.erasure == "done":
        return Step("erasure", "ok", "the archive's files hold none of the deleted bytes")
    if check.erasure == "pending_reader":
        return Step("erasure", "pending", check.erasure_detail)
    return Step("erasure", "failed", check.erasure_detail or "emptying the archive's files failed")


def refused(receipt: DeletionReceipt, error: ReceiptInvalid) -> Verification:
    """The verification of a receipt that did not check out: the failed check, and the steps
    after it not run (nothing about the items is known from a receipt the archive did not issue)."""
    signature_failed = error.check in _SIGNATURE_CHECKS
    steps = [
        Step("signature", "failed", error.message)
        if signature_failed
        else Step("signature", "ok", f"signed by this deployment (key {receipt.key_id})"),
        Step("audit event", "not run", "")
        if signature_failed
        else Step("audit event", "failed", error.message),
        Step("removed items", "not run", ""),
        Step("outbox", "not run", ""),
        Step("erasure", "not run", ""),
    ]
    return Verification(receipt, "refused", tuple(steps), (), 0, 0, (), ())
