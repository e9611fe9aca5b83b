"""Deletion inside the archive, cascading to everything derived.

Deleting a record, a session or everything of one owner removes, in one transaction:
the rows, originals no other record of the tenant references, summaries derived from
any deleted source, memory facts derived from one, the session's task states, and from every
version of any task state the confirmed facts citing a deleted source (they may repeat it);
and it queues outbox rows so the indexer removes index points and purges caches. It returns a
receipt that `verify_deleted` checks against the archive.

Deletion needs the admin role but no clearance: it reveals nothing and must be possible
for any record (a data-subject request).

No byte of deleted content stays in the archive database: besides the rows, the same
transaction empties every outbox row about a deleted target (payloads carry notes and
sources; pending re-reads of a deleted target are marked done, its pending deletes stay),
idempotency replies and audit details hold identifiers and hashes only, and after the
commit `ArchiveStore.reclaim` checkpoints SQLite's write-ahead log (the file itself is
zeroed by `secure_delete`) or VACUUMs the PostgreSQL tables. What stays by design: the
session tombstone, the receipt (ids and sha256s), the audit event naming the target.

A reader in another process holding a snapshot keeps that checkpoint from emptying the log:
the page images written before the deletion, deleted text among them, stay in the log file
(and the old pages in the database file). The receipt then says `erasure: pending_reader`, the
store owes the checkpoint and retries it (ArchiveStore.empty_log), and `verify_deleted` checks
the log itself, so it never says "nothing left" while the log may still hold the text.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, and_, delete, or_, select, tuple_, update

from .rules.checks import aware
from .rules.clock import utcnow
from .rules.errors import ArchiveError, InvalidInput, NotFound, StoreUnavailable
from .rules.in_force import expired_clause
from .rules.original_pages import page_count, page_ref
from .rules.principal import Principal, Role, Sensitivity, check_identifier
from .rules.records import DeletionReceipt, ErasureState
from .rules.refs import (
    MEMORY_KEY,
    check_evidence_id,
    evidence_ref,
    memory_ref,
    session_prefix,
    version_ref,
)
from .rules.task_state_rules import cited_refs, deleted_ref
from .rules.tool_results import result_id
from .storage import schema as t
from .storage.audit import append_event, event_hash
from .storage.blobs import delete_unreferenced
from .storage.idempotency import KeyedRequest, keyed, previous_reply, save_reply
from .storage.locks import lock_chain
from .storage.outbox import Entity, enqueue, holding, scrub
from .storage.receipts import check_receipt, sign_receipt
from .storage.store import ArchiveStore
from .task_state_cascade import Reopened, rewrite_session

log = logging.getLogger(__name__)

# The tables a deletion removes rows from or rewrites (what PostgreSQL must VACUUM after).
CONTENT_TABLES = (
    "blobs",
    "tool_results",
    "archive_entries",
    "evidence",
    "memory_facts",
    "summaries",
    "summary_sources",
    "task_states",
    "task_state_refs",
    "outbox",
    "sessions",
)


@dataclass
class _Removed:
    evidence_versions: list[tuple[str, int]] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)
    original_pages: list[str] = field(default_factory=list)  # outbox names of their pages
    sessions: list[str] = field(default_factory=list)
    memory_facts: list[tuple[str, str, int]] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    task_states: list[tuple[str, int]] = field(default_factory=list)
    reopened: list[Reopened] = field(default_factory=list)
    digests: set[str] = field(default_factory=set)
    source_refs: list[str] = field(default_factory=list)
    ref_prefixes: list[str] = field(default_factory=list)


def _outbox_targets(
    evidence_versions: Iterable[tuple[str, int]],
    tool_results: Iterable[str],
    memory_facts: Iterable[tuple[str, str, int]],
    summaries: Iterable[str],
    original_pages: Iterable[str] = (),
) -> list[tuple[Entity, str]]:
    """The (entity, entity_ref) of every outbox row that may be about these targets (pages of
    originals hold no content, only their name: a deletion marks them done, a check skips them)."""
    targets: list[tuple[Entity, str]] = [("evidence", version_ref(e, v)) for e, v in evidence_versions]
    targets += [("tool_result", ref) for ref in tool_results]
    targets += [("result_original", ref) for ref in original_pages]
    targets += [("memory", f"{o}/{k}@{v}") for o, k, v in memory_facts]
    targets += [("summary", s) for s in summaries]
    return targets


def _evidence(conn: Connection, tenant: str, evidence_id: str, out: _Removed) -> None:
    lock_chain(conn, "evidence", tenant, evidence_id)  # no new version slips in mid-delete
    rows = conn.execute(
        select(t.evidence.c.version, t.evidence.c.blob_sha256).where(
            t.evidence.c.tenant_id == tenant, t.evidence.c.evidence_id == evidence_id
        )
    ).all()
    for r in rows:
        out.evidence_versions.append((evidence_id, r.version))
        out.digests.add(r.blob_sha256)
    conn.execute(
        delete(t.evidence).where(t.evidence.c.tenant_id == tenant, t.evidence.c.evidence_id == evidence_id)
    )
    out.source_refs.append(evidence_ref(evidence_id))


def _session(conn: Connection, tenant: str, session_id: str, out: _Removed) -> None:
    # First the session row's lock: a writer holding it (a result, a task state) commits before
    # the rows below are read, and one that comes later finds the tombstone.
    conn.execute(
        select(t.sessions.c.session_id)
        .where(t.sessions.c.tenant_id == tenant, t.sessions.c.session_id == session_id)
        .with_for_update()
    ).first()
    where_session = (t.tool_results.c.tenant_id == tenant) & (t.tool_results.c.session_id == session_id)
    for r in conn.execute(
        select(t.tool_results.c.result_no, t.tool_results.c.blob_sha256, t.tool_results.c.size).where(
            where_session
        )
    ):
        ref = f"{session_id}/{result_id(r.result_no)}"
        out.tool_results.append(ref)
        out.original_pages += [page_ref(ref, page) for page in range(page_count(int(r.size)))]
        out.digests.add(r.blob_sha256)
    conn.execute(
        delete(t.archive_entries).where(
            t.archive_entries.c.tenant_id == tenant, t.archive_entries.c.session_id == session_id
        )
    )
    conn.execute(delete(t.tool_results).where(where_session))
    versions = conn.execute(
        select(t.task_states.c.version)
        .where(t.task_states.c.tenant_id == tenant, t.task_states.c.session_id == session_id)
        .order_by(t.task_states.c.version)
    ).scalars()
    out.task_states.extend((session_id, int(v)) for v in versions)
    conn.execute(
        delete(t.task_state_refs).where(
            t.task_state_refs.c.tenant_id == tenant, t.task_state_refs.c.session_id == session_id
        )
    )
    conn.execute(
        delete(t.task_states).where(
            t.task_states.c.tenant_id == tenant, t.task_states.c.session_id == session_id
        )
    )
    # A tombstone stays (see schema.sessions): the id and its result numbers are never reissued.
    conn.execute(
        update(t.sessions)
        .where(t.sessions.c.tenant_id == tenant, t.sessions.c.session_id == session_id)
        .values(deleted_at=utcnow(), owner="deleted")
    )
    # Evidence recorded from this session's tool results is the session's data too.
    for (evidence_id,) in conn.execute(
        select(t.evidence.c.evidence_id)
        .where(t.evidence.c.tenant_id == tenant, t.evidence.c.session_id == session_id)
        .distinct()
    ).all():
        _evidence(conn, tenant, evidence_id, out)
    out.sessions.append(session_id)
    out.ref_prefixes.append(session_prefix(session_id))


def _derived(conn: Connection, tenant: str, actor: str, out: _Removed) -> None:
    """Summaries, memory facts and task state facts derived from anything removed so far."""

    def matches(column: Column[str] | Column[str | None]) -> ColumnElement[bool] | None:
        conditions: list[ColumnElement[bool]] = [column.in_(out.source_refs)] if out.source_refs else []
        conditions += [column.startswith(p, autoescape=True) for p in out.ref_prefixes]
        return or_(*conditions) if conditions else None

    cond = matches(t.summary_sources.c.source_ref)
    if cond is not None:
        ids = sorted(
            {
                r.summary_id
                for r in conn.execute(
                    select(t.summary_sources.c.summary_id).where(
                        t.summary_sources.c.tenant_id == tenant, cond
                    )
                )
            }
        )
        if ids:
            conn.execute(
                delete(t.summary_sources).where(
                    t.summary_sources.c.tenant_id == tenant, t.summary_sources.c.summary_id.in_(ids)
                )
            )
            conn.execute(
                delete(t.summaries).where(
                    t.summaries.c.tenant_id == tenant, t.summaries.c.summary_id.in_(ids)
                )
            )
            out.summaries.extend(ids)
    cond = matches(t.memory_facts.c.derived_from)
    if cond is not None:
        _memory(conn, tenant, cond, out)
    _task_state_facts(conn, tenant, actor, out)


def _task_state_facts(conn: Connection, tenant: str, actor: str, out: _Removed) -> None:
    """Rewrite every task state version citing anything removed so far (memory facts included,
    any version of one) without the confirmed facts that cite it, and reopen what they settled up
    to the current version (task_state_cascade); the other fields stay as they were (the
    sensitivity too: at worst over-classified)."""
    refs = sorted(set(out.source_refs) | {memory_ref(o, k) for o, k, _ in out.memory_facts})
    conditions: list[ColumnElement[bool]] = [t.task_state_refs.c.ref.in_(refs)] if refs else []
    conditions += [t.task_state_refs.c.ref.startswith(p, autoescape=True) for p in out.ref_prefixes]
    if not conditions:
        return
    cited: dict[str, dict[int, set[str]]] = {}
    for r in conn.execute(
        select(t.task_state_refs.c.session_id, t.task_state_refs.c.version, t.task_state_refs.c.ref).where(
            t.task_state_refs.c.tenant_id == tenant, or_(*conditions)
        )
    ):
        cited.setdefault(r.session_id, {}).setdefault(int(r.version), set()).add(r.ref)
    now = utcnow()
    for session_id, gone in sorted(cited.items()):  # one order for every deletion: no deadlock
        reopened = rewrite_session(conn, tenant, session_id, gone, actor, now)
        if reopened is not None:
            out.reopened.append(reopened)
        out.task_states.extend((session_id, v) for v in sorted(gone))


def _memory(conn: Connection, tenant: str, condition: ColumnElement[bool], out: _Removed) -> None:
    rows = conn.execute(
        select(t.memory_facts.c.owner, t.memory_facts.c.key, t.memory_facts.c.version).where(
            t.memory_facts.c.tenant_id == tenant,
            condition,
        )
    ).all()
    keys = [(r.owner, r.key, r.version) for r in rows]
    if keys:
        conn.execute(
            delete(t.memory_facts).where(
                t.memory_facts.c.tenant_id == tenant,
                tuple_(t.memory_facts.c.owner, t.memory_facts.c.key, t.memory_facts.c.version).in_(keys),
            )
        )
        out.memory_facts.extend(keys)


def _finish(
    conn: Connection,
    store: ArchiveStore,
    principal: Principal,
    target: str,
    out: _Removed,
    request: KeyedRequest | None,
) -> DeletionReceipt:
    tenant = principal.tenant_id
    _derived(conn, tenant, principal.subject, out)
    blobs = delete_unreferenced(conn, tenant, out.digests)
    # Before this deletion's own rows are queued: they name ids only and must stay pending.
    scrub(
        conn,
        tenant,
        _outbox_targets(
            out.evidence_versions, out.tool_results, out.memory_facts, out.summaries, out.original_pages
        ),
    )
    outbox_ids: list[int] = []
    for evidence_id, version in out.evidence_versions:
        outbox_ids.append(
            enqueue(
                conn,
                tenant,
                "index_delete",
                "evidence",
                version_ref(evidence_id, version),
                {"evidence_id": evidence_id},
            )
        )
    for ref in out.tool_results:
        outbox_ids.append(enqueue(conn, tenant, "index_delete", "tool_result", ref, {}))
    for owner, key, version in out.memory_facts:
        outbox_ids.append(
            enqueue(conn, tenant, "index_delete", "memory", f"{owner}/{key}@{version}", {"owner": owner})
        )
    for summary_id in out.summaries:
        outbox_ids.append(enqueue(conn, tenant, "index_delete", "summary", summary_id, {}))
    outbox_ids.append(
        enqueue(
            conn,
            tenant,
            "cache_purge",
            "tenant",
            tenant,
            # drop_search: cached result pages (ids and hashes of what was found) go too,
            # not only become unreachable.
            {"reason": f"deleted {target}", "content_sha256": sorted(out.digests), "drop_search": True},
        )
    )
    counts = {
        "evidence_versions": len(out.evidence_versions),
        "tool_results": len(out.tool_results),
        "sessions": len(out.sessions),
        "memory_facts": len(out.memory_facts),
        "summaries": len(out.summaries),
        "task_states": len(out.task_states),
        "blobs": len(blobs),
    }
    seq = append_event(conn, tenant, principal.subject, "delete", target, counts)
    for r in out.reopened:
        # Its own event: the current task state changed (a new version), not only lost data.
        append_event(
            conn,
            tenant,
            principal.subject,
            "task_state_reopen",
            f"session:{r.session_id}",
            {"version": r.version, "superseded": r.superseded, "reopened": r.items, "deletion_seq": seq},
        )
    unsigned = DeletionReceipt(
        tenant_id=tenant,
        target=target,
        deleted_at=utcnow(),
        evidence_versions=tuple(out.evidence_versions),
        tool_results=tuple(out.tool_results),
        sessions=tuple(out.sessions),
        memory_facts=tuple(out.memory_facts),
        summaries=tuple(out.summaries),
        task_states=tuple(out.task_states),
        blobs=tuple(blobs),
        content_sha256=tuple(sorted(out.digests)),
        outbox_ids=tuple(outbox_ids),
        audit_seq=seq,
        counts=counts,
        audit_hash=event_hash(conn, tenant, seq) or "",
    )
    receipt = sign_receipt(store.receipt_key, unsigned)
    # The receipt holds identifiers and hashes only, never deleted content.
    save_reply(conn, request, asdict(receipt))
    return receipt


def delete_memory_versions(
    conn: Connection,
    store: ArchiveStore,
    principal: Principal,
    target: str,
    chains: Iterable[tuple[str, str]],
    condition: ColumnElement[bool],
    request: KeyedRequest | None = None,
) -> DeletionReceipt | None:
    """Delete the memory versions matching `condition` (within the `chains` it may touch)
    through the cascade, in the caller's write transaction: rows, outbox rows about them,
    index and cache work, an audit `delete` event on `target`, a signed receipt. None when
    nothing matched (then nothing is written or audited). The caller runs `erased` after its
    commit, as every deletion does."""
    for owner, key in sorted(set(chains)):  # one order for every writer: no deadlock
        lock_chain(conn, "memory", principal.tenant_id, owner, key)
    out = _Removed()
    _memory(conn, principal.tenant_id, condition, out)
    if not out.memory_facts:
        return None
    return _finish(conn, store, principal, target, out, request)


def replayed_receipt(reply: dict[str, Any]) -> DeletionReceipt:
    """The receipt a deletion first returned, from its stored reply."""
    return DeletionReceipt(
        tenant_id=reply["tenant_id"],
        target=reply["target"],
        deleted_at=datetime.fromisoformat(reply["deleted_at"]),
        evidence_versions=tuple((e, int(v)) for e, v in reply["evidence_versions"]),
        tool_results=tuple(reply["tool_results"]),
        sessions=tuple(reply["sessions"]),
        memory_facts=tuple((o, k, int(v)) for o, k, v in reply["memory_facts"]),
        summaries=tuple(reply["summaries"]),
        # Absent from the replies of deletions made before task states existed.
        task_states=tuple((s, int(v)) for s, v in reply.get("task_states", ())),
        blobs=tuple(reply["blobs"]),
        content_sha256=tuple(reply["content_sha256"]),
        outbox_ids=tuple(int(i) for i in reply["outbox_ids"]),
        audit_seq=int(reply["audit_seq"]),
        counts={k: int(v) for k, v in reply["counts"].items()},
        audit_hash=str(reply.get("audit_hash", "")),
        key_id=str(reply.get("key_id", "")),
        signature=str(reply.get("signature", "")),
    )


def delete_evidence(
    store: ArchiveStore, principal: Principal, evidence_id: str, *, idempotency_key: str | None = None
) -> DeletionReceipt:
    """Delete every version of an evidence record and what was derived from it.

    With an idempotency key (here and in the other deletions), repeating the same call returns
    the first receipt and deletes nothing more; reusing the key for another request raises
    IdempotencyMismatch. A call that fails (NotFound) leaves its key unused.
    """
    principal.require(Role.ADMIN, "deleting evidence")
    check_evidence_id(evidence_id)
    request = keyed(principal, idempotency_key, "delete_evidence", {"evidence_id": evidence_id})
    with store.write() as conn:
        previous = previous_reply(conn, request)
        if previous is not None:
            receipt = replayed_receipt(previous)
        else:
            out = _Removed()
            _evidence(conn, principal.tenant_id, evidence_id, out)
            if not out.evidence_versions:
                raise NotFound("evidence", evidence_id)
            receipt = _finish(conn, store, principal, f"evidence:{evidence_id}", out, request)
    return erased(store, receipt)


def delete_session(
    store: ArchiveStore, principal: Principal, session_id: str, *, idempotency_key: str | None = None
) -> DeletionReceipt:
    """Delete a session: its results, notes, originals, evidence recorded from it, and what
    was derived from any of them."""
    principal.require(Role.ADMIN, "deleting a session")
    check_identifier("session_id", session_id)
    request = keyed(principal, idempotency_key, "delete_session", {"session_id": session_id})
    with store.write() as conn:
        previous = previous_reply(conn, request)
        if previous is not None:
            receipt = replayed_receipt(previous)
        else:
            exists = conn.execute(
                select(t.sessions.c.session_id).where(
                    t.sessions.c.tenant_id == principal.tenant_id,
                    t.sessions.c.session_id == session_id,
                    t.sessions.c.deleted_at.is_(None),
                )
            ).first()
            if exists is None:
                raise NotFound("session", session_id)
            out = _Removed()
            _session(conn, principal.tenant_id, session_id, out)
            receipt = _finish(conn, store, principal, f"session:{session_id}", out, request)
    return erased(store, receipt)


def delete_owner(
    store: ArchiveStore, principal: Principal, owner: str, *, idempotency_key: str | None = None
) -> DeletionReceipt:
    """Delete everything of one owner: memory facts, owned evidence, owned sessions, and derivations.

    An owner with nothing stored yields an empty receipt (the request is still audited).
    """
    principal.require(Role.ADMIN, "deleting an owner's data")
    check_identifier("owner", owner)
    tenant = principal.tenant_id
    request = keyed(principal, idempotency_key, "delete_owner", {"owner": owner})
    with store.write() as conn:
        previous = previous_reply(conn, request)
        if previous is not None:
            receipt = replayed_receipt(previous)
        else:
            out = _Removed()
            _owner(conn, tenant, owner, out)
            receipt = _finish(conn, store, principal, f"owner:{owner}", out, request)
    return erased(store, receipt)


def _owner(conn: Connection, tenant: str, owner: str, out: _Removed) -> None:
    # Sessions, then evidence, then memory, each in id order: the order writers take these
    # locks in too (task_state._lock_cited), so a deletion and a writer never wait in a ring.
    for (session_id,) in conn.execute(
        select(t.sessions.c.session_id)
        .where(
            t.sessions.c.tenant_id == tenant,
            t.sessions.c.owner == owner,
            t.sessions.c.deleted_at.is_(None),
        )
        .order_by(t.sessions.c.session_id)
    ).all():
        _session(conn, tenant, session_id, out)
    for (evidence_id,) in conn.execute(
        select(t.evidence.c.evidence_id)
        .where(t.evidence.c.tenant_id == tenant, t.evidence.c.owner == owner)
        .distinct()
        .order_by(t.evidence.c.evidence_id)
    ).all():
        _evidence(conn, tenant, evidence_id, out)
    for (key,) in conn.execute(
        select(t.memory_facts.c.key)
        .where(t.memory_facts.c.tenant_id == tenant, t.memory_facts.c.owner == owner)
        .distinct()
        .order_by(t.memory_facts.c.key)
    ).all():
        lock_chain(conn, "memory", tenant, owner, key)  # as `forget` and `remember` do
    _memory(conn, tenant, t.memory_facts.c.owner == owner, out)


def reclaim(store: ArchiveStore) -> ErasureState:
    """After a deletion committed: make its rows unreadable below SQL (see ArchiveStore.reclaim).

    Best effort: the deletion stands either way, so a failure is logged and returned as the
    state, not raised. "pending_reader": a reader holds SQLite's log, and the store retries
    (ArchiveStore.empty_log); "pending": the store failed, and the next deletion (or, for
    PostgreSQL, the operator's step in docs/operations.md) catches up.
    """
    try:
        done = store.reclaim(CONTENT_TABLES)
    except StoreUnavailable as e:
        log.warning("space of deleted rows not reclaimed yet: %s", e)
        return "pending"
    if not done:
        log.warning(
            "write-ahead log not emptied after a deletion: a reader holds a snapshot of it; "
            "retried after each write, at close and by verify_deleted"
        )
        return "pending_reader"
    return "done"


def erased(store: ArchiveStore, receipt: DeletionReceipt) -> DeletionReceipt:
    """`receipt` (just committed, or replayed) with the erasure state `reclaim` leaves now."""
    return dataclasses.replace(receipt, erasure=reclaim(store))


@dataclass(frozen=True)
class DeletionFindings:
    """What `check_deleted` found: what the tables still hold of the deletion (`leftovers`), and
    whether the database files may still hold its bytes (`erasure`, with `erasure_detail`
    saying where): "done", or "pending_reader" while SQLite's write-ahead log could not be
    emptied."""

    leftovers: tuple[str, ...]
    erasure: ErasureState = "done"
    erasure_detail: str = ""

    @property
    def all(self) -> list[str]:
        """Every finding as one list, the log's among them: empty means nothing is left."""
        return [*self.leftovers, *([self.erasure_detail] if self.erasure != "done" else [])]


def verify_deleted(store: ArchiveStore, principal: Principal, receipt: DeletionReceipt) -> list[str]:
    """What of a receipt the archive still holds, its files included: an empty list means
    everything is gone (`check_deleted`, as one list)."""
    return check_deleted(store, principal, receipt).all


def check_deleted(store: ArchiveStore, principal: Principal, receipt: DeletionReceipt) -> DeletionFindings:
    """What of a receipt the archive still holds: the raw tables, then the files.

    The receipt first (ReceiptInvalid unless this deployment issued it), then every table for
    rows of the deleted targets, then, on SQLite, the write-ahead log: a TRUNCATE checkpoint
    (which completes one a reader held off, once it let go), and if the log still holds bytes
    afterwards, its raw file is read for the page images it keeps. A receipt holds no content
    to search the bytes for, so a log that could not be emptied is a finding in itself: any of
    its page images may be one written before the deletion. (The database file is zeroed where
    rows were deleted, `secure_delete`; PostgreSQL's files are not looked at, see docs/operations.md.)
    """
    left = _table_leftovers(store, principal, receipt)
    # After the read transaction closed: a checkpoint waits for this process's readers too.
    if store.empty_log():
        return DeletionFindings(tuple(left))
    path = store.log_path
    name = path.name if path is not None else "the write-ahead log"
    detail = (
        f"pending_reader: {name} holds {store.log_frames()} page images ({store.log_bytes()} bytes) "
        "a checkpoint could not copy and empty, some perhaps from before the deletion: another "
        "connection holds a snapshot of the log; once it ends its transaction, the next write, "
        "closing the archive or verify_deleted empties it"
    )
    return DeletionFindings(tuple(left), "pending_reader", detail)


def _table_leftovers(store: ArchiveStore, principal: Principal, receipt: DeletionReceipt) -> list[str]:
    principal.require(Role.ADMIN, "verifying a deletion")
    tenant = principal.tenant_id
    if receipt.tenant_id != tenant:
        # Checked against this tenant's rows, another tenant's receipt would always look "done".
        raise NotFound("deletion", receipt.target)
    left: list[str] = []
    with store.read() as conn:
        # First, that this deployment issued the receipt: a forged one (say, an id that never
        # existed) would otherwise "verify" by finding nothing of what it names.
        check_receipt(conn, store.receipt_key, receipt)
        for evidence_id, version in receipt.evidence_versions:
            if conn.execute(
                select(t.evidence.c.version).where(
                    t.evidence.c.tenant_id == tenant,
                    t.evidence.c.evidence_id == evidence_id,
                    t.evidence.c.version == version,
                )
            ).first():
                left.append(f"evidence {evidence_id}@{version}")
        for session_id in receipt.sessions:
            if conn.execute(
                select(t.tool_results.c.result_no).where(
                    t.tool_results.c.tenant_id == tenant, t.tool_results.c.session_id == session_id
                )
            ).first():
                left.append(f"results of session {session_id}")
        for owner, key, version in receipt.memory_facts:
            if conn.execute(
                select(t.memory_facts.c.version).where(
                    t.memory_facts.c.tenant_id == tenant,
                    t.memory_facts.c.owner == owner,
                    t.memory_facts.c.key == key,
                    t.memory_facts.c.version == version,
                )
            ).first():
                left.append(f"memory {owner}/{key}@{version}")
        if (
            receipt.summaries
            and conn.execute(
                select(t.summaries.c.summary_id).where(
                    t.summaries.c.tenant_id == tenant, t.summaries.c.summary_id.in_(receipt.summaries)
                )
            ).first()
        ):
            left.append("summaries")
        if (
            receipt.blobs
            and conn.execute(
                select(t.blobs.c.sha256).where(
                    t.blobs.c.tenant_id == tenant,
                    t.blobs.c.sha256.in_(receipt.blobs),
                )
            ).first()
        ):
            left.append("originals (blobs)")
        left += _raw_leftovers(conn, tenant, receipt)
    return left


def _raw_leftovers(conn: Connection, tenant: str, receipt: DeletionReceipt) -> list[str]:
    """What of the deleted targets any raw table still holds, beyond the rows checked above:
    notes, evidence recorded from a deleted session, originals nothing references any more,
    derivations, outbox rows with a payload or error, a session that is not a bare tombstone."""
    left: list[str] = []
    sessions = list(receipt.sessions)
    if sessions:
        if conn.execute(
            select(t.archive_entries.c.result_no).where(
                t.archive_entries.c.tenant_id == tenant, t.archive_entries.c.session_id.in_(sessions)
            )
        ).first():
            left.append("archive notes of a deleted session")
        if conn.execute(
            select(t.evidence.c.evidence_id).where(
                t.evidence.c.tenant_id == tenant, t.evidence.c.session_id.in_(sessions)
            )
        ).first():
            left.append("evidence recorded from a deleted session")
        for r in conn.execute(
            select(t.sessions.c.session_id).where(
                t.sessions.c.tenant_id == tenant,
                t.sessions.c.session_id.in_(sessions),
                or_(t.sessions.c.deleted_at.is_(None), t.sessions.c.owner != "deleted"),
            )
        ):
            left.append(f"session {r.session_id} is not a tombstone")
    for digest in sorted(set(receipt.content_sha256) - set(receipt.blobs)):
        # Kept at deletion time because another record shared it: that record's while it lives,
        # a leftover once nothing references it.
        referenced = conn.execute(
            select(t.tool_results.c.result_no)
            .where(t.tool_results.c.tenant_id == tenant, t.tool_results.c.blob_sha256 == digest)
            .union_all(
                select(t.evidence.c.version).where(
                    t.evidence.c.tenant_id == tenant, t.evidence.c.blob_sha256 == digest
                )
            )
            .limit(1)
        ).first()
        if (
            referenced is None
            and conn.execute(
                select(t.blobs.c.sha256).where(t.blobs.c.tenant_id == tenant, t.blobs.c.sha256 == digest)
            ).first()
        ):
            left.append(f"original {digest} (nothing references it)")
    refs = [evidence_ref(e) for e in sorted({e for e, _ in receipt.evidence_versions})]
    prefixes = [session_prefix(s) for s in sessions]

    def derived(column: Column[str] | Column[str | None]) -> ColumnElement[bool] | None:
        conditions: list[ColumnElement[bool]] = [column.in_(refs)] if refs else []
        conditions += [column.startswith(p, autoescape=True) for p in prefixes]
        return or_(*conditions) if conditions else None

    cond = derived(t.summary_sources.c.source_ref)
    if (
        cond is not None
        and conn.execute(
            select(t.summary_sources.c.summary_id).where(t.summary_sources.c.tenant_id == tenant, cond)
        ).first()
    ):
        left.append("summaries derived from a deleted source")
    cond = derived(t.memory_facts.c.derived_from)
    if (
        cond is not None
        and conn.execute(
            select(t.memory_facts.c.key).where(t.memory_facts.c.tenant_id == tenant, cond)
        ).first()
    ):
        left.append("memory facts derived from a deleted source")
    if (
        receipt.summaries
        and conn.execute(
            select(t.summary_sources.c.summary_id).where(
                t.summary_sources.c.tenant_id == tenant, t.summary_sources.c.summary_id.in_(receipt.summaries)
            )
        ).first()
    ):
        left.append("sources of a deleted summary")
    left += _task_state_leftovers(conn, tenant, receipt, refs)
    targets = _outbox_targets(
        receipt.evidence_versions, receipt.tool_results, receipt.memory_facts, receipt.summaries
    )
    left += [f"{row} still holds content" for row in holding(conn, tenant, targets, receipt.deleted_at)]
    return left


def _task_state_leftovers(
    conn: Connection, tenant: str, receipt: DeletionReceipt, evidence_refs: list[str]
) -> list[str]:
    """Task state rows of a deleted session, citations (ref rows) of a deleted source, and any
    task state body of the tenant still citing one."""
    left: list[str] = []
    sessions = list(receipt.sessions)
    refs = sorted(set(evidence_refs) | {memory_ref(o, k) for o, k, _ in receipt.memory_facts})
    if (
        sessions
        and conn.execute(
            select(t.task_states.c.version).where(
                t.task_states.c.tenant_id == tenant, t.task_states.c.session_id.in_(sessions)
            )
        ).first()
    ):
        left.append("task states of a deleted session")
    conditions: list[ColumnElement[bool]] = [t.task_state_refs.c.ref.in_(refs)] if refs else []
    conditions += [t.task_state_refs.c.ref.startswith(session_prefix(s), autoescape=True) for s in sessions]
    if conditions:
        for r in conn.execute(
            select(t.task_state_refs.c.session_id, t.task_state_refs.c.version, t.task_state_refs.c.ref)
            .where(t.task_state_refs.c.tenant_id == tenant, or_(*conditions))
            .order_by(t.task_state_refs.c.session_id, t.task_state_refs.c.version)
        ):
            left.append(f"task state {r.session_id}@{r.version} cites deleted {r.ref}")
    if not (refs or sessions):
        return left
    # Every body of the tenant, not only the versions the receipt names: a body whose ref rows
    # were lost (or written by hand) is found by what it cites.
    for row in conn.execute(
        select(t.task_states.c.session_id, t.task_states.c.version, t.task_states.c.body_json)
        .where(t.task_states.c.tenant_id == tenant)
        .order_by(t.task_states.c.session_id, t.task_states.c.version)
    ):
        if any(deleted_ref(ref, refs, sessions) for ref in cited_refs(row.body_json)):
            left.append(f"task state {row.session_id}@{row.version} still holds a fact citing deleted data")
    return left


# Who the worker's scheduled purge acts as in each tenant's audit log.
# ---- forgetting memory: the TTL purge and forget ------------------------------------------------

PURGE_SUBJECT = "system:ttl-purge"


def purge_expired(
    store: ArchiveStore, principal: Principal, *, now: datetime | None = None
) -> DeletionReceipt | None:
    """Delete every version of the tenant's memory whose expiry has passed (by `now`, default the
    time of the call), current or superseded: a TTL says the value is to be forgotten. Versions
    without an expiry stay, superseded or not. Returns the receipt, or None when nothing had
    expired (then nothing is written, not even an audit event). Admin only, like a deletion."""
    principal.require(Role.ADMIN, "purging expired memory")
    when = aware("now", now) or utcnow()
    tenant = principal.tenant_id
    lapsed = expired_clause(t.memory_facts.c.expires_at, when)
    with store.write() as conn:
        chains = [
            (r.owner, r.key)
            for r in conn.execute(
                select(t.memory_facts.c.owner, t.memory_facts.c.key)
                .where(t.memory_facts.c.tenant_id == tenant, lapsed)
                .distinct()
            )
        ]
        if not chains:
            return None
        # The condition is evaluated again after the chain locks: a version written meanwhile
        # is judged by its own expiry.
        receipt = delete_memory_versions(conn, store, principal, "memory:expired", chains, lapsed)
    return None if receipt is None else erased(store, receipt)


def purge_expired_everywhere(store: ArchiveStore, *, now: datetime | None = None) -> list[DeletionReceipt]:
    """The scheduled purge: `purge_expired` in every tenant that holds an expired version, each
    in its own transaction and audited in that tenant as PURGE_SUBJECT. A tenant whose purge
    fails (other than an outage, raised at once) is logged and skipped so the others are purged;
    then the first such error is raised for the caller to report."""
    when = aware("now", now) or utcnow()
    with store.read() as conn:
        tenants = sorted(
            r.tenant_id
            for r in conn.execute(
                select(t.memory_facts.c.tenant_id)
                .where(expired_clause(t.memory_facts.c.expires_at, when))
                .distinct()
            )
        )
    receipts: list[DeletionReceipt] = []
    failed: list[tuple[str, ArchiveError]] = []
    for tenant in tenants:
        system = Principal(tenant, PURGE_SUBJECT, frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)
        try:
            receipt = purge_expired(store, system, now=when)
        except StoreUnavailable:
            raise  # an outage: every tenant would fail alike; the caller waits it out
        except ArchiveError as e:  # this tenant's problem (say, a broken audit chain): the rest go on
            log.error("TTL purge of tenant %s failed: %s", tenant, e.message)
            failed.append((tenant, e))
            continue
        if receipt is not None:
            receipts.append(receipt)
    if failed:
        # After the others were purged; the caller logs and counts it and retries next time.
        raise failed[0][1]
    return receipts


def forget(
    store: ArchiveStore, principal: Principal, owner: str, key: str, *, idempotency_key: str | None = None
) -> DeletionReceipt:
    """Delete every version of the owner's fact for `key` (a user asking to be forgotten on one
    point), like a deletion: rows, index points, cached searches, an audit event, a receipt.

    Whoever may remember the fact may forget it: the owner themselves, agents and admins.
    NotFound when the fact has no version. With an idempotency key a retry returns the first
    receipt and deletes nothing more.
    """
    principal.require(Role.READER, "forgetting a memory fact")
    check_identifier("owner", owner)
    principal.require_owner(owner, "forgetting a memory fact")
    if not isinstance(key, str) or not MEMORY_KEY.fullmatch(key):
        raise InvalidInput("key", f"{key!r} is not a memory key (letters, digits, . _ : / -; max 100)")
    request = keyed(principal, idempotency_key, "forget", {"owner": owner, "key": key})
    with store.write() as conn:
        previous = previous_reply(conn, request)
        condition = and_(t.memory_facts.c.owner == owner, t.memory_facts.c.key == key)
        receipt = (
            replayed_receipt(previous)
            if previous is not None
            else delete_memory_versions(
                conn, store, principal, memory_ref(owner, key), [(owner, key)], condition, request
            )
        )
        if receipt is None:
            raise NotFound("memory fact", f"{owner}/{key}")
    return erased(store, receipt)  # after the commit: a checkpoint waits for writers
