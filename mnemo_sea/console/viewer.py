"""Who is looking: the principal behind a console request.

A browser cannot add an `Authorization` header to a link, so the console keeps the credential in
a cookie: an API key (checked exactly as REST checks it, rest/auth.py, through the same cache of
verified keys) or the launch token `mnemo-sea ui` prints, which stands for the principal the
command was started as (the CLI's `--tenant/--subject/--role/--clearance`), as Jupyter's token
link does. The cookie is HttpOnly (no script reads it) and SameSite=Strict (no other site's page
sends it), and scoped to the console's path. A request may also present the key as REST does,
in a header, for scripts and tests.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field

from fastapi import Request

from mnemo_sea.archive import Principal, Unauthenticated
from mnemo_sea.rest.auth import verified_caller

COOKIE = "mnemo_console"


@dataclass(frozen=True)
class LaunchLogin:
    """`mnemo-sea ui`'s own credential: whoever holds `token` looks as `principal`."""

    principal: Principal
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def matches(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self.token.encode())


class LoginNeeded(Exception):
    """No credential, or one that no longer holds: the page answers with the login form."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def presented_credential(request: Request) -> str | None:
    """The cookie, else a key in the headers REST reads."""
    cookie = request.cookies.get(COOKIE)
    if cookie:
        return cookie
    bearer = request.headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip() or None
    return request.headers.get("x-api-key") or None


async def principal_of(request: Request, presented: str) -> Principal:
    """The principal `presented` stands for; Unauthenticated when it is neither the launch token
    nor a valid key."""
    launch: LaunchLogin | None = request.app.state.launch
    if launch is not None and launch.matches(presented):
        principal = launch.principal
        request.state.tenant_id = principal.tenant_id
        request.state.subject = principal.subject
        request.state.principal = principal
        return principal
    return await verified_caller(request, presented)


async def viewer(request: Request) -> Principal:
    """The dependency of every page but the login: the principal looking."""
    presented = presented_credential(request)
    if presented is None:
        raise LoginNeeded("sign in with an API key to use the console")
    try:
        return await principal_of(request, presented)
    except Unauthenticated:
        raise LoginNeeded("that key is not valid (unknown or revoked): sign in again") from None
