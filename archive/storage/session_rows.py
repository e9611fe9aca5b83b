"""The sessions table: open a session inside a write, read one a principal may read. Shared by
the two features that write into a session (its tool results and its task state).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, select

from ..rules.errors import Forbidden, NotFound, StateConflict
from ..rules.principal import Principal
from . import schema as t
from .upserts import insert_ignore


def readable_session(conn: Connection, principal: Principal, session_id: str) -> Row[Any]:
    """The session row, if this principal may read it: a user reads only sessions about itself."""
    row = session_row(conn, principal.tenant_id, session_id, lock=False)
    if not principal.may_act_for(row.owner):
        raise Forbidden(f"session {session_id!r} is about another owner", session_id=session_id)
    return row


def session_row(conn: Connection, tenant_id: str, session_id: str, *, lock: bool) -> Row[Any]:
    row = conn.execute(
        _LOCKED_SESSION if lock else _SESSION, {"tenant_id": tenant_id, "session_id": session_id}
    ).first()
    if row is None:
        raise NotFound("session", session_id)
    return row


# Built once: every write into a session reads its row (see outbox._claim_statement for what
# building a statement per call costs).
_SESSION = select(t.sessions).where(
    t.sessions.c.tenant_id == bindparam("tenant_id"),
    t.sessions.c.session_id == bindparam("session_id"),
    t.sessions.c.deleted_at.is_(None),
)
_LOCKED_SESSION = _SESSION.with_for_update()


def open_session(
    conn: Connection, principal: Principal, session_id: str, owner: str | None, now: datetime
) -> None:
    """Create the session when absent, in the caller's write transaction; what every write that
    may start a session (a result, a task state) does first.

    `owner` (already validated) is the person the session is about, set when it is created
    (default: the writing principal). Raises StateConflict when the session is about another
    owner than the one given, or was deleted (its tombstone keeps its ids from being reused).
    """
    tenant = principal.tenant_id
    insert_ignore(
        conn,
        t.sessions,
        {
            "tenant_id": tenant,
            "session_id": session_id,
            "owner": principal.subject if owner is None else owner,
            "created_at": now,
            "next_result_no": 1,
        },
        ["tenant_id", "session_id"],
    )
    session = conn.execute(
        select(t.sessions.c.deleted_at, t.sessions.c.owner).where(
            t.sessions.c.tenant_id == tenant, t.sessions.c.session_id == session_id
        )
    ).one()
    check_opened(session_id, owner, session.owner, session.deleted_at)


def check_opened(session_id: str, owner: str | None, held_by: str, deleted_at: datetime | None) -> None:
    """The session's row allows this write: the owner given (if any) is its own, and it is no tombstone."""
    if owner is not None and held_by != owner and deleted_at is None:
        raise StateConflict(
            f"session {session_id!r} belongs to owner {held_by!r}, not {owner!r}",
            session_id=session_id,
        )
    if deleted_at is not None:
        raise StateConflict(
            f"session {session_id!r} was deleted; its ids are never reused, so write into a new session",
            session_id=session_id,
        )
