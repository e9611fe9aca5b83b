"""Signing in and out: the key (or `mnemo-sea ui`'s launch token) goes into the console's cookie."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from mnemo_sea.archive import Unauthenticated
from mnemo_sea.console.pages import base_of, render, security_headers
from mnemo_sea.console.viewer import COOKIE, LaunchLogin, principal_of

router = APIRouter()
# A pasted key is short; anything longer is not one.
MAX_KEY_CHARS = 200


def _safe_next(request: Request, target: str | None) -> str:
    """Where to go after signing in: a path inside the console, never another site."""
    base = base_of(request)
    home = f"{base}/"
    if not target or not target.startswith(home) or target.startswith("//") or "\\" in target:
        return home
    return target


def _signed_in(request: Request, credential: str, target: str | None) -> Response:
    answer = RedirectResponse(_safe_next(request, target), status_code=303, headers=security_headers())
    answer.set_cookie(
        COOKIE,
        credential,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=f"{base_of(request)}/",
    )
    return answer


@router.get("/login", response_class=HTMLResponse)
async def login_form(
    request: Request,
    token: Annotated[str | None, Query(max_length=MAX_KEY_CHARS)] = None,
    next: Annotated[str | None, Query(max_length=2_000)] = None,
) -> Response:
    """The form; with `?token=` (the link `mnemo-sea ui` prints) signs in at once. Only the launch
    token signs in by a link: an API key in a URL would stay in the browser's history and any
    proxy's log, and a link that signs in as its key lets another site sign a person in as
    someone else. A key goes through the form."""
    if token:
        launch: LaunchLogin | None = request.app.state.launch
        if launch is None or not launch.matches(token):
            return render(
                request, "login.html", None, 401, reason="that link's token is not valid", next=next
            )
        await principal_of(request, token)
        return _signed_in(request, token, next)
    return render(request, "login.html", None, reason=None, next=next)


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    key: Annotated[str, Form(max_length=MAX_KEY_CHARS)],
    next: Annotated[str | None, Form(max_length=2_000)] = None,
) -> Response:
    try:
        await principal_of(request, key.strip())
    except Unauthenticated:
        return render(
            request, "login.html", None, 401, reason="that key is not valid (unknown or revoked)", next=next
        )
    return _signed_in(request, key.strip(), next)


@router.post("/logout")
async def logout(request: Request) -> Response:
    answer = RedirectResponse(f"{base_of(request)}/login", status_code=303, headers=security_headers())
    answer.delete_cookie(COOKIE, path=f"{base_of(request)}/")
    return answer
