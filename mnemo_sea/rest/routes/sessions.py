"""Sessions: record tool results, read the live view, archive a batch, recover an original."""

from __future__ import annotations

from fastapi import APIRouter, status

from mnemo_sea.archive import ArchiveReceipt, ArchiveTarget, ToolResult
from mnemo_sea.rest.auth import Caller, System
from mnemo_sea.rest.models import ArchiveIn, LiveViewOut, Page, RecordIn, RecoveredOut, page
from mnemo_sea.rest.problems import responses
from mnemo_sea.rest.routes.common import IdempotencyKey, Limit, Offset

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


@router.post(
    "/{session_id}/results",
    status_code=status.HTTP_201_CREATED,
    response_model=ToolResult,
    responses=responses(403, 404, 409, 413),
)
def record_result(
    session_id: str, body: RecordIn, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> ToolResult:
    """Record a tool result in a session (created on first use); it gets the next id (r1, r2, ...)."""
    return mnemo.record(
        principal,
        session_id,
        body.tool_name,
        body.payload(),
        arguments=body.arguments,
        media_type=body.media_type,
        observed_at=body.observed_at,
        sensitivity=body.sensitivity,
        policy_class=body.policy_class,
        owner=body.owner,
        idempotency_key=idempotency_key,
    )


@router.get("/{session_id}/results", response_model=Page[ToolResult], responses=responses(403, 404))
def list_results(
    session_id: str, principal: Caller, mnemo: System, offset: Offset = 0, limit: Limit = 50
) -> Page[ToolResult]:
    """The session's results in order, live and archived (with their notes), without content."""
    return page(mnemo.archive.list_results(principal, session_id), offset, limit)


@router.get("/{session_id}/live", response_model=LiveViewOut, responses=responses(403, 404))
def live_view(session_id: str, principal: Caller, mnemo: System) -> LiveViewOut:
    """The working context: live results in envelopes, archived ones as in-place stubs."""
    return LiveViewOut.of(mnemo.live_view(principal, session_id))


@router.post("/{session_id}/archive", response_model=ArchiveReceipt, responses=responses(403, 404, 409, 413))
def archive_results(
    session_id: str, body: ArchiveIn, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> ArchiveReceipt:
    """Archive results all or nothing, each replaced by its note. A 422 (409 when every problem
    is an already-archived target) lists each target's status; nothing changed."""
    targets = [ArchiveTarget(t.result_id, t.note) for t in body.targets]
    return mnemo.archive_results(principal, session_id, targets, idempotency_key=idempotency_key)


@router.post(
    "/{session_id}/results/{result_id}/recover",
    response_model=RecoveredOut,
    responses=responses(403, 404, 409),
)
def recover(session_id: str, result_id: str, principal: Caller, mnemo: System) -> RecoveredOut:
    """The exact original, hash-verified, appended to the session labelled historical (with a
    staleness warning for prices, stock and the like)."""
    return RecoveredOut.of(mnemo.recover(principal, session_id, result_id))
