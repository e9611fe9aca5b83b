"""Who is calling: an API key (Authorization: Bearer, or X-API-Key) mapped to a principal.

The tenant always comes from the key, never from a body or a query parameter.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from mnemo_sea.archive import Principal, Role
from mnemo_sea.archive.api_keys import Unauthenticated, authenticate
from mnemo_sea.system.mnemo import Mnemo

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer msk_...`")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key, as a header")


def mnemo_of(request: Request) -> Mnemo:
    mnemo: Mnemo = request.app.state.mnemo
    return mnemo


def caller(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    header: Annotated[str | None, Security(_header)],
) -> Principal:
    presented = bearer.credentials if bearer is not None else header
    if not presented:
        raise Unauthenticated("an API key is required: send Authorization: Bearer <key>")
    principal = authenticate(mnemo_of(request).archive.store, presented)
    # For the access log (never the key itself).
    request.state.tenant_id = principal.tenant_id
    request.state.subject = principal.subject
    return principal


def admin(principal: Annotated[Principal, Depends(caller)]) -> Principal:
    principal.require(Role.ADMIN, "this endpoint")
    return principal


Caller = Annotated[Principal, Depends(caller)]
Admin = Annotated[Principal, Depends(admin)]
System = Annotated[Mnemo, Depends(mnemo_of)]
