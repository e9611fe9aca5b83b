"""Derived summaries: always labelled derived, always pointing to what they came from."""

from __future__ import annotations

from fastapi import APIRouter, status

from mnemo_sea.archive import CreateSummaryOp, Summary
from mnemo_sea.rest.auth import Caller, System
from mnemo_sea.rest.problems import responses
from mnemo_sea.rest.routes.common import IdempotencyKey
from mnemo_sea.rest.threads import PooledRoute

router = APIRouter(prefix="/v1/summaries", tags=["summaries"], route_class=PooledRoute)


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=Summary, responses=responses(403, 404, 409, 413)
)
def create_summary(
    body: CreateSummaryOp, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> Summary:
    """A summary of existing sources; searchable, and deleted with any of them."""
    return mnemo.create_summary(principal, **body.as_kwargs(), idempotency_key=idempotency_key)


@router.get("/{summary_id}", response_model=Summary, responses=responses(403, 404))
def get_summary(summary_id: str, principal: Caller, mnemo: System) -> Summary:
    return mnemo.archive.get_summary(principal, summary_id)
