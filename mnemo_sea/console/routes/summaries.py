"""Summaries: the ones the viewer may read, and one summary's text, labelled derived, with each
source it derives from as a link to that source's page."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse

from mnemo_sea.console.pages import PAGE_SIZE, Window, render
from mnemo_sea.console.routes.common import Offset, Viewer, mnemo_of, page_router

router = page_router()
# A summary's id is `sum:` and 32 hex digits; the archive refuses anything over 64 characters.
SummaryId = Annotated[str, Query(alias="id", min_length=1, max_length=64)]


@router.get("/summaries", response_class=HTMLResponse)
def summaries(request: Request, principal: Viewer, offset: Offset = 0) -> HTMLResponse:
    """The summaries the viewer may read, oldest first."""
    found = mnemo_of(request).list_summaries(principal, limit=PAGE_SIZE + 1, offset=offset)
    items, window = Window.of(found, offset)
    return render(request, "summaries.html", principal, summaries=items, window=window)


@router.get("/summaries/item", response_class=HTMLResponse)
def summary(request: Request, principal: Viewer, summary_id: SummaryId) -> HTMLResponse:
    """One summary: never evidence, always shown as derived, with what it was derived from."""
    found = mnemo_of(request).get_summary(principal, summary_id)
    return render(request, "summary.html", principal, summary=found)
