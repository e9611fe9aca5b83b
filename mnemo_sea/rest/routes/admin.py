"""Admin endpoints: the tenant's audit chain and the consistency report (fsck)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from mnemo_sea.archive import AuditAnchor, AuditEvent, DeletionReceipt, InvalidInput
from mnemo_sea.rest.auth import Admin, System
from mnemo_sea.rest.models import Page
from mnemo_sea.rest.problems import responses
from mnemo_sea.rest.routes.common import MAX_SQL_INT, Limit
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.fsck import Problem, run_fsck

router = APIRouter(prefix="/v1/admin", tags=["admin"], route_class=PooledRoute)


class AuditReportOut(BaseModel):
    ok: bool
    events: int
    problems: list[str]


class AnchorsIn(BaseModel):
    anchors: list[AuditAnchor] = Field(default_factory=list, max_length=1000)
    receipts: list[DeletionReceipt] = Field(
        default_factory=list, max_length=1000, description="deletion receipts also anchor the chain"
    )


class FsckOut(BaseModel):
    ok: bool = Field(description="no problem in the caller's tenant (and no outbox backlog)")
    problems: list[Problem]


@router.get("/audit/verify", response_model=AuditReportOut, responses=responses(403))
def verify_audit(principal: Admin, mnemo: System) -> AuditReportOut:
    """Re-hash the tenant's audit chain: any edited or removed event is reported."""
    report = mnemo.archive.verify_audit(principal)
    return AuditReportOut(ok=report.ok, events=report.events, problems=list(report.problems))


@router.post("/audit/verify", response_model=AuditReportOut, responses=responses(403, 413))
def verify_audit_anchored(body: AnchorsIn, principal: Admin, mnemo: System) -> AuditReportOut:
    """Re-hash the chain and check it still holds every anchored event: a chain rewound or
    rewritten under an anchor (or a receipt) is reported. An anchor or receipt this deployment
    did not sign for the caller's tenant is 422 `receipt_invalid`."""
    for anchor in body.anchors:
        if not 0 <= anchor.seq <= MAX_SQL_INT:
            raise InvalidInput("anchors", f"seq is between 0 and {MAX_SQL_INT}")
    anchors: list[AuditAnchor | DeletionReceipt] = [*body.anchors, *body.receipts]
    report = mnemo.archive.verify_audit(principal, anchors)
    return AuditReportOut(ok=report.ok, events=report.events, problems=list(report.problems))


@router.post("/audit/anchor", response_model=AuditAnchor, responses=responses(403, 500))
def audit_anchor(principal: Admin, mnemo: System) -> AuditAnchor:
    """The chain's head signed with the deployment key; keep it away from this server and pass
    it to POST /v1/admin/audit/verify later. 500 `integrity_error` if the chain is already broken."""
    return mnemo.archive.audit_anchor(principal)


@router.get("/audit/events", response_model=Page[AuditEvent], responses=responses(403))
def audit_events(
    principal: Admin,
    mnemo: System,
    after_seq: Annotated[int, Query(ge=0, le=MAX_SQL_INT, description="the last seq already read")] = 0,
    limit: Limit = 100,
) -> Page[AuditEvent]:
    """The tenant's audit events after `after_seq`, in order (keyset pagination: pass the last
    seq seen as the next `after_seq`; `next_offset` holds it while more remain)."""
    events = mnemo.archive.audit_events(principal, after_seq=after_seq, limit=limit + 1)
    more = len(events) > limit
    events = events[:limit]
    return Page[AuditEvent](items=events, next_offset=events[-1].seq if more else None)


@router.get("/fsck", response_model=FsckOut, responses=responses(403))
def fsck(principal: Admin, mnemo: System) -> FsckOut:
    """Report drift between archive, index and outbox for the caller's tenant (no repair here:
    `mnemo-sea fsck --repair` does that)."""
    report = run_fsck(mnemo, tenant_id=principal.tenant_id)
    return FsckOut(ok=report.ok, problems=list(report.problems))
