"""Evidence: ingest (single and batch), retract, read a version, list a record's history, list records."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from mnemo_sea.archive import EvidenceInfo, EvidenceInput, EvidenceRecord, RetractOp
from mnemo_sea.archive import limits as cap
from mnemo_sea.rest.auth import Caller, System
from mnemo_sea.rest.models import (
    EvidenceOut,
    IngestOut,
    Page,
    page,
    read_ahead_page,
)
from mnemo_sea.rest.problems import responses
from mnemo_sea.rest.routes.common import IdempotencyKey, Limit, Offset
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.json_ready import content_fields
from mnemo_sea.system.operations import IngestOp

router = APIRouter(prefix="/v1", tags=["evidence"], route_class=PooledRoute)


@router.post(
    "/evidence",
    status_code=status.HTTP_201_CREATED,
    response_model=EvidenceRecord,
    responses={**responses(403, 409, 413), 200: {"model": EvidenceRecord, "description": "unchanged"}},
)
def put_evidence(
    body: EvidenceInput,
    principal: Caller,
    mnemo: System,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> EvidenceRecord:
    """Store one version of an evidence record and index it: 201 with the new version, or 200
    with the current one when the body is unchanged (nothing was written)."""
    # One record fails with its own error: over the content limit that is a 413, not the 422
    # a batch gives when it lists an oversized item among its problems.
    report = mnemo.put_evidence(principal, body, idempotency_key=idempotency_key)
    if report.new_versions == 0:
        response.status_code = status.HTTP_200_OK
    return report.stored[0]


@router.post(
    "/evidence/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=IngestOut,
    responses=responses(403, 409, 413),
)
def put_evidence_batch(
    body: IngestOp, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> IngestOut:
    """Store a batch all or nothing; a 422 names every invalid item and nothing is stored."""
    report = mnemo.ingest(principal, **body.as_kwargs(), idempotency_key=idempotency_key)
    return IngestOut(stored=list(report.stored), new_versions=report.new_versions, unchanged=report.unchanged)


@router.post("/evidence/retract", response_model=EvidenceRecord, responses=responses(403, 404, 409, 413))
def retract_evidence(
    body: RetractOp, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> EvidenceRecord:
    """Withdraw the current version of a record (it stays in history, status `retracted`) and
    drop it from the index; 409 when the record has no active version."""
    return mnemo.retract(principal, **body.as_kwargs(), idempotency_key=idempotency_key)


@router.get("/evidence", response_model=Page[EvidenceInfo], responses=responses(403))
def list_evidence(
    principal: Caller,
    mnemo: System,
    prefix: Annotated[
        str | None,
        Query(
            max_length=cap.EVIDENCE_ID_CHARS,
            description="only ids starting with this text (literally: % and _ are characters)",
        ),
    ] = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> Page[EvidenceInfo]:
    """The tenant's evidence records by id, each once with its newest version and how many it
    has, as far as the caller may read them (a record it may not read is not even named)."""
    found = mnemo.list_evidence(principal, prefix=prefix, limit=limit + 1, offset=offset)
    return read_ahead_page(found, offset, limit)


@router.get("/evidence/{evidence_id:path}", response_model=EvidenceOut, responses=responses(403, 404))
def get_evidence(
    evidence_id: str,
    principal: Caller,
    mnemo: System,
    version: Annotated[int | None, Query(ge=1)] = None,
    as_of: datetime | None = None,
    content: Annotated[bool, Query(description="include the hash-verified body")] = False,
) -> EvidenceOut:
    """One version of a record: the current one, a given version, or the one in force at `as_of`."""
    record, body = mnemo.archive.get_evidence(
        principal, evidence_id, version=version, as_of=as_of, with_content=content
    )
    return EvidenceOut(record=record, **({} if body is None else content_fields(body)))


@router.get(
    "/evidence-history/{evidence_id:path}",
    response_model=Page[EvidenceRecord],
    responses=responses(403, 404),
)
def evidence_history(
    evidence_id: str, principal: Caller, mnemo: System, offset: Offset = 0, limit: Limit = 50
) -> Page[EvidenceRecord]:
    """Every version of a record, oldest first (superseded and retracted ones included)."""
    return page(mnemo.archive.evidence_history(principal, evidence_id), offset, limit)
