"""Search: the facade's hybrid search as the viewer (its tenant, clearance and owners), each hit
with its scores and a link to the page of what it points to. Reads only: a search changes
nothing in the archive (its answer may be cached, as every search's is)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse

from mnemo_sea.archive import SEARCH_KINDS
from mnemo_sea.console.links import derived_path, evidence_path
from mnemo_sea.console.pages import render
from mnemo_sea.console.routes.common import Viewer, mnemo_of, page_router

router = page_router()
# Hits shown: one search answers at most 100 (SearchOp.limit).
DEFAULT_HITS = 20
MAX_HITS = 100


@router.get("/search", response_class=HTMLResponse)
def search(
    request: Request,
    principal: Viewer,
    q: str | None = None,
    kind: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_HITS)] = DEFAULT_HITS,
) -> HTMLResponse:
    """Without `q`, the form. With it, the search's hits, or the typed error of a search that
    could not run (an empty or over-long query, an unknown kind: 422) as every page shows one.
    The query's length is left to the facade, whose cap every surface shares."""
    if q is None:
        return render(
            request, "search.html", principal, q="", kind=kind or "", limit=limit, kinds=SEARCH_KINDS
        )
    kinds = [kind] if kind else None
    found = mnemo_of(request).search(principal, q, limit=limit, kinds=kinds).raise_for_status()
    hits = [(h, *_paths(h.evidence_id, h.version)) for h in found.hits]
    return render(
        request,
        "search.html",
        principal,
        q=q,
        kind=kind or "",
        limit=limit,
        kinds=SEARCH_KINDS,
        result=found,
        hits=hits,
    )


def _paths(hit_id: str, version: int) -> tuple[str, str | None]:
    """The page of what a hit points to, and of the version it was found in when that is an
    evidence record's (a derived thing's version is the index's own numbering: a page of an
    original, a fact's version)."""
    derived = derived_path(hit_id)
    if derived is not None:
        return derived, None
    return evidence_path(hit_id), evidence_path(hit_id, version)
