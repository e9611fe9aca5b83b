"""Memory facts: `(owner, key) -> value` with provenance and a supersede chain.

A correction never overwrites: the previous version becomes superseded and stays in the
history, so an answer that changed can be explained. Model inferences are candidates:
they are returned, not stored, unless the policy allows it. A write never supersedes a current
fact of a higher-ranked provenance (records.PROVENANCE_RANK): a user_claim after a
user_correction raises MemoryConflict naming the current fact, so the contradiction reaches
the caller instead of being resolved silently.

An expired fact (TTL) is hidden at read time, whether or not any sweep has run, and reads as
status `expired` in the history. `purge_expired` (on demand, and on a schedule in the worker)
deletes expired versions like a deletion does: rows, index points and caches, with an audit
event. `forget` deletes every version of one fact the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, and_, case, func, not_, select, update

from ..rules import limits
from ..rules.checks import aware
from ..rules.clock import utcnow
from ..rules.errors import (
    Forbidden,
    InvalidInput,
    MemoryConflict,
    NotFound,
)
from ..rules.in_force import expired, expired_clause, in_force
from ..rules.operations import MAX_TTL_SECONDS, RememberOp
from ..rules.policy import check_list_limit, check_offset, check_prefix
from ..rules.principal import Principal, Role, Sensitivity, check_identifier
from ..rules.records import (
    PROVENANCE_RANK,
    MemoryFact,
    RememberOutcome,
    parse_provenance,
)
from ..rules.refs import MEMORY_KEY, SourceRef
from ..storage import schema as t
from ..storage.idempotency import keyed, previous_reply, save_reply
from ..storage.locks import lock_chain
from ..storage.outbox import enqueue
from ..storage.prefixes import starts_with
from ..storage.rows import fact_from_row
from ..storage.sources import source_owner, source_sensitivity
from ..storage.store import ArchiveStore

log = logging.getLogger(__name__)


VALUE_LIMIT = limits.MEMORY_VALUE_CHARS


def check_access(principal: Principal, owner: str, action: str) -> None:
    """`owner` is a well-formed owner this principal may act for."""
    check_identifier("owner", owner)
    principal.require_owner(owner, action)


def _check_source(conn: Connection, principal: Principal, ref: str) -> None:
    """A fact derived from a source must name one the caller can read, as a summary must:
    NotFound when it does not exist in the tenant (another tenant's is missing too), Forbidden
    above the caller's clearance or of an owner the caller may not act for."""
    parsed = SourceRef.parse(ref)
    level: Sensitivity | None = source_sensitivity(conn, principal.tenant_id, parsed)
    if level is None:
        raise NotFound("source", ref)
    principal.require_clearance(level, f"remembering a fact derived from {ref}")
    owner = source_owner(conn, principal.tenant_id, [ref])
    if owner is not None and not principal.may_act_for(owner):
        raise Forbidden(f"remembering a fact derived from {ref}: it is another owner's data", owner=owner)


def _chain(conn: Connection, tenant: str, owner: str, key: str, *, lock: bool = False) -> list[Row[Any]]:
    stmt = (
        select(t.memory_facts)
        .where(
            t.memory_facts.c.tenant_id == tenant, t.memory_facts.c.owner == owner, t.memory_facts.c.key == key
        )
        .order_by(t.memory_facts.c.version)
    )
    if lock:
        stmt = stmt.with_for_update()
    return list(conn.execute(stmt))


def _ttl(seconds: object) -> timedelta | None:
    if seconds is None:
        return None
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 < seconds <= MAX_TTL_SECONDS
    ):
        raise InvalidInput("ttl_seconds", f"must be a positive number of seconds, at most {MAX_TTL_SECONDS}")
    return timedelta(seconds=seconds)


def remember(
    store: ArchiveStore, principal: Principal, op: RememberOp, *, idempotency_key: str | None = None
) -> RememberOutcome:
    """Store `value` as the owner's current fact for `key`, superseding the previous one.

    Returns the outcome: persisted (a new version, or the unchanged current one) or, for a
    model inference the policy does not persist, a candidate that was not stored.
    With an idempotency key, repeating the same call returns the first outcome (NotFound if
    its fact was deleted since) and stores nothing; reusing the key for another request raises
    IdempotencyMismatch. A candidate's key is kept too, so a retry gets the same candidate.
    """
    principal.require(Role.READER, "remembering")
    owner, key, value, provenance, derived_from = op.owner, op.key, op.value, op.provenance, op.derived_from
    check_access(principal, owner, "remembering")
    if not isinstance(key, str) or not MEMORY_KEY.fullmatch(key):
        raise InvalidInput("key", f"{key!r} is not a memory key (letters, digits, . _ : / -; max 100)")
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("value", "must be a non-empty string")
    if len(value) > VALUE_LIMIT or "\x00" in value:
        raise InvalidInput("value", f"must be at most {VALUE_LIMIT} characters, without NUL")
    parse_provenance(provenance)
    ttl = _ttl(op.ttl_seconds)
    source = str(SourceRef.parse(derived_from)) if derived_from is not None else None
    tenant = principal.tenant_id
    request = keyed(
        principal,
        idempotency_key,
        "remember",
        {
            "owner": owner,
            "key": key,
            "value": value,
            "provenance": provenance,
            "ttl_seconds": None if ttl is None else ttl.total_seconds(),
            "derived_from": source,
        },
    )
    candidate = provenance == "model_inference" and not store.policy.persist_model_inferences
    if candidate and request is None:
        if source is not None:
            with store.read() as conn:
                _check_source(conn, principal, source)
        return _candidate(owner, key, value, provenance, source, ttl)

    with store.write() as conn:
        previous = previous_reply(conn, request)
        if previous is not None:
            return _replayed(conn, tenant, previous, owner, key, value, provenance, source)
        if source is not None:  # in the writing transaction: the source cannot vanish meanwhile
            _check_source(conn, principal, source)
        if candidate:
            outcome = _candidate(owner, key, value, provenance, source, ttl)
        else:
            outcome = _persist(conn, principal, owner, key, value, provenance, ttl, source)
        save_reply(
            conn,
            request,
            {
                "version": outcome.fact.version,
                "reason": outcome.reason,
                "created_at": outcome.fact.created_at,
                "expires_at": outcome.fact.expires_at,
            },
        )
        return outcome


def _candidate(
    owner: str,
    key: str,
    value: str,
    provenance: str,
    source: str | None,
    ttl: timedelta | None,
    reason: str = "model inferences are candidates, not stored",
) -> RememberOutcome:
    now = utcnow()
    expires = now + ttl if ttl is not None else None
    candidate = MemoryFact(owner, key, value, 0, provenance, "active", now, expires, source)
    return RememberOutcome(candidate, persisted=False, reason=reason)


def _persist(
    conn: Connection,
    principal: Principal,
    owner: str,
    key: str,
    value: str,
    provenance: str,
    ttl: timedelta | None,
    source: str | None,
) -> RememberOutcome:
    tenant = principal.tenant_id
    lock_chain(conn, "memory", tenant, owner, key)
    # Taken after the lock, so versions of one fact are stamped in the order they commit.
    now = utcnow()
    expires = now + ttl if ttl is not None else None
    chain = _chain(conn, tenant, owner, key, lock=True)
    current = next((r for r in chain if r.status == "active"), None)
    if (
        current is not None
        and current.value == value
        and current.provenance == provenance
        and current.derived_from == source
        and not expired(current.expires_at, now)
        and expires is None
    ):
        return RememberOutcome(fact_from_row(current), persisted=True, reason="unchanged")
    holds = current is not None and not expired(current.expires_at, now)
    if current is not None and holds and PROVENANCE_RANK[provenance] < PROVENANCE_RANK[current.provenance]:
        if provenance == "model_inference":
            # A guess stays a candidate, as it is under the default policy: it is no contradiction.
            reason = f"a model inference does not supersede the current {current.provenance}; not stored"
            return _candidate(owner, key, value, provenance, source, ttl, reason)
        raise MemoryConflict(owner, key, provenance, current.version, current.provenance)
    if current is not None:
        conn.execute(
            update(t.memory_facts)
            .where(
                t.memory_facts.c.tenant_id == tenant,
                t.memory_facts.c.owner == owner,
                t.memory_facts.c.key == key,
                t.memory_facts.c.version == current.version,
            )
            .values(status="superseded", ended_at=now)
        )
        # The superseded version stays in the index (status and validity updated) so `as_of`
        # searches find what was current then, as for superseded evidence.
        enqueue(conn, tenant, "index_status", "memory", f"{owner}/{key}@{current.version}", {"owner": owner})
    version = (chain[-1].version + 1) if chain else 1
    conn.execute(
        t.memory_facts.insert().values(
            tenant_id=tenant,
            owner=owner,
            key=key,
            version=version,
            value=value,
            provenance=provenance,
            status="active",
            created_at=now,
            created_by=principal.subject,
            expires_at=expires,
            ended_at=None,
            derived_from=source,
        )
    )
    enqueue(
        conn,
        tenant,
        "index_upsert",
        "memory",
        f"{owner}/{key}@{version}",
        {
            "owner": owner,
            "key": key,
            "version": version,
            "expires_at": expires.isoformat() if expires else None,
        },
    )
    enqueue(conn, tenant, "cache_purge", "tenant", tenant, {"reason": "memory changed"})
    fact = fact_from_row(_chain(conn, tenant, owner, key)[-1])
    reason = "new fact" if current is None else f"supersedes version {current.version}"
    return RememberOutcome(fact, persisted=True, reason=reason)


def _replayed(
    conn: Connection,
    tenant: str,
    reply: dict[str, Any],
    owner: str,
    key: str,
    value: str,
    provenance: str,
    source: str | None,
) -> RememberOutcome:
    """The outcome `remember` first returned. The request is the same as the first one's, so
    the reply keeps only the version, the reason and the times."""
    version = int(reply["version"])
    if version == 0:  # a candidate: nothing was stored but its times
        created = datetime.fromisoformat(reply["created_at"])
        expires = None if reply["expires_at"] is None else datetime.fromisoformat(reply["expires_at"])
        fact = MemoryFact(owner, key, value, 0, provenance, "active", created, expires, source)
        return RememberOutcome(fact, persisted=False, reason=reply["reason"])
    row = next((r for r in _chain(conn, tenant, owner, key) if r.version == version), None)
    # A forgotten fact's numbers start over: the same number written later is another fact.
    if row is None or row.created_at != datetime.fromisoformat(reply["created_at"]):
        raise NotFound("memory", f"{owner}/{key}@{version}")
    # `remember` answers with the fact it made current; superseding it later is a later state.
    fact = replace(fact_from_row(row), status="active")
    return RememberOutcome(fact, persisted=True, reason=reply["reason"])


def current(
    store: ArchiveStore, principal: Principal, owner: str, key: str, *, at: datetime | None = None
) -> MemoryFact | None:
    """The owner's current, unexpired fact for `key` (at time `at`, default now), or None."""
    principal.require(Role.READER, "reading memory")
    check_access(principal, owner, "reading memory")
    when = aware("at", at) or utcnow()
    with store.read() as conn:
        for row in reversed(_chain(conn, principal.tenant_id, owner, key)):
            if in_force(row.created_at, row.ended_at, when):
                fact = fact_from_row(row, when)
                return None if fact.expired(when) else fact
    return None


def history(store: ArchiveStore, principal: Principal, owner: str, key: str) -> list[MemoryFact]:
    """Every version of the owner's fact, oldest first: superseded ones, and an expired one
    (status `expired`) until the purge deletes it."""
    principal.require(Role.READER, "reading memory")
    check_access(principal, owner, "reading memory")
    now = utcnow()
    with store.read() as conn:
        return [fact_from_row(r, now) for r in _chain(conn, principal.tenant_id, owner, key)]


def facts(
    store: ArchiveStore, principal: Principal, owner: str, *, offset: int = 0, limit: int | None = None
) -> list[MemoryFact]:
    """The owner's current unexpired facts, by key: every one, or at most `limit` (1 to 10,000)
    after the first `offset` (expiry is judged in SQL, so a page is never short of a lapsed one)."""
    principal.require(Role.READER, "reading memory")
    check_access(principal, owner, "reading memory")
    check_offset(offset)
    if limit is not None:
        check_list_limit(limit)
    now = utcnow()
    m = t.memory_facts
    stmt = (
        select(m)
        .where(
            m.c.tenant_id == principal.tenant_id,
            m.c.owner == owner,
            m.c.status == "active",
            not_(expired_clause(m.c.expires_at, now)),
        )
        .order_by(m.c.key)
    )
    if offset or limit is not None:
        stmt = stmt.offset(offset).limit(limit)
    with store.read() as conn:
        return [fact_from_row(r, now) for r in conn.execute(stmt)]


@dataclass(frozen=True)
class MemoryOwner:
    """Someone the tenant keeps memory about, as a listing shows them."""

    owner: str
    facts: int  # keys with a current, unexpired value (what `facts` lists)
    keys: int  # keys with any version kept, expired and superseded ones included
    changed_at: datetime  # when the newest version of any of them was written


def list_owners(
    store: ArchiveStore,
    principal: Principal,
    *,
    prefix: str | None = None,
    limit: int = 1000,
    offset: int = 0,
) -> list[MemoryOwner]:
    """The owners with memory in the tenant, by name, at most `limit` (1 to 10,000) after the
    first `offset`; with `prefix`, only the names that start with it (literally and
    case-sensitively); a user sees only itself, as `facts` would let it read only its own."""
    principal.require(Role.READER, "listing memory")
    check_list_limit(limit)
    check_offset(offset)
    check_prefix(prefix, limits.ID_CHARS)
    now = utcnow()
    m = t.memory_facts
    holds = case((and_(m.c.status == "active", not_(expired_clause(m.c.expires_at, now))), 1), else_=0)
    stmt = (
        select(
            m.c.owner,
            func.sum(holds).label("facts"),
            func.count(m.c.key.distinct()).label("keys"),
            func.max(m.c.created_at).label("changed_at"),
        )
        .where(m.c.tenant_id == principal.tenant_id)
        .group_by(m.c.owner)
        .order_by(m.c.owner)
    )
    if not principal.has(Role.AGENT):
        stmt = stmt.where(m.c.owner == principal.subject)
    if prefix:
        stmt = stmt.where(starts_with(m.c.owner, prefix))
    with store.read() as conn:
        rows = conn.execute(stmt.limit(limit).offset(offset))
        return [MemoryOwner(r.owner, int(r.facts), int(r.keys), r.changed_at) for r in rows]
