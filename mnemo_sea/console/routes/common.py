"""What every page takes alike: its router, who is looking, where a long list starts, the facade
it reads through, and a moment a person names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from mnemo_sea.archive import InvalidInput, Principal
from mnemo_sea.console.viewer import viewer
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.receipt_json import MAX_SQL_INT


def page_router(**options: Any) -> APIRouter:
    """The router of a group of pages (`options` as APIRouter takes them). Pages run in REST's
    pool, a tenant's turn at a time (rest/threads.py): a tenant paging through a long session
    holds no more of the pool than its API calls may."""
    return APIRouter(route_class=PooledRoute, **options)


Viewer = Annotated[Principal, Depends(viewer)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]
# An offset whose absence means something of its own (the task state starts at its newest versions).
OptionalOffset = Annotated[int | None, Query(ge=0, le=10_000_000)]
# The seq an audit page lists down from (keyset paging: the last seq the page before showed).
BeforeSeq = Annotated[int | None, Query(ge=1, le=MAX_SQL_INT)]
# The longest moment a form sends: an ISO 8601 date and time with microseconds and a zone.
MOMENT_CHARS = 40


def mnemo_of(request: Request) -> Mnemo:
    """The facade the console was built over: every page reads through it, as its viewer."""
    mnemo: Mnemo = request.app.state.mnemo
    return mnemo


def moment(field: str, value: str | None) -> datetime | None:
    """A moment typed in a form or a link, as the archive takes it (aware): ISO 8601, with a
    space or `T` between date and time; without a zone it is UTC, the zone every page shows
    times in. Blank is None (now). Anything else is InvalidInput naming the field."""
    if value is None or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError):  # not a moment, or one past the calendar in UTC
        raise InvalidInput(
            field, f"{value[:MOMENT_CHARS]!r} is not a date and time (ISO 8601, e.g. 2026-12-06T10:48:42)"
        ) from None
