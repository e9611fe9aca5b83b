"""Memory: the owners the tenant keeps facts about, an owner's current facts, and one fact's
supersede chain with the provenance of each version and what it was derived from."""

from __future__ import annotations

from itertools import pairwise
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse

from mnemo_sea.archive import MemoryFact, NotFound, limits
from mnemo_sea.console.pages import PAGE_SIZE, Window, render
from mnemo_sea.console.routes.common import Offset, Viewer, mnemo_of, page_router

router = page_router()
Owner = Annotated[str, Query(min_length=1, max_length=limits.ID_CHARS)]
Key = Annotated[str, Query(min_length=1, max_length=limits.MEMORY_KEY_CHARS)]


@router.get("/memory", response_class=HTMLResponse)
def owners(request: Request, principal: Viewer, offset: Offset = 0) -> HTMLResponse:
    """Who the tenant keeps memory about (a user: itself), by name."""
    found = mnemo_of(request).list_memory_owners(principal, limit=PAGE_SIZE + 1, offset=offset)
    items, window = Window.of(found, offset)
    return render(request, "memory_owners.html", principal, owners=items, window=window)


@router.get("/memory/owner", response_class=HTMLResponse)
def owner_facts(request: Request, principal: Viewer, owner: Owner, offset: Offset = 0) -> HTMLResponse:
    """An owner's current, unexpired facts by key."""
    found = mnemo_of(request).facts(principal, owner, offset=offset, limit=PAGE_SIZE + 1)
    items, window = Window.of(found, offset)
    return render(request, "memory_owner.html", principal, owner=owner, facts=items, window=window)


@router.get("/memory/fact", response_class=HTMLResponse)
def fact(request: Request, principal: Viewer, owner: Owner, key: Key) -> HTMLResponse:
    """Every version of one fact, oldest first, each superseded by the next; the one that
    answers now (the facade's `current`) marked."""
    mnemo = mnemo_of(request)
    chain = mnemo.memory_history(principal, owner, key)
    if not chain:  # never remembered, forgotten, or another tenant's: alike
        raise NotFound("memory fact", f"{owner}/{key}")
    now = mnemo.current(principal, owner, key)
    return render(
        request,
        "memory_fact.html",
        principal,
        owner=owner,
        key=key,
        chain=chain,
        current=None if now is None else now.version,
        replaced_by=_replaced_by(chain),
    )


def _replaced_by(chain: list[MemoryFact]) -> dict[int, MemoryFact]:
    """Each version that a later one replaced, with the version that replaced it: a supersession
    stamps the old version's end and the new one's creation with one moment."""
    return {older.version: newer for older, newer in pairwise(chain)}
