"""Deletion: cascades across archive, index, summaries, derived memory and caches, with a receipt."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from mnemo_sea.archive import DeletionReceipt, ErasureState
from mnemo_sea.rest.auth import Caller, System
from mnemo_sea.rest.problems import responses
from mnemo_sea.rest.routes.common import IdempotencyKey
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.mnemo import DeletionCheck
from mnemo_sea.system.receipt_json import check_receipt_numbers
from mnemo_sea.system.results import DeletionStatus

router = APIRouter(prefix="/v1", tags=["deletion"], route_class=PooledRoute)


class DeletionCheckOut(BaseModel):
    ok: bool
    status: DeletionStatus
    archive_leftovers: list[str]
    index_leftovers: list[str]
    pending_outbox: int
    erasure: ErasureState
    erasure_detail: str

    @classmethod
    def of(cls, check: DeletionCheck) -> DeletionCheckOut:
        return cls(
            ok=check.ok,
            archive_leftovers=list(check.archive_leftovers),
            index_leftovers=list(check.index_leftovers),
            pending_outbox=check.pending_outbox,
            status=check.status,
            erasure=check.erasure,
            erasure_detail=check.erasure_detail,
        )


@router.delete(
    "/evidence/{evidence_id:path}", response_model=DeletionReceipt, responses=responses(403, 404, 409)
)
def delete_evidence(
    evidence_id: str, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> DeletionReceipt:
    """Delete every version of a record and everything derived from it (admin)."""
    return mnemo.delete_evidence(principal, evidence_id, idempotency_key=idempotency_key)


@router.delete("/sessions/{session_id}", response_model=DeletionReceipt, responses=responses(403, 404, 409))
def delete_session(
    session_id: str, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> DeletionReceipt:
    """Delete a session, its results, notes and everything derived from them (admin)."""
    return mnemo.delete_session(principal, session_id, idempotency_key=idempotency_key)


@router.delete("/owners/{owner}", response_model=DeletionReceipt, responses=responses(403, 404, 409))
def delete_owner(
    owner: str, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> DeletionReceipt:
    """Delete everything about one person (a data-subject request) (admin)."""
    return mnemo.delete_owner(principal, owner, idempotency_key=idempotency_key)


@router.post("/deletions/verify", response_model=DeletionCheckOut, responses=responses(403, 404, 413))
def verify_deleted(receipt: DeletionReceipt, principal: Caller, mnemo: System) -> DeletionCheckOut:
    """Given a deletion's receipt, check every store: nothing of it can be reached any more."""
    # The receipt comes back from the client: numbers no database holds are refused here
    # rather than failing in the driver (the check every reader of a receipt runs).
    return DeletionCheckOut.of(mnemo.verify_deleted(principal, check_receipt_numbers(receipt)))
