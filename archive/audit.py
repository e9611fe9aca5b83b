"""The append-only audit chain, one per tenant.

Each event carries the hash of the previous one and its own hash over a canonical
encoding of its fields; the tenant's head row records the newest sequence number and
hash. Editing, reordering or removing any event (the newest included) breaks the chain,
and `verify_chain` says where.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update

from . import schema as t
from .clock import insert_ignore, utcnow

GENESIS = "0" * 64
TARGET_LIMIT = 1024  # the width of audit_events.target


def _event_hash(
    tenant_id: str, seq: int, at: datetime, actor: str, action: str, target: str, detail: str, prev: str
) -> str:
    canonical = json.dumps(
        [tenant_id, seq, at.isoformat(timespec="microseconds"), actor, action, target, detail, prev],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def append_event(
    conn: Connection,
    tenant_id: str,
    actor: str,
    action: str,
    target: str,
    detail: dict[str, Any] | None = None,
) -> int:
    """Append one event in the caller's transaction; returns its sequence number."""
    insert_ignore(
        conn, t.audit_heads, {"tenant_id": tenant_id, "last_seq": 0, "last_hash": GENESIS}, ["tenant_id"]
    )
    head = conn.execute(
        select(t.audit_heads).where(t.audit_heads.c.tenant_id == tenant_id).with_for_update()
    ).one()
    seq = int(head.last_seq) + 1
    # Hash exactly what is stored: the column holds 1024 characters, and a target built from
    # caller input (a denied request names what it asked for) may be longer.
    target = target[:TARGET_LIMIT]
    # Microsecond precision is what every backend stores, so the hash is computed on that.
    at = utcnow()
    detail_json = json.dumps(detail or {}, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    digest = _event_hash(tenant_id, seq, at, actor, action, target, detail_json, head.last_hash)
    conn.execute(
        t.audit_events.insert().values(
            tenant_id=tenant_id,
            seq=seq,
            at=at,
            actor=actor,
            action=action,
            target=target,
            detail_json=detail_json,
            prev_hash=head.last_hash,
            hash=digest,
        )
    )
    conn.execute(
        update(t.audit_heads)
        .where(t.audit_heads.c.tenant_id == tenant_id)
        .values(last_seq=seq, last_hash=digest)
    )
    return seq


@dataclass(frozen=True)
class AuditEvent:
    seq: int
    at: datetime
    actor: str
    action: str
    target: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class AuditReport:
    """The outcome of checking one tenant's chain: `ok` only if `problems` is empty."""

    tenant_id: str
    events: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_chain(conn: Connection, tenant_id: str) -> AuditReport:
    rows = conn.execute(
        select(t.audit_events).where(t.audit_events.c.tenant_id == tenant_id).order_by(t.audit_events.c.seq)
    ).all()
    head = conn.execute(select(t.audit_heads).where(t.audit_heads.c.tenant_id == tenant_id)).first()
    problems: list[str] = []
    prev = GENESIS
    expected_seq = 1
    # Keep checking past a gap: events after a removed one must still be unaltered, and the
    # head is compared with the newest stored event, not with the last one before the gap.
    for row in rows:
        if row.seq == expected_seq + 1:
            problems.append(f"event {expected_seq} is missing (next stored event is {row.seq})")
        elif row.seq != expected_seq:
            problems.append(
                f"events {expected_seq}-{row.seq - 1} are missing (next stored event is {row.seq})"
            )
        elif row.prev_hash != prev:
            problems.append(f"event {row.seq} does not link to event {row.seq - 1} (previous hash differs)")
        recomputed = _event_hash(
            tenant_id, row.seq, row.at, row.actor, row.action, row.target, row.detail_json, row.prev_hash
        )
        if recomputed != row.hash:
            problems.append(f"event {row.seq} was altered (its content no longer matches its hash)")
        prev = row.hash
        expected_seq = row.seq + 1
    last_seq = rows[-1].seq if rows else 0
    if head is None:
        if rows:
            problems.append("the chain head is missing")
    elif head.last_seq != last_seq:
        problems.append(f"the chain head names event {head.last_seq} but the chain ends at event {last_seq}")
    elif head.last_hash != prev:
        problems.append(f"event {last_seq} is not the event the chain head recorded (its hash differs)")
    return AuditReport(tenant_id=tenant_id, events=len(rows), problems=tuple(problems))


def list_events(
    conn: Connection, tenant_id: str, *, after_seq: int = 0, limit: int = 100
) -> list[AuditEvent]:
    rows = conn.execute(
        select(t.audit_events)
        .where(t.audit_events.c.tenant_id == tenant_id, t.audit_events.c.seq > after_seq)
        .order_by(t.audit_events.c.seq)
        .limit(limit)
    ).all()
    return [AuditEvent(r.seq, r.at, r.actor, r.action, r.target, json.loads(r.detail_json)) for r in rows]
