"""Search and citation checks: the read paths of RAG pipelines and eval scripts."""

from __future__ import annotations

from fastapi import APIRouter

from mnemo_sea.rest.auth import Caller, System
from mnemo_sea.rest.models import CitationReportOut
from mnemo_sea.rest.problems import responses
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.mnemo import SearchResult
from mnemo_sea.system.operations import CheckCitationsOp, SearchOp

router = APIRouter(prefix="/v1", tags=["search"], route_class=PooledRoute)


@router.post("/search", response_model=SearchResult, responses=responses(403, 413))
def search(body: SearchOp, principal: Caller, mnemo: System) -> SearchResult:
    """Hybrid BM25 + vector search under the caller's tenant, clearance and owner pre-filters.

    Hits are hydrated from the archive with the exact text of their span. `status` is
    `results` or `no_match`; a dead index leg is a 503, never an empty 200.
    """
    found = mnemo.search(principal, **body.as_kwargs())
    return found.raise_for_status()


@router.post("/citations/check", response_model=CitationReportOut, responses=responses(413))
def check_citations(body: CheckCitationsOp, principal: Caller, mnemo: System) -> CitationReportOut:
    """Check each citation: does the cited evidence exist for the caller, was it in force at
    `answered_at`, and does it contain the quote? Counts and precision come with the details."""
    report = mnemo.check_citations(principal, **body.as_kwargs())
    return CitationReportOut.of(report)
