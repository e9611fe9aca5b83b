"""Who is calling: an API key (Authorization: Bearer, or X-API-Key) mapped to a principal.

The tenant always comes from the key, never from a body or a query parameter.

The dependencies here are coroutines on purpose: FastAPI runs a plain-function dependency in
the thread pool, one hop per dependency per request. A key verified within the last
MNEMO_KEY_CACHE_SECONDS is answered from the app's verified-key cache on the event loop
without touching the database (archive/storage/verified_keys.py says what that promises about
revocation); only a key the cache does not hold is read from the key table, on the app's
probe lane (a few threads apart from the pool the tenants' requests share, rest/app.py), so a
tenant that fills its share of the pool delays no one's key check.

`caller` leaves the tenant and subject on the request state: the access log reads them, and the
pooled endpoints (rest/threads.py) take their tenant's turn in the pool by that tenant.
"""

from __future__ import annotations

import functools
from typing import Annotated

import anyio.to_thread
from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from mnemo_sea.archive import Archive, Principal, Role, Unauthenticated, VerifiedKeys, cached_principal
from mnemo_sea.system.mnemo import Mnemo

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer msk_...`")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key, as a header")


async def mnemo_of(request: Request) -> Mnemo:
    mnemo: Mnemo = request.app.state.mnemo
    return mnemo


async def caller(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    header: Annotated[str | None, Security(_header)],
) -> Principal:
    known: Principal | None = getattr(request.state, "principal", None)
    if known is not None:  # verified before the body was read (rest/json_bodies.py)
        return known
    return await verified_caller(request, bearer.credentials if bearer is not None else header)


async def authenticate_request(request: Request) -> Principal | None:
    """The principal of the key `request` presents, verified as the `caller` dependency does
    (the same header schemes), before the body is read (rest/json_bodies.py). None when the app
    replaced `caller` (FastAPI's dependency_overrides): its stand-in decides, in the route."""
    if caller in request.app.dependency_overrides:
        return None
    bearer = await _bearer(request)
    return await verified_caller(
        request, bearer.credentials if bearer is not None else await _header(request)
    )


async def verified_caller(request: Request, presented: str | None) -> Principal:
    """The principal of `presented` (Unauthenticated when none or unknown), left on the request
    state for the access log, the pool's admission and the `caller` dependency."""
    if not presented:
        raise Unauthenticated("an API key is required: send Authorization: Bearer <key>")
    keys: VerifiedKeys = request.app.state.verified_keys
    principal = cached_principal(presented, keys)
    if principal is None:
        archive: Archive = request.app.state.mnemo.archive
        lane = request.app.state.key_lane
        principal = await anyio.to_thread.run_sync(
            functools.partial(archive.authenticate, presented, cache=keys), limiter=lane
        )
    # For the access log (never the key itself) and the tenant's turn in the pool.
    request.state.tenant_id = principal.tenant_id
    request.state.subject = principal.subject
    request.state.principal = principal
    return principal


async def admin(principal: Annotated[Principal, Depends(caller)]) -> Principal:
    principal.require(Role.ADMIN, "this endpoint")
    return principal


Caller = Annotated[Principal, Depends(caller)]
Admin = Annotated[Principal, Depends(admin)]
System = Annotated[Mnemo, Depends(mnemo_of)]
