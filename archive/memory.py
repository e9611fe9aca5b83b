"""Memory facts: `(owner, key) -> value` with provenance and a supersede chain.

A correction never overwrites: the previous version becomes superseded and stays in the
history, so an answer that changed can be explained. Model inferences are candidates:
they are returned, not stored, unless the policy allows it. An expired fact (TTL) is hidden
at read time, whether or not any sweep has run.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, select, update

from . import schema as t
from .clock import aware, utcnow
from .errors import Forbidden, InvalidInput, NotFound
from .evidence import lock_chain
from .idempotency import keyed, previous_reply, save_reply
from .outbox import enqueue
from .principal import Principal, Role, check_identifier
from .records import PROVENANCES, MemoryFact, RememberOutcome
from .refs import SourceRef
from .store import ArchiveStore

# A fact that outlives a century is not time-sensitive; the bound keeps expiry dates in range.
MAX_TTL = timedelta(days=36_500)
# 100 characters: with the owner (128) the index id `memory:<owner>/<key>` stays within 256.
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$")
VALUE_LIMIT = 8_000


def fact_from_row(row: Row[Any]) -> MemoryFact:
    return MemoryFact(
        owner=row.owner,
        key=row.key,
        value=row.value,
        version=row.version,
        provenance=row.provenance,
        status=row.status,
        created_at=row.created_at,
        expires_at=row.expires_at,
        derived_from=row.derived_from,
    )


def _check_access(principal: Principal, owner: str, action: str) -> None:
    check_identifier("owner", owner)
    if not principal.may_act_for(owner):
        raise Forbidden(f"{action}: {principal.subject!r} may not act for owner {owner!r}", owner=owner)


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


def remember(
    store: ArchiveStore,
    principal: Principal,
    owner: str,
    key: str,
    value: str,
    provenance: str,
    *,
    ttl: timedelta | None = None,
    derived_from: str | SourceRef | None = None,
    idempotency_key: str | None = None,
) -> RememberOutcome:
    """Store `value` as the owner's current fact for `key`, superseding the previous one.

    Returns the outcome: persisted (a new version, or the unchanged current one) or, for a
    model inference the policy does not persist, a candidate that was not stored.
    With an idempotency key, repeating the same call returns the first outcome (NotFound if
    its fact was deleted since) and stores nothing; reusing the key for another request raises
    IdempotencyMismatch. A candidate's key is kept too, so a retry gets the same candidate.
    """
    principal.require(Role.READER, "remembering")
    _check_access(principal, owner, "remembering")
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise InvalidInput("key", f"{key!r} is not a memory key (letters, digits, . _ : / -; max 100)")
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("value", "must be a non-empty string")
    if len(value) > VALUE_LIMIT or "\x00" in value:
        raise InvalidInput("value", f"must be at most {VALUE_LIMIT} characters, without NUL")
    if provenance not in PROVENANCES:
        raise InvalidInput("provenance", f"{provenance!r} is not one of {', '.join(PROVENANCES)}")
    if ttl is not None and (not isinstance(ttl, timedelta) or not timedelta(0) < ttl <= MAX_TTL):
        raise InvalidInput("ttl", f"must be a positive timedelta of at most {MAX_TTL.days} days")
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
        return _candidate(owner, key, value, provenance, source, ttl)

    with store.write() as conn:
        previous = previous_reply(conn, request)
        if previous is not None:
            return _replayed(conn, tenant, previous, owner, key, value, provenance, source)
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
    owner: str, key: str, value: str, provenance: str, source: str | None, ttl: timedelta | None
) -> RememberOutcome:
    now = utcnow()
    expires = now + ttl if ttl is not None else None
    candidate = MemoryFact(owner, key, value, 0, provenance, "active", now, expires, source)
    return RememberOutcome(candidate, persisted=False, reason="model inferences are candidates, not stored")


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
        and (current.expires_at is None or current.expires_at > now)
        and expires is None
    ):
        return RememberOutcome(fact_from_row(current), persisted=True, reason="unchanged")
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
    if row is None:
        raise NotFound("memory", f"{owner}/{key}@{version}")
    # `remember` answers with the fact it made current; superseding it later is a later state.
    fact = replace(fact_from_row(row), status="active")
    return RememberOutcome(fact, persisted=True, reason=reply["reason"])


def current(
    store: ArchiveStore, principal: Principal, owner: str, key: str, *, at: datetime | None = None
) -> MemoryFact | None:
    """The owner's current, unexpired fact for `key` (at time `at`, default now), or None."""
    principal.require(Role.READER, "reading memory")
    _check_access(principal, owner, "reading memory")
    when = aware("at", at) or utcnow()
    with store.read() as conn:
        for row in reversed(_chain(conn, principal.tenant_id, owner, key)):
            in_force = row.created_at <= when and (row.ended_at is None or when < row.ended_at)
            if in_force:
                fact = fact_from_row(row)
                return None if fact.expired(when) else fact
    return None


def history(store: ArchiveStore, principal: Principal, owner: str, key: str) -> list[MemoryFact]:
    """Every version of the owner's fact, oldest first (superseded and expired ones included)."""
    principal.require(Role.READER, "reading memory")
    _check_access(principal, owner, "reading memory")
    with store.read() as conn:
        return [fact_from_row(r) for r in _chain(conn, principal.tenant_id, owner, key)]


def facts(store: ArchiveStore, principal: Principal, owner: str) -> list[MemoryFact]:
    """The owner's current unexpired facts, by key."""
    principal.require(Role.READER, "reading memory")
    _check_access(principal, owner, "reading memory")
    now = utcnow()
    with store.read() as conn:
        rows = conn.execute(
            select(t.memory_facts)
            .where(
                t.memory_facts.c.tenant_id == principal.tenant_id,
                t.memory_facts.c.owner == owner,
                t.memory_facts.c.status == "active",
            )
            .order_by(t.memory_facts.c.key)
        )
        return [f for f in (fact_from_row(r) for r in rows) if not f.expired(now)]
