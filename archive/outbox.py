"""Outbox rows: what the index and caches must do, written in the same transaction as the change.

The archive only writes them; the indexer in the composition root claims, applies and
marks them done. Applying twice is harmless (deterministic point ids), so a crash between
applying and marking only means a replay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import Connection, func, select, update

from . import schema as t
from .clock import utcnow

# index_status: a version stopped being current (superseded) but stays searchable `as_of` its time.
Op = Literal["index_upsert", "index_status", "index_delete", "cache_purge"]
Entity = Literal["evidence", "tool_result", "memory", "summary", "tenant"]


@dataclass(frozen=True)
class OutboxItem:
    id: int
    tenant_id: str
    op: str
    entity: str
    entity_ref: str
    payload: dict[str, Any]
    created_at: datetime
    attempts: int


def enqueue(
    conn: Connection,
    tenant_id: str,
    op: Op,
    entity: Entity,
    entity_ref: str,
    payload: dict[str, Any] | None = None,
) -> int:
    result = conn.execute(
        t.outbox.insert().values(
            tenant_id=tenant_id,
            op=op,
            entity=entity,
            entity_ref=entity_ref,
            payload_json=json.dumps(payload or {}, ensure_ascii=False, sort_keys=True),
            created_at=utcnow(),
            attempts=0,
        )
    )
    pk = result.inserted_primary_key
    assert pk is not None
    return int(pk[0])


MAX_ATTEMPTS = 5


def claim_pending(conn: Connection, limit: int = 100) -> list[OutboxItem]:
    """Pending rows in order; on PostgreSQL rows locked by another drainer are skipped.

    A row that failed MAX_ATTEMPTS times is no longer claimed, so one poison row cannot stall
    the queue behind it; it stays pending (fsck reports it) until repaired.
    """
    stmt = (
        select(t.outbox)
        .where(t.outbox.c.done_at.is_(None), t.outbox.c.attempts < MAX_ATTEMPTS)
        .order_by(t.outbox.c.id)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True)
    return [
        OutboxItem(
            id=r.id,
            tenant_id=r.tenant_id,
            op=r.op,
            entity=r.entity,
            entity_ref=r.entity_ref,
            payload=json.loads(r.payload_json),
            created_at=r.created_at,
            attempts=r.attempts,
        )
        for r in conn.execute(stmt)
    ]


def mark_done(conn: Connection, ids: list[int]) -> None:
    if ids:
        conn.execute(update(t.outbox).where(t.outbox.c.id.in_(ids)).values(done_at=utcnow()))


def mark_failed(conn: Connection, item_id: int, error: str, *, counts: bool = True) -> None:
    """Keep the row pending with its error. `counts=False` for an outage (a store unreachable):
    only a failure of the row itself brings it closer to being set aside after MAX_ATTEMPTS."""
    values: dict[str, Any] = {"last_error": error[:2000]}
    if counts:
        values["attempts"] = t.outbox.c.attempts + 1
    conn.execute(update(t.outbox).where(t.outbox.c.id == item_id).values(**values))


def _pending(tenant_id: str | None) -> Any:
    cond = t.outbox.c.done_at.is_(None)
    return cond if tenant_id is None else cond & (t.outbox.c.tenant_id == tenant_id)


def pending_count(conn: Connection, tenant_id: str | None = None) -> int:
    """Rows not yet applied: all of them, or one tenant's (what a tenant may be told)."""
    return int(conn.execute(select(func.count()).where(_pending(tenant_id))).scalar_one())


def pending_ids(conn: Connection, tenant_id: str | None = None) -> set[int]:
    return {int(r.id) for r in conn.execute(select(t.outbox.c.id).where(_pending(tenant_id)))}


def backlog(conn: Connection) -> tuple[int, datetime | None]:
    """How many rows wait to be applied, and when the oldest of them was written (the lag)."""
    row = conn.execute(
        select(func.count(), func.min(t.outbox.c.created_at)).where(t.outbox.c.done_at.is_(None))
    ).one()
    oldest = row[1]
    if isinstance(oldest, str):  # should min() ever bypass the column type
        oldest = datetime.fromisoformat(oldest)
    if isinstance(oldest, datetime) and oldest.tzinfo is None:
        oldest = oldest.replace(tzinfo=UTC)
    return int(row[0]), oldest
