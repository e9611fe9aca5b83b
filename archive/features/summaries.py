"""Summaries: derived views that name what they came from.

A summary is never evidence: it is labelled derived wherever it is shown, it keeps a
`trace_ref` to the raw trace, and deleting any of its sources deletes it (it may repeat
what was deleted).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Connection, select

from ..rules import limits
from ..rules.clock import utcnow
from ..rules.errors import Forbidden, InvalidInput, NotFound
from ..rules.policy import check_list_limit, check_offset
from ..rules.principal import Principal, Role, Sensitivity
from ..rules.records import Summary
from ..rules.refs import SUMMARY_PREFIX, SourceRef
from ..storage import schema as t
from ..storage.idempotency import keyed, previous_reply, save_reply
from ..storage.outbox import enqueue
from ..storage.rows import summary_from_row
from ..storage.sources import source_owner, source_sensitivity
from ..storage.store import ArchiveStore

TEXT_LIMIT = limits.SUMMARY_CHARS


def create_summary(
    store: ArchiveStore,
    principal: Principal,
    text: str,
    derived_from: Sequence[str | SourceRef],
    *,
    trace_ref: str | None = None,
    idempotency_key: str | None = None,
) -> Summary:
    """Store a summary of existing sources. Its sensitivity is the highest of its sources'.

    NotFound names a source that does not exist; Forbidden one above the caller's clearance.
    With an idempotency key, repeating the same call returns the first summary (NotFound if it
    was deleted since) and stores nothing; reusing the key for another request raises
    IdempotencyMismatch.
    """
    principal.require(Role.AGENT, "writing a summary")
    if not isinstance(text, str) or not text.strip() or len(text) > TEXT_LIMIT or "\x00" in text:
        raise InvalidInput("text", f"must be non-empty text of at most {TEXT_LIMIT} characters, without NUL")
    if isinstance(derived_from, str) or not derived_from:
        raise InvalidInput("derived_from", "must list at least one source ref")
    refs = sorted({str(SourceRef.parse(r)) for r in derived_from})
    if trace_ref is not None and (not isinstance(trace_ref, str) or len(trace_ref) > limits.TRACE_REF_CHARS):
        raise InvalidInput("trace_ref", f"must be a string of at most {limits.TRACE_REF_CHARS} characters")
    tenant = principal.tenant_id
    request = keyed(
        principal,
        idempotency_key,
        "create_summary",
        {"text": text, "derived_from": refs, "trace_ref": trace_ref},
    )
    summary_id = f"{SUMMARY_PREFIX}{uuid.uuid4().hex}"
    now = utcnow()
    with store.write() as conn:
        previous = previous_reply(conn, request)
        if previous is not None:
            found = _load(conn, tenant, previous["summary_id"])
            if found is None:
                raise NotFound("summary", previous["summary_id"])
            principal.require_clearance(found.sensitivity, f"reading {found.summary_id}")
            return found
        levels: list[Sensitivity] = []
        for ref in refs:
            level = source_sensitivity(conn, tenant, SourceRef.parse(ref))
            if level is None:
                raise NotFound("source", ref)
            principal.require_clearance(level, f"summarising {ref}")
            levels.append(level)
        sensitivity = max(levels)
        conn.execute(
            t.summaries.insert().values(
                tenant_id=tenant,
                summary_id=summary_id,
                text=text,
                trace_ref=trace_ref,
                created_at=now,
                created_by=principal.subject,
                sensitivity=int(sensitivity),
            )
        )
        conn.execute(
            t.summary_sources.insert(),
            [{"tenant_id": tenant, "summary_id": summary_id, "source_ref": r} for r in refs],
        )
        enqueue(conn, tenant, "index_upsert", "summary", summary_id, {"derived_from": refs})
        enqueue(conn, tenant, "cache_purge", "tenant", tenant, {"reason": "summary added"})
        save_reply(conn, request, {"summary_id": summary_id})
    return Summary(summary_id, text, tuple(refs), trace_ref, now, sensitivity)


def get_summary(store: ArchiveStore, principal: Principal, summary_id: str) -> Summary:
    principal.require(Role.READER, "reading a summary")
    if not isinstance(summary_id, str) or len(summary_id) > 64:
        raise InvalidInput("summary_id", "is not a summary id")
    with store.read() as conn:
        summary = _load(conn, principal.tenant_id, summary_id)
        owner = None if summary is None else source_owner(conn, principal.tenant_id, summary.derived_from)
    if summary is None:
        raise NotFound("summary", summary_id)
    principal.require_clearance(summary.sensitivity, f"reading {summary_id}")
    # A summary repeats its sources: a reader sees it only when they are about that reader.
    if owner is not None and not principal.may_act_for(owner):
        raise Forbidden(f"reading {summary_id}: it summarises another owner's data", owner=owner)
    return summary


def _load(conn: Connection, tenant: str, summary_id: str) -> Summary | None:
    row = conn.execute(
        select(t.summaries).where(t.summaries.c.tenant_id == tenant, t.summaries.c.summary_id == summary_id)
    ).first()
    if row is None:
        return None
    # Sorted here, not by the database: its collation may order refs unlike `create_summary` did.
    refs = sorted(
        r.source_ref
        for r in conn.execute(
            select(t.summary_sources.c.source_ref).where(
                t.summary_sources.c.tenant_id == tenant, t.summary_sources.c.summary_id == summary_id
            )
        )
    )
    return summary_from_row(row, refs)


def list_summaries(
    store: ArchiveStore, principal: Principal, *, limit: int = 1000, offset: int = 0
) -> list[Summary]:
    """The summaries this principal may read (as `get_summary` decides), oldest first; at most
    `limit` (1 to 10,000) after the first `offset` of those. Whether a summary is about an owner
    the principal may not act for is known only from its sources, so the ones skipped are read
    too: a later page costs the reading of the ones before it."""
    principal.require(Role.READER, "listing summaries")
    check_list_limit(limit)
    check_offset(offset)
    tenant = principal.tenant_id
    out: list[Summary] = []
    skipped = 0
    with store.read() as conn:
        ids = conn.execute(
            select(t.summaries.c.summary_id)
            .where(t.summaries.c.tenant_id == tenant, t.summaries.c.sensitivity <= int(principal.clearance))
            .order_by(t.summaries.c.created_at, t.summaries.c.summary_id)
        ).scalars()
        for summary_id in list(ids):
            summary = _load(conn, tenant, summary_id)
            if summary is None:
                continue
            owner = source_owner(conn, tenant, summary.derived_from)
            if owner is not None and not principal.may_act_for(owner):
                continue
            if skipped < offset:
                skipped += 1
                continue
            out.append(summary)
            if len(out) == limit:
                break
    return out
