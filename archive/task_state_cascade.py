"""What a deletion does to task states: the facts citing deleted data leave every version, and
what they settled is open again, up to the current version.

A confirmed fact may repeat what it cites, so when the cited data is deleted the fact goes from
every version, rewritten in place (no version may keep deleted text). The open item the fact
settled would then vanish unnoticed: gone from the open lists with nothing that settles it. So
the rewrite reopens it, in the list it was in, in the version the fact settled it in and in each
later one, until a version that settles it with another fact or releases it with a reason.

The current version is the one an agent works from: when the rewrite reopens anything there, a
new version (n+1, the same body, by the deleting principal) supersedes it, so the change shows
as a new version number (a writer holding n is told to read again, the context's task state
segment changes) and is audited (`task_state_reopen`, by the deletion's caller). Rewriting the
old versions alike keeps every version coherent with its predecessor: none claims an unknown
vanished without being settled.

Concurrency: the current version's row is locked before the versions are read, and a writer
supersedes a version only while it is still current (task_state.update_task_state), so a write
racing the cascade either commits first (and is rewritten with the rest) or is refused with
StateConflict (and reads the reopened version).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, select, update

from .storage import schema as t

_OPEN_LISTS = ("unresolved", "pending_operations")


@dataclass(frozen=True)
class Reopened:
    """A version the cascade added because it reopened open items in the current one."""

    session_id: str
    version: int
    superseded: int
    items: int


def open_items(body_json: str) -> dict[str, str]:
    """A body's open items, each with the open list it is in (`unresolved` if in both)."""
    body = json.loads(body_json)
    return {item: name for name in reversed(_OPEN_LISTS) for item in body.get(name, [])}


def drop_citations(
    body_json: str,
    refs: Collection[str],
    carried: Mapping[str, str] | None = None,
    before: Mapping[str, str] | None = None,
) -> tuple[str, dict[str, str]]:
    """A version's body without the confirmed facts citing any of `refs`, and the open items it
    holds again (item -> the open list it went back to). Pure.

    Open again: what a dropped fact settled (in the list `before`, the previous version's open
    items, had it in; else `unresolved`), and every item of `carried` (what the rewrite reopened
    in the version before), unless this version still lists it as open, settles it with a fact
    it keeps, or released it."""
    body = json.loads(body_json)
    kept: list[Any] = []
    dropped: list[Any] = []
    for c in body.get("confirmed", []):
        (dropped if c.get("ref") in refs else kept).append(c)
    body["confirmed"] = kept
    candidates = dict(carried or {})
    for c in dropped:
        item = c.get("resolves")
        if isinstance(item, str):
            candidates.setdefault(item, (before or {}).get(item, "unresolved"))
    still_open = {item for name in _OPEN_LISTS for item in body.get(name, [])}
    settled = {c["resolves"] for c in kept if isinstance(c.get("resolves"), str)}
    released = {r.get("item") for r in body.get("released", []) if isinstance(r, dict)}
    reopened: dict[str, str] = {}
    for item, listed in candidates.items():
        if item in still_open or item in settled or item in released:
            continue
        body.setdefault(listed, []).append(item)
        reopened[item] = listed
    return json.dumps(body, ensure_ascii=False, sort_keys=True), reopened


def _where(tenant: str, session_id: str) -> Any:
    return (t.task_states.c.tenant_id == tenant) & (t.task_states.c.session_id == session_id)


def _lock_current(conn: Connection, tenant: str, session_id: str) -> int | None:
    """The current version's number, its row locked. A writer that superseded it while this waited has
    committed the next one: lock that instead (a latest row marked superseded, which only a hand
    edit makes, is taken as it is)."""
    seen: int | None = None
    while True:
        row = conn.execute(
            select(t.task_states.c.version, t.task_states.c.superseded_at)
            .where(_where(tenant, session_id))
            .order_by(t.task_states.c.version.desc())
            .limit(1)
            .with_for_update()
        ).first()
        if row is None:
            return None
        if row.superseded_at is None or row.version == seen:
            return int(row.version)
        seen = int(row.version)


def rewrite_session(
    conn: Connection,
    tenant: str,
    session_id: str,
    gone: Mapping[int, Collection[str]],
    actor: str,
    now: datetime,
) -> Reopened | None:
    """Rewrite one session's versions for a deletion, in the caller's transaction: from the
    first version in `gone` (version -> the deleted refs it cites) to the current one, each loses
    the facts citing deleted refs and holds again what they settled (module docstring); their ref
    rows go. When the current version holds an item again, version n+1 is inserted (its ref rows
    copied) and returned; the caller audits it."""
    current = _lock_current(conn, tenant, session_id)
    if current is None or not gone:
        return None
    rows = conn.execute(
        select(t.task_states.c.version, t.task_states.c.body_json, t.task_states.c.sensitivity)
        .where(_where(tenant, session_id), t.task_states.c.version >= min(gone) - 1)
        .order_by(t.task_states.c.version)
        .with_for_update()
    ).all()
    if rows and rows[0].version < min(gone):  # the version before: read, never rewritten
        before = open_items(rows[0].body_json)
        rows = rows[1:]
    else:
        before = {}
    if not rows:
        return None
    carried: dict[str, str] = {}
    body = ""
    for row in rows:
        refs = gone.get(row.version, ())
        body, carried = drop_citations(row.body_json, refs, carried, before)
        before = open_items(body)
        if refs or carried:
            conn.execute(
                update(t.task_states)
                .where(_where(tenant, session_id), t.task_states.c.version == row.version)
                .values(body_json=body)
            )
        if refs:
            conn.execute(
                delete(t.task_state_refs).where(
                    t.task_state_refs.c.tenant_id == tenant,
                    t.task_state_refs.c.session_id == session_id,
                    t.task_state_refs.c.version == row.version,
                    t.task_state_refs.c.ref.in_(sorted(refs)),
                )
            )
    if not carried:
        return None
    last = rows[-1]
    return _supersede(
        conn, tenant, session_id, int(last.version), int(last.sensitivity), body, actor, now, len(carried)
    )


def _supersede(
    conn: Connection,
    tenant: str,
    session_id: str,
    current: int,
    sensitivity: int,
    body_json: str,
    actor: str,
    now: datetime,
    items: int,
) -> Reopened:
    """Version n+1 with the rewritten body of n: what n released was released from n-1, so the
    new version releases nothing."""
    version = current + 1
    body = json.loads(body_json)
    body["released"] = []
    conn.execute(
        update(t.task_states)
        .where(_where(tenant, session_id), t.task_states.c.version == current)
        .values(superseded_at=now)
    )
    conn.execute(
        t.task_states.insert().values(
            tenant_id=tenant,
            session_id=session_id,
            version=version,
            body_json=json.dumps(body, ensure_ascii=False, sort_keys=True),
            created_at=now,
            created_by=actor,
            sensitivity=sensitivity,
            superseded_at=None,
        )
    )
    refs = conn.execute(
        select(t.task_state_refs.c.ref).where(
            t.task_state_refs.c.tenant_id == tenant,
            t.task_state_refs.c.session_id == session_id,
            t.task_state_refs.c.version == current,
        )
    ).scalars()
    rows = [{"tenant_id": tenant, "session_id": session_id, "version": version, "ref": r} for r in refs]
    if rows:
        conn.execute(t.task_state_refs.insert(), rows)
    return Reopened(session_id, version, current, items)
