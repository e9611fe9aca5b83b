"""The append-only audit chain, one per tenant.

Each event carries the hash of the previous one and its own hash over a canonical
encoding of its fields; the tenant's head row records the newest sequence number and
hash. Editing, reordering or removing any event (the newest included) breaks the chain,
and `verify_chain` says where.

The chain's hashes are plain SHA-256: someone who can write these tables can also remove the
newest events, set the head back and recompute every hash after an edit, and the chain alone
still verifies. Anchors close that gap. An `AuditAnchor` is the head (seq, hash) signed with the
deployment key, which is kept outside the tables (see signing.py); every deletion receipt
carries one too (its own event was the head). Verified against anchors kept elsewhere, a chain
that no longer holds an anchored event with the anchored hash was rewound or rewritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, update
from sqlalchemy.sql.dml import ReturningInsert

from ..rules.clock import utcnow
from ..rules.errors import IntegrityFailure, ReceiptInvalid
from ..rules.json_types import IsoTime, StrictInt
from . import schema as t
from .signing import ReceiptKey, canonical_time
from .upserts import dialect_insert

GENESIS = "0" * 64
TARGET_LIMIT = 1024  # the width of audit_events.target
ANCHOR_PURPOSE = "mnemo-sea/audit-anchor/v1"


def _event_hash(
    tenant_id: str, seq: int, at: datetime, actor: str, action: str, target: str, detail: str, prev: str
) -> str:
    canonical = json.dumps(
        [tenant_id, seq, at.isoformat(timespec="microseconds"), actor, action, target, detail, prev],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# The statements of an append, built once: building a statement and its cache key anew cost
# 40-70 us each, as much as running it (every audited write appends one event).
_EVENT_INSERT = t.audit_events.insert()
_HEAD_MOVE = (
    update(t.audit_heads)
    .where(t.audit_heads.c.tenant_id == bindparam("head_tenant"))
    .values(last_seq=bindparam("head_seq"), last_hash=bindparam("head_hash"))
)


@functools.cache
def _head_lock(dialect_name: str) -> ReturningInsert[tuple[int, str]]:
    """The tenant's head, created at genesis if absent, locked until the transaction ends (the
    no-op update takes the row lock as SELECT ... FOR UPDATE would) and read, in one statement."""
    insert = dialect_insert(dialect_name, t.audit_heads).values(
        tenant_id=bindparam("head_tenant"), last_seq=0, last_hash=GENESIS
    )
    statement: ReturningInsert[tuple[int, str]] = insert.on_conflict_do_update(
        index_elements=["tenant_id"], set_={"last_seq": t.audit_heads.c.last_seq}
    ).returning(t.audit_heads.c.last_seq, t.audit_heads.c.last_hash)
    return statement


def append_event(
    conn: Connection,
    tenant_id: str,
    actor: str,
    action: str,
    target: str,
    detail: dict[str, Any] | None = None,
) -> int:
    """Append one event in the caller's transaction; returns its sequence number."""
    head = conn.execute(_head_lock(conn.dialect.name), {"head_tenant": tenant_id}).one()
    seq = int(head.last_seq) + 1
    # Hash exactly what is stored: the column holds 1024 characters, and a target built from
    # caller input (a denied request names what it asked for) may be longer.
    target = target[:TARGET_LIMIT]
    # Microsecond precision is what every backend stores, so the hash is computed on that.
    at = utcnow()
    detail_json = json.dumps(detail or {}, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    digest = _event_hash(tenant_id, seq, at, actor, action, target, detail_json, head.last_hash)
    conn.execute(
        _EVENT_INSERT,
        {
            "tenant_id": tenant_id,
            "seq": seq,
            "at": at,
            "actor": actor,
            "action": action,
            "target": target,
            "detail_json": detail_json,
            "prev_hash": head.last_hash,
            "hash": digest,
        },
    )
    conn.execute(_HEAD_MOVE, {"head_tenant": tenant_id, "head_seq": seq, "head_hash": digest})
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


@dataclass(frozen=True)
class AuditAnchor:
    """A signed statement that tenant `tenant_id`'s chain had reached event `seq` with `hash`.

    Export one now and then (`mnemo-sea audit anchor --out FILE`) and keep it away from the
    database: `verify_chain` given it reports a chain rewound or rewritten under it.
    """

    tenant_id: str
    seq: StrictInt  # strict where an anchor is parsed back: `"5"` is not a seq (json_types)
    hash: str
    at: IsoTime
    key_id: str = ""
    signature: str = ""

    def payload(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "seq": self.seq,
            "hash": self.hash,
            "at": canonical_time(self.at),
            "key_id": self.key_id,
        }


def head(conn: Connection, tenant_id: str) -> tuple[int, str]:
    """The chain head as recorded: (last seq, last hash); (0, GENESIS) for an empty chain."""
    row = conn.execute(select(t.audit_heads).where(t.audit_heads.c.tenant_id == tenant_id)).first()
    return (0, GENESIS) if row is None else (int(row.last_seq), str(row.last_hash))


def event_hash(conn: Connection, tenant_id: str, seq: int) -> str | None:
    return conn.execute(
        select(t.audit_events.c.hash).where(
            t.audit_events.c.tenant_id == tenant_id, t.audit_events.c.seq == seq
        )
    ).scalar_one_or_none()


def make_anchor(conn: Connection, key: ReceiptKey, tenant_id: str) -> AuditAnchor:
    """The tenant's head now, signed. The chain is verified first: anchoring a broken chain
    would vouch for whatever an attacker left in it."""
    report = verify_chain(conn, tenant_id)
    if not report.ok:
        raise IntegrityFailure(
            f"the audit chain of tenant {tenant_id} is broken; investigate it before anchoring it",
            problems=list(report.problems),
        )
    seq, digest = head(conn, tenant_id)
    unsigned = AuditAnchor(tenant_id, seq, digest, utcnow(), key.key_id)
    return AuditAnchor(**{**unsigned.__dict__, "signature": key.sign(ANCHOR_PURPOSE, unsigned.payload())})


def check_signed(
    key: ReceiptKey, purpose: str, what: str, payload: dict[str, Any], key_id: str, signature: str
) -> None:
    """Raise ReceiptInvalid unless `signature` is this deployment's signature of `payload`, made
    with its key in force or one a rotation retired."""
    if not signature:
        raise ReceiptInvalid(
            "unsigned", f"the {what} is not signed, so nothing proves this deployment issued it"
        )
    # The key in force, or one it replaced (a rotation keeps those for verifying what they signed).
    verifier = key.verifier(key_id)
    if verifier is None:
        shown = key_id[:64]  # the caller's text: bounded before it reaches a message or the audit chain
        raise ReceiptInvalid(
            "foreign_key",
            f"the {what} was signed by another deployment's key ({shown!r}, this one's is {key.key_id!r})",
            key_id=shown,
        )
    if not verifier.verify(purpose, payload, signature):
        raise ReceiptInvalid(
            "signature", f"the {what} was altered after it was signed (its signature does not match)"
        )


def check_anchor(key: ReceiptKey, anchor: AuditAnchor, tenant_id: str) -> None:
    """Raise ReceiptInvalid unless this deployment signed `anchor` for this tenant."""
    check_signed(key, ANCHOR_PURPOSE, "audit anchor", anchor.payload(), anchor.key_id, anchor.signature)
    if anchor.tenant_id != tenant_id:
        raise ReceiptInvalid(
            "tenant", f"the audit anchor is of tenant {anchor.tenant_id!r}, not of {tenant_id!r}"
        )


def verify_chain(conn: Connection, tenant_id: str, anchors: tuple[AuditAnchor, ...] = ()) -> AuditReport:
    """Check the chain, and that it still holds every anchored event (anchors checked by the caller)."""
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
    stored = {int(row.seq): str(row.hash) for row in rows}
    for anchor in anchors:
        if anchor.seq == 0:
            continue  # anchored an empty chain: any chain extends it
        found = stored.get(anchor.seq)
        when = canonical_time(anchor.at)
        if found is None:
            problems.append(
                f"the chain was rewound: the anchor of {when} names event {anchor.seq}, "
                f"but the chain holds no such event (it ends at event {last_seq})"
            )
        elif found != anchor.hash:
            problems.append(
                f"the chain was rewritten: event {anchor.seq} differs from the one anchored at {when}"
            )
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


@dataclass(frozen=True)
class AuditQuery:
    """Which of a tenant's events a reader wants: every field given narrows the list (all must
    hold); none given, every event. Checked by the caller (Archive.find_audit_events)."""

    action: str | None = None
    actor: str | None = None
    target: str | None = None  # exactly this target
    target_contains: str | None = None  # a substring of the target, letter case ignored
    since: datetime | None = None  # at or after
    until: datetime | None = None  # before (half-open, as every time range of the archive)


def find_events(
    conn: Connection, tenant_id: str, query: AuditQuery, *, before_seq: int | None = None, limit: int = 100
) -> list[AuditEvent]:
    """The tenant's events matching `query`, newest first, filtered in SQL: at most `limit` of
    them before `before_seq` (keyset pagination: pass the last seq read to get the next page;
    None starts at the head). A reader looks at the latest events first, and a keyset page stays
    put while new events are appended above it."""
    c = t.audit_events.c
    stmt = select(t.audit_events).where(c.tenant_id == tenant_id)
    if before_seq is not None:
        stmt = stmt.where(c.seq < before_seq)
    if query.action is not None:
        stmt = stmt.where(c.action == query.action)
    if query.actor is not None:
        stmt = stmt.where(c.actor == query.actor)
    if query.target is not None:
        stmt = stmt.where(c.target == query.target[:TARGET_LIMIT])
    if query.target_contains is not None:
        # lower() on both sides: SQLite's LIKE ignores ASCII case and PostgreSQL's does not.
        stmt = stmt.where(func.lower(c.target).contains(query.target_contains.lower(), autoescape=True))
    if query.since is not None:
        stmt = stmt.where(c.at >= query.since)
    if query.until is not None:
        stmt = stmt.where(c.at < query.until)
    rows = conn.execute(stmt.order_by(c.seq.desc()).limit(limit)).all()
    return [AuditEvent(r.seq, r.at, r.actor, r.action, r.target, json.loads(r.detail_json)) for r in rows]
