"""Memory facts: remember, read the current value, list a key's history, list the owners and an
owner's facts, forget, purge expired."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from mnemo_sea.archive import DeletionReceipt, MemoryFact, MemoryOwner, NotFound, RememberOp, RememberOutcome
from mnemo_sea.archive import limits as cap
from mnemo_sea.rest.auth import Caller, System
from mnemo_sea.rest.models import Page, page, read_ahead_page
from mnemo_sea.rest.problems import responses
from mnemo_sea.rest.routes.common import IdempotencyKey, Limit, Offset
from mnemo_sea.rest.threads import PooledRoute

router = APIRouter(prefix="/v1/memory", tags=["memory"], route_class=PooledRoute)
# Keys may contain '/', so the key travels as a query parameter rather than a path segment.
MemoryKey = Annotated[str, Query(description="the fact's key (letters, digits, . _ : / -)")]


@router.post("", response_model=RememberOutcome, responses=responses(403, 404, 409, 413))
def remember(
    body: RememberOp, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> RememberOutcome:
    """Store a fact for an owner, superseding the previous value. A model inference never
    overrides what the user confirmed: it comes back as an unpersisted candidate with a reason."""
    return mnemo.remember(principal, **body.as_kwargs(), idempotency_key=idempotency_key)


@router.get("", response_model=Page[MemoryOwner], responses=responses(403))
def list_owners(
    principal: Caller,
    mnemo: System,
    prefix: Annotated[
        str | None,
        Query(
            max_length=cap.ID_CHARS,
            description="only owners starting with this text (literally: % and _ are characters)",
        ),
    ] = None,
    offset: Offset = 0,
    limit: Limit = 50,
) -> Page[MemoryOwner]:
    """The owners the tenant keeps memory about, by name, with their counts of facts; a reader's
    key lists only itself."""
    found = mnemo.list_memory_owners(principal, prefix=prefix, limit=limit + 1, offset=offset)
    return read_ahead_page(found, offset, limit)


@router.get("/{owner}/facts", response_model=Page[MemoryFact], responses=responses(403))
def facts(
    owner: str, principal: Caller, mnemo: System, offset: Offset = 0, limit: Limit = 50
) -> Page[MemoryFact]:
    """The owner's current, unexpired facts by key (one version each)."""
    found = mnemo.facts(principal, owner, offset=offset, limit=limit + 1)
    return read_ahead_page(found, offset, limit)


@router.get("/{owner}", response_model=MemoryFact, responses=responses(403, 404))
def current(owner: str, key: MemoryKey, principal: Caller, mnemo: System) -> MemoryFact:
    """The owner's current, unexpired value for `key`."""
    fact = mnemo.current(principal, owner, key)
    if fact is None:
        raise NotFound("memory fact", f"{owner}/{key}")
    return fact


@router.get("/{owner}/history", response_model=Page[MemoryFact], responses=responses(403, 404))
def history(
    owner: str, key: MemoryKey, principal: Caller, mnemo: System, offset: Offset = 0, limit: Limit = 50
) -> Page[MemoryFact]:
    """Every version of the fact, oldest first, superseded ones included."""
    return page(mnemo.memory_history(principal, owner, key), offset, limit)


@router.delete("/{owner}", response_model=DeletionReceipt, responses=responses(403, 404, 409))
def forget(
    owner: str, key: MemoryKey, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> DeletionReceipt:
    """Forget the fact: every version, its index points and cached searches are deleted (audited).
    The owner themselves, agents and admins may; the receipt is checked by /v1/deletions/verify."""
    return mnemo.forget(principal, owner, key, idempotency_key=idempotency_key)


class PurgeOut(BaseModel):
    purged: int = Field(description="expired memory versions deleted")
    receipt: DeletionReceipt | None = Field(description="the deletion receipt; null when none had expired")


@router.post("/purge-expired", response_model=PurgeOut, responses=responses(403))
def purge_expired(principal: Caller, mnemo: System) -> PurgeOut:
    """Delete the tenant's expired memory versions now, with their index points (admin). The
    outbox worker does this on a schedule (MNEMO_TTL_PURGE_SECONDS)."""
    receipt = mnemo.purge_expired(principal)
    return PurgeOut(purged=0 if receipt is None else len(receipt.memory_facts), receipt=receipt)
