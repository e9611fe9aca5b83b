"""Outbox rows: what the index and caches must do, written in the same transaction as the change.

The archive only writes them; the indexer in the composition root claims, applies and
marks them done. Applying twice is harmless (deterministic point ids), so a crash between
applying and marking only means a replay.

A payload may carry content (an archived note, an evidence source), so no row keeps one
longer than it is needed: marking a row done empties its payload and error, and a deletion
empties the rows of what it deletes in its own transaction (`scrub`). Done rows themselves
stay (they are the history of what was applied) but hold identifiers only.

Group commit (embedded index): a row the indexer applied but whose effect the index has not
flushed yet is marked `applied_at` (`mark_applied`, which empties it like `mark_done`): it is not
claimed again and not counted as pending (it is applied), yet it is not done either. Only the
flush makes it done; a crash before that leaves it not done, and `reclaim_applied` on the next
open makes it pending again, to be replayed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, cast

from sqlalchemy import (
    BindParameter,
    Connection,
    Select,
    Update,
    and_,
    bindparam,
    func,
    or_,
    select,
    text,
    tuple_,
    update,
)

from ..rules.clock import utcnow
from ..rules.errors import OutboxOwned
from ..rules.original_pages import parse_page_ref
from . import schema as t
from .statements import prepared_insert, prepared_select
from .store import ArchiveStore

# index_status: a version stopped being current (superseded) but stays searchable `as_of` its time.
Op = Literal["index_upsert", "index_status", "index_delete", "cache_purge"]
# result_original: a page of an archived result's original (`<session>/<rN>#<page>`), indexed
# behind the writes (the trailing lane, `claim_pending(lane=)`).
Entity = Literal["evidence", "tool_result", "result_original", "memory", "summary", "tenant"]


class OutboxItem(NamedTuple):
    """A pending row as the indexer applies it. The payload is decoded when read: most rows (an
    upsert, a status change) re-read their target from the archive and never look at it, and
    the rest read it once. A NamedTuple: a drain pass claims a batch's thousands of rows, and a
    frozen dataclass cost ~3 us a row to build against ~0.3."""

    id: int
    tenant_id: str
    op: str
    entity: str
    entity_ref: str
    payload_json: str
    attempts: int

    @property
    def payload(self) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.payload_json)
        return decoded


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
    return int(pk.id)


# json.dumps(..., ensure_ascii=False, sort_keys=True) without building an encoder per row.
_encode_payload = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode
_ENQUEUED = ("tenant_id", "op", "entity", "entity_ref", "payload_json", "created_at", "attempts")


# An outbox row to write: (tenant, op, entity, entity_ref, payload); a payload of None is the empty one.
OutboxRow = tuple[str, Op, Entity, str, dict[str, Any] | None]


def enqueue_many(conn: Connection, rows: Sequence[OutboxRow]) -> None:
    """`enqueue` for many (tenant, op, entity, entity_ref, payload) rows at once (a prepared
    INSERT: an executemany, or on SQLite multi-row statements); they get increasing ids in the
    order given, so the indexer applies them in that order. A payload
    of None is the empty one."""
    if not rows:
        return
    now = utcnow()
    insert = prepared_insert("outbox", t.outbox.insert, _ENQUEUED, conn.dialect)
    insert.execute_values(
        conn,
        [
            (
                tenant_id,
                op,
                entity,
                entity_ref,
                EMPTY_PAYLOAD if payload is None else _encode_payload(payload),
                now,
                0,
            )
            for tenant_id, op, entity, entity_ref, payload in rows
        ],
    )


def last_id(conn: Connection) -> int:
    """The highest outbox row id this transaction sees (0 for none). Read by an evidence write
    after its own rows: a row naming one of its versions that is written after it commits gets
    a higher id. On SQLite writers take turns; on PostgreSQL a sequence hands out ids as rows are
    inserted, and a writer or deleter of the same record waits for this one's chain lock
    (`locks.lock_chains`) before inserting any."""
    return int(conn.execute(_LAST_ID).scalar_one() or 0)


_LAST_ID = select(func.max(t.outbox.c.id))


MAX_ATTEMPTS = 5


# Rows applied behind the writes rather than by them: a write's drain leaves them, so an
# agent's `archive` does not wait for its original's pages to be indexed (the indexer's trail).
TRAILING: tuple[Entity, ...] = ("result_original",)
# Which rows a drain claims: those of the writes, the trailing ones, or all (None).
Lane = Literal["writes", "trailing"]


def _in_lane(stmt: Any, lane: Lane | None) -> Any:
    # A comparison per entity, not IN (...): an IN of values is expanded per execution, which
    # a statement prepared once (`pending_rows`) cannot be.
    entity = t.outbox.c.entity
    if lane == "writes":
        return stmt.where(and_(*(entity != e for e in TRAILING)))
    if lane == "trailing":
        return stmt.where(or_(*(entity == e for e in TRAILING)))
    return stmt


def claim_pending(
    conn: Connection, limit: int = 100, lane: Lane | None = None, after: int = 0
) -> list[OutboxItem]:
    """Pending rows in order, of one lane or all, from the first row after id `after`; on
    PostgreSQL rows locked by another drainer are skipped.

    A row that failed MAX_ATTEMPTS times is no longer claimed, so one poison row cannot stall
    the queue behind it; it stays pending (fsck reports it) until repaired.
    """
    stmt = _claim_statement(lane, conn.dialect.name == "postgresql")
    # All rows in one fetch: iterating the result fetches row by row, which costs more than
    # building the items once a pass claims an ingest batch's thousands of rows.
    return [OutboxItem._make(row) for row in conn.execute(stmt, {"after": after, "limit": limit}).all()]


def pending_rows(
    store: ArchiveStore, limit: int, lane: Lane | None = None, after: int = 0
) -> list[OutboxItem]:
    """What `claim_pending` claims, read by the outbox's only drainer (a SQLite archive, or an
    embedded index: `claim_sole_drainer`) as one statement outside a transaction
    (`ArchiveStore.select`). No other drainer takes rows, so none need locking, and a drain
    pass reads twice (these rows, then `pending_total`): a transaction's own work through
    SQLAlchemy (connection, BEGIN, execution context, COMMIT) costs many times what SQLite
    spends running such a statement (statements.py)."""
    prepared = prepared_select(
        f"outbox.pending_rows/{lane}",
        lambda: _claim_statement(lane, False),
        store.engine.dialect,
        row=OutboxItem,
    )
    # Pooled: a drain may run on a thread of its own (the trail's, one a round), which a
    # reader connection kept for the thread would outlive by little.
    return cast(list[OutboxItem], store.select(prepared, {"after": after, "limit": limit}, pooled=True))


def pending_total(store: ArchiveStore, lane: Lane | None = None) -> int:
    """`pending_count` of every tenant, one lane or all, as one statement outside a transaction
    (see `pending_rows`): what a drain pass reports as left, whichever drainer it is."""
    prepared = prepared_select(
        f"outbox.pending_total/{lane}", lambda: _pending_count_statement(lane, False), store.engine.dialect
    )
    return int(store.select(prepared, {}, pooled=True)[0][0])


# The statements every drain pass runs are built once (per lane, and per locking dialect):
# building one per call cost SQLAlchemy 0.2-0.5 ms (the statement, then its cache key), more
# than SQLite spends running it, and an agent's archive call and its trail run about ten.
@functools.cache
def _claim_statement(lane: Lane | None, locking: bool) -> Select[Any]:
    o = t.outbox.c
    stmt = (
        # The columns an OutboxItem holds: the rest is NULL for a pending row, or not used.
        select(o.id, o.tenant_id, o.op, o.entity, o.entity_ref, o.payload_json, o.attempts)
        .where(_pending(None), o.attempts < MAX_ATTEMPTS, o.id > bindparam("after"))
        .order_by(o.id)
        .limit(bindparam("limit"))
    )
    in_lane: Select[Any] = _in_lane(stmt, lane)
    return in_lane.with_for_update(skip_locked=True) if locking else in_lane


EMPTY_PAYLOAD = "{}"
# Rows that only re-read a target from the archive: once the target is deleted they have
# nothing left to do (the indexer would skip them), while index_delete rows still must run.
_REREADS = ("index_upsert", "index_status")
_CHUNK = 400  # (entity, ref) pairs per statement, under every backend's bound-parameter limit


def _id_runs(ids: Sequence[int]) -> list[tuple[int, int]]:
    """`ids` as runs of consecutive integers (first, last), ascending: a drain pass marks the rows
    it claimed in id order, so its ids are mostly one run, one condition instead of a long IN."""
    runs: list[tuple[int, int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def _mark(conn: Connection, ids: Sequence[int], **values: Any) -> None:
    """Set `values` on the rows of `ids` not done yet: one statement per run of consecutive ids
    (a drain pass's ids are mostly one), all runs in one executemany."""
    runs = _id_runs(ids)
    if not runs:
        return
    bound = {f"set_{name}": value for name, value in values.items()}
    conn.execute(_mark_statement(tuple(sorted(values))), [{"lo": lo, "hi": hi, **bound} for lo, hi in runs])


@functools.cache
def _mark_statement(columns: tuple[str, ...]) -> Update:
    """The UPDATE setting `columns` on the rows from id `lo` to `hi` not done yet (built once,
    see `_claim_statement`). Its values are bound as `set_<column>`: a parameter may not take a
    column's own name in an UPDATE's SET clause."""
    o = t.outbox.c
    return (
        update(t.outbox)
        .where(o.id.between(bindparam("lo"), bindparam("hi")), o.done_at.is_(None))
        .values({name: bindparam(f"set_{name}", type_=o[name].type) for name in columns})
    )


def mark_done(conn: Connection, ids: list[int]) -> None:
    """Mark rows applied, emptying their payload and error: nothing reads them again, and a
    payload may hold content that a later deletion would otherwise have to find. A row done
    already (a deletion's `scrub` marks re-reads of what it deleted) keeps its time. `applied_at`
    is cleared: it only ever marks a row awaiting the flush."""
    _mark(conn, ids, done_at=utcnow(), payload_json=EMPTY_PAYLOAD, last_error=None, applied_at=None)


def mark_applied(conn: Connection, ids: list[int]) -> None:
    """Rows applied to an index that has not flushed them yet: emptied as `mark_done` empties
    them (a replay re-reads its target from the archive, never the payload), no longer claimed
    or counted as pending, but not done: `mark_done` follows the flush."""
    _mark(conn, ids, applied_at=utcnow(), payload_json=EMPTY_PAYLOAD, last_error=None)


def reclaim_applied(conn: Connection) -> int:
    """Make rows applied but never flushed (the process ended first) pending again; returns
    how many. Only an opener that owns the index may call it (the embedded index's lock)."""
    result = conn.execute(
        update(t.outbox)
        .where(t.outbox.c.done_at.is_(None), t.outbox.c.applied_at.is_not(None))
        .values(applied_at=None)
    )
    return int(result.rowcount or 0)


def retry_set_aside(conn: Connection, tenant_id: str | None = None) -> int:
    """Make pending rows (of every tenant, or one) that failed MAX_ATTEMPTS times claimable again
    (attempts back to 0); returns how many. What a repair does before it drains: a row whose cause is gone (a
    release that indexes what an older one refused) is then applied and marked done, and one
    still failing is set aside again after as many tries."""
    o = t.outbox.c
    result = conn.execute(
        update(t.outbox).where(_pending(tenant_id), o.attempts >= MAX_ATTEMPTS).values(attempts=0)
    )
    return int(result.rowcount or 0)


def scrub(conn: Connection, tenant_id: str, targets: list[tuple[Entity, str]]) -> int:
    """Empty the payload and error of every row about one of `targets` (entity, entity_ref),
    in the deleting transaction; pending re-reads of them are marked done too. Returns the
    rows changed.

    Pending index_delete rows stay pending: they remove points. On PostgreSQL a row a drainer
    holds locked right now is skipped instead of waited for: that drainer marks it done (which
    empties it) or failed, and a failed re-read of a deleted target is done on its next try.
    `verify_deleted` reports any row still holding something.
    """
    changed = 0
    now = utcnow()
    for start in range(0, len(targets), _CHUNK):
        chunk = targets[start : start + _CHUNK]
        about = (t.outbox.c.tenant_id == tenant_id) & tuple_(t.outbox.c.entity, t.outbox.c.entity_ref).in_(
            chunk
        )
        holding = or_(t.outbox.c.payload_json != EMPTY_PAYLOAD, t.outbox.c.last_error.is_not(None))
        reread = t.outbox.c.done_at.is_(None) & t.outbox.c.op.in_(_REREADS)
        stmt = select(t.outbox.c.id).where(about, or_(holding, reread))
        if conn.dialect.name == "postgresql":
            stmt = stmt.with_for_update(skip_locked=True)
        ids = [int(r.id) for r in conn.execute(stmt)]
        if not ids:
            continue
        conn.execute(
            update(t.outbox).where(t.outbox.c.id.in_(ids)).values(payload_json=EMPTY_PAYLOAD, last_error=None)
        )
        conn.execute(
            update(t.outbox)
            .where(t.outbox.c.id.in_(ids), t.outbox.c.done_at.is_(None), t.outbox.c.op.in_(_REREADS))
            .values(done_at=now, applied_at=None)
        )
        changed += len(ids)
    return changed


def holding(
    conn: Connection, tenant_id: str, targets: list[tuple[Entity, str]], written_by: datetime
) -> list[str]:
    """The rows about `targets` written by `written_by` that still hold a payload or an error,
    or wait to re-read one (what `scrub` at that time should have left none of; rows written
    later belong to records stored again under the same ids)."""
    found: list[str] = []
    for start in range(0, len(targets), _CHUNK):
        chunk = targets[start : start + _CHUNK]
        rows = conn.execute(
            select(t.outbox.c.id, t.outbox.c.op, t.outbox.c.entity, t.outbox.c.entity_ref).where(
                t.outbox.c.tenant_id == tenant_id,
                tuple_(t.outbox.c.entity, t.outbox.c.entity_ref).in_(chunk),
                t.outbox.c.created_at <= written_by,
                or_(
                    # A pending index_delete (the deletion's own) names ids only and must run.
                    or_(t.outbox.c.done_at.is_not(None), t.outbox.c.op != "index_delete")
                    & or_(t.outbox.c.payload_json != EMPTY_PAYLOAD, t.outbox.c.last_error.is_not(None)),
                    t.outbox.c.done_at.is_(None) & t.outbox.c.op.in_(_REREADS),
                ),
            )
        )
        found += [f"outbox {r.id} ({r.op} {r.entity} {r.entity_ref})" for r in rows]
    return found


def mark_failed(conn: Connection, item_id: int, error: str, *, counts: bool = True) -> None:
    """Keep the row pending with its error. `counts=False` for an outage (a store unreachable):
    only a failure of the row itself brings it closer to being set aside after MAX_ATTEMPTS."""
    values: dict[str, Any] = {"last_error": error[:2000]}
    if counts:
        values["attempts"] = t.outbox.c.attempts + 1
    conn.execute(update(t.outbox).where(t.outbox.c.id == item_id).values(**values))


def _pending(tenant_id: str | BindParameter[str] | None) -> Any:
    """Rows not yet applied (neither done nor applied awaiting a flush), of every tenant or of one
    (a value, or a parameter bound per execution)."""
    cond = t.outbox.c.done_at.is_(None) & t.outbox.c.applied_at.is_(None)
    return cond if tenant_id is None else cond & (t.outbox.c.tenant_id == tenant_id)


def pending_count(conn: Connection, tenant_id: str | None = None, lane: Lane | None = None) -> int:
    """Rows not yet applied: all of them, or one tenant's (what a tenant may be told), or one
    lane's. Rows applied and awaiting the index's flush are not counted (see
    `awaiting_flush_count`)."""
    if tenant_id is None:
        return int(conn.execute(_pending_count_statement(lane, False)).scalar_one())
    return int(conn.execute(_pending_count_statement(lane, True), {"tenant_id": tenant_id}).scalar_one())


@functools.cache
def _pending_count_statement(lane: Lane | None, of_tenant: bool) -> Select[Any]:
    """`pending_count`'s statement, built once (see `_claim_statement`)."""
    stmt: Select[Any] = _in_lane(
        select(func.count()).where(_pending(bindparam("tenant_id") if of_tenant else None)), lane
    )
    return stmt


def originals_pending(conn: Connection, tenant_id: str) -> list[str]:
    """The archived originals of the tenant (`<session>/<rN>`) with pages not yet indexed:
    their text is not yet searchable (their notes are)."""
    o = t.outbox.c
    stmt = select(o.entity_ref).where(_pending(tenant_id), o.entity == "result_original").distinct()
    return sorted({parse_page_ref(str(r.entity_ref))[0] for r in conn.execute(stmt)})


def awaiting_flush_count(conn: Connection) -> int:
    """Rows applied to the index and visible to searches, not yet flushed (so not yet done)."""
    return int(conn.execute(_AWAITING_FLUSH_COUNT).scalar_one())


_AWAITING_FLUSH_COUNT = select(func.count()).where(
    t.outbox.c.done_at.is_(None) & t.outbox.c.applied_at.is_not(None)
)


def pending_ids(conn: Connection, tenant_id: str | None = None) -> set[int]:
    return {int(r.id) for r in conn.execute(select(t.outbox.c.id).where(_pending(tenant_id)))}


@dataclass(frozen=True)
class OutboxBacklog:
    """What the metrics show of the outbox: rows still to apply, the oldest one's time, and rows
    applied but not yet flushed (the group commit still to come)."""

    pending: int
    oldest: datetime | None
    awaiting_flush: int


def backlog(conn: Connection) -> tuple[int, datetime | None]:
    """How many rows wait to be applied, and when the oldest of them was written (the lag).
    Rows applied and awaiting the index's flush are applied: not part of the backlog."""
    waiting = select(func.count().label("waiting"), func.min(t.outbox.c.created_at).label("oldest"))
    row = conn.execute(waiting.where(_pending(None))).one()
    oldest = row.oldest
    if isinstance(oldest, str):  # should min() ever bypass the column type
        oldest = datetime.fromisoformat(oldest)
    if isinstance(oldest, datetime) and oldest.tzinfo is None:
        oldest = oldest.replace(tzinfo=UTC)
    return int(row.waiting), oldest


# The session-level advisory lock a sole drainer holds on PostgreSQL (cf. store._MIGRATION_LOCK).
_SOLE_DRAINER_LOCK = 7_310_244_102


@dataclass
class SoleDrainer:
    """This process's claim to be the only drainer of the outbox: on PostgreSQL a session
    advisory lock on a connection of its own, held until `release()` or until the process
    dies (the server drops a dead session's locks); nothing on SQLite, whose one drainer is
    the process that opened the embedded index beside it."""

    connection: Connection | None

    def release(self) -> None:
        """End the session that holds the lock (the server then drops it), rather than unlock
        and hand the connection back to the pool: a failed unlock would leave a pooled session
        holding it."""
        if self.connection is not None:
            conn, self.connection = self.connection, None
            conn.invalidate()
            conn.close()


def claim_sole_drainer(store: ArchiveStore) -> SoleDrainer:
    """Become the outbox's only drainer; OutboxOwned when another process is (on PostgreSQL,
    the holder of the lock). A drainer that defers flushes and reclaims applied rows
    (the indexer's group commit over an embedded index) must be the only one: a second would
    apply rows to an index the first never sees and reset the first one's unflushed rows."""
    if store.is_sqlite:
        return SoleDrainer(None)
    with store.read() as probe:  # typed errors (StoreUnavailable) if the server is unreachable
        probe.execute(text("SELECT 1"))
    conn = store.engine.connect()
    try:
        held = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _SOLE_DRAINER_LOCK}).scalar_one()
        conn.commit()  # the lock is the session's, not the transaction's
    except BaseException:
        conn.close()
        raise
    if not held:
        conn.close()
        raise OutboxOwned(
            "another process already applies this database's outbox to an embedded index of its "
            "own (MNEMO_INDEX_PATH): one such process per database. Stop it, or use a Qdrant "
            "server (MNEMO_QDRANT_URL), which several API processes and workers can share"
        )
    return SoleDrainer(conn)
