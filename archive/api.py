"""`Archive`: the archive layer as one object, the entry point for library users.

Each method is a thin wrapper over one module function (sessions, evidence, memory,
summaries, task state, deletion, audit); this class adds only the cross-cutting rule that every
denied access and every failed integrity check is written to the tenant's audit chain. A write
with a record in operations.py takes that record's fields as its keyword parameters (same names,
types and defaults) and hands the module function the record built from them (`of_call`), or
checks them against the record's size caps (`check_caps`, which `of_call` runs too) before
anything else: a value over its cap is InvalidInput naming the field and the limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import text

from . import deletion, hits
from .features import api_keys, evidence, memory, sessions, summaries, task_state
from .features.api_keys import ApiKeyInfo
from .internal_reads import InternalReads
from .rules.checks import aware
from .rules.errors import (
    ArchiveError,
    BatchRejected,
    Forbidden,
    IntegrityFailure,
    InvalidInput,
    ReceiptKeyMissing,
    TargetStatus,
    TaskStateRejected,
)
from .rules.excerpts import DEFAULT_AROUND
from .rules.operations import (
    ArchiveResultsOp,
    ArchiveTarget,
    Clearance,
    CreateSummaryOp,
    DeleteEvidenceOp,
    DeleteOwnerOp,
    EvidenceInput,
    ForgetOp,
    ProvenanceName,
    RecordOp,
    RecoverOp,
    RememberOp,
    RetractOp,
    TextOrBytes,
    UpdateTaskStateOp,
    check_caps,
)
from .rules.policy import DEFAULT_POLICY, ArchivePolicy
from .rules.principal import Principal, Role, Sensitivity
from .rules.records import (
    ArchiveReceipt,
    ConfirmedFact,
    DeletionReceipt,
    EvidenceRecord,
    LiveView,
    MemoryFact,
    Recovered,
    ReleasedItem,
    RememberOutcome,
    Summary,
    TaskState,
)
from .rules.refs import memory_ref
from .rules.tool_results import ToolResult
from .storage import deployment_key, outbox
from .storage.audit import (
    TARGET_LIMIT,
    AuditAnchor,
    AuditEvent,
    AuditQuery,
    AuditReport,
    append_event,
    check_anchor,
    find_events,
    list_events,
    make_anchor,
    verify_chain,
)
from .storage.outbox import OutboxBacklog
from .storage.receipts import receipt_anchor
from .storage.signing import ReceiptKey
from .storage.store import ArchiveStore, key_file_of, open_store, sqlite_file_of
from .storage.verified_keys import VerifiedKeys

T = TypeVar("T")
SQLITE_HEADER = b"SQLite format 3\x00"  # the first bytes of every SQLite database file


def _is_sqlite_database(path: Path) -> bool:
    # An existing archive, as opposed to a directory or a file that is no database (open_store
    # reports those as StoreUnavailable / StoreCorrupt, which is the truer error for them).
    try:
        with path.open("rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _remove_new_archive(database: Path, side_files: list[Path], key_file: Path) -> None:
    # Only after this call created the key (so the database did not exist before it either):
    # the half-made archive goes with its key, and the folder is as it was.
    for path in (database, *side_files, key_file):
        path.unlink(missing_ok=True)


class Archive:
    """The Session Evidence Archive plus evidence, memory, summaries, deletion and audit."""

    def __init__(self, store: ArchiveStore) -> None:
        self.store = store

    @classmethod
    def open(
        cls,
        url: str,
        policy: ArchivePolicy = DEFAULT_POLICY,
        *,
        receipt_key: ReceiptKey | None = None,
        allow_missing_key: bool = False,
    ) -> Archive:
        """Open a SQLite file (a path or sqlite URL) or a PostgreSQL URL, migrating it.

        `receipt_key` signs deletion receipts and audit anchors; without it a SQLite archive
        uses the key file beside it and any other database a key of this process only (see
        `open_store`). A SQLite file that does not exist yet is a new archive: its key file is
        created first, then the database, then the creation is audited (deployment_key.py); if
        any of that fails, the files this call created are removed, so the next open starts
        the folder afresh instead of finding an archive without its key.
        An existing SQLite file whose key file is gone raises ReceiptKeyMissing before the
        database is opened (nothing migrated, nothing written), unless `allow_missing_key`:
        only the rotation that replaces the lost key opens it so. Raises StoreUnavailable
        when the new key cannot be written (nothing is created then).
        """
        database = sqlite_file_of(url) if receipt_key is None else None
        key_file = key_file_of(url) if database is not None else None
        if database is not None and key_file is not None and database.exists():
            if _is_sqlite_database(database) and not key_file.exists() and not allow_missing_key:
                raise ReceiptKeyMissing(str(key_file))
            return cls(open_store(url, policy))
        if database is None or key_file is None:
            return cls(open_store(url, policy, receipt_key=receipt_key))
        # A new archive. Which of its files were there before this call: only the others are
        # removed if the first open fails (SQLite creates the file, and maybe its -wal and -shm,
        # before the migration that may fail).
        side_files = [database.with_name(database.name + suffix) for suffix in ("-wal", "-shm")]
        existed = {path for path in side_files if path.exists()}
        created = deployment_key.create_key_file(key_file)
        try:
            store = open_store(url, policy)
        except BaseException:
            if created is not None:
                _remove_new_archive(database, [p for p in side_files if p not in existed], key_file)
            raise
        if created is not None:
            try:
                deployment_key.record_created(store, created, key_file)
            except BaseException:
                store.dispose()
                _remove_new_archive(database, [p for p in side_files if p not in existed], key_file)
                raise
        return cls(store)

    @property
    def policy(self) -> ArchivePolicy:
        return self.store.policy

    def close(self) -> None:
        self.store.dispose()

    # ---- doors for the service around the archive: health, the outbox, keys -------------------
    # What a surface needs of the store is asked here, never by reaching into `store` (the system,
    # which wires the store into the indexer, is the one exception; a contract keeps surfaces out
    # of `archive.storage`).

    @property
    def receipt_key_id(self) -> str:
        """The id of the key that signs this archive's receipts and anchors."""
        return self.store.receipt_key.key_id

    def ping(self) -> None:
        """Reach the database with the cheapest statement. StoreUnavailable when it is down."""
        with self.store.read() as conn:
            conn.execute(text("SELECT 1"))

    def outbox_backlog(self) -> OutboxBacklog:
        """The outbox's rows not yet applied to the index and caches, the oldest one's time, and
        the rows applied but not yet flushed (for metrics; never on behalf of a principal)."""
        with self.store.read() as conn:
            count, oldest = outbox.backlog(conn)
            return OutboxBacklog(count, oldest, outbox.awaiting_flush_count(conn))

    def pending_outbox_ids(self, tenant_id: str | None = None) -> set[int]:
        """The ids of the outbox rows still to apply (of one tenant when given)."""
        with self.store.read() as conn:
            return outbox.pending_ids(conn, tenant_id)

    @contextmanager
    def internal_reads(self) -> Iterator[InternalReads]:
        """Reads for the system's own components (the indexer, fsck) in one read transaction,
        never on behalf of a principal: see internal_reads.py."""
        with self.store.read() as conn:
            yield InternalReads(conn)

    def create_key(
        self,
        *,
        tenant_id: str,
        subject: str,
        roles: Iterable[Role | str],
        clearance: Sensitivity | str | int = Sensitivity.INTERNAL,
        name: str = "",
    ) -> tuple[str, ApiKeyInfo]:
        """A new API key for this principal, by the operator: the key (shown once) and what is
        stored (see api_keys.create_key)."""
        return api_keys.create_key(
            self.store, tenant_id=tenant_id, subject=subject, roles=roles, clearance=clearance, name=name
        )

    def list_keys(self, tenant_id: str | None = None) -> list[ApiKeyInfo]:
        """Every key (of one tenant when given), oldest first, revoked ones included."""
        return api_keys.list_keys(self.store, tenant_id)

    def revoke_key(self, key_id: str) -> ApiKeyInfo:
        """Revoke a key at once, by the operator (see api_keys.revoke_key)."""
        return api_keys.revoke_key(self.store, key_id)

    def authenticate(self, presented: str, *, cache: VerifiedKeys | None = None) -> Principal:
        """The principal an API key maps to; Unauthenticated otherwise (see api_keys.authenticate)."""
        return api_keys.authenticate(self.store, presented, cache=cache)

    def _guard(self, principal: Principal, action: str, target: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except Forbidden as e:
            self._audit(principal, "denied", target, {"action": action, "reason": e.message})
            raise
        except BatchRejected as e:
            # The batch wrote nothing, but a target above the caller's clearance is still a
            # denied access, and every denied access is audited.
            denied = [x.result_id for x in e.targets if x.status == "forbidden"]
            if denied:
                self._audit(principal, "denied", target, {"action": action, "results": denied})
            raise
        except TaskStateRejected as e:
            # Likewise: citing evidence above the caller's clearance is a denied access.
            fields = [p["field"] for p in e.problems if p["problem"] == "evidence_forbidden"]
            if fields:
                self._audit(principal, "denied", target, {"action": action, "fields": fields})
            raise
        except ReceiptKeyMissing:
            # The deployment's key is gone, not this tenant's data: nothing of theirs was
            # checked or changed, so their chain gets no event (the error says so).
            raise
        except IntegrityFailure as e:
            self._audit(principal, "integrity_failure", target, {"action": action, **e.detail})
            raise

    def _audit(self, principal: Principal, action: str, target: str, detail: dict[str, Any]) -> None:
        # Best effort in its own transaction: the caller's error is what matters to them,
        # and an unavailable store must not replace it with another error.
        try:
            with self.store.write() as conn:
                append_event(conn, principal.tenant_id, principal.subject, action, target, detail)
        except ArchiveError:
            pass

    # ---- sessions ----------------------------------------------------------------------------

    def record(
        self,
        principal: Principal,
        session_id: str,
        tool_name: str,
        content: TextOrBytes,
        *,
        arguments: Mapping[str, Any] | None = None,
        media_type: str | None = None,
        observed_at: datetime | None = None,
        sensitivity: Clearance = Sensitivity.INTERNAL,
        policy_class: str = "default",
        owner: str | None = None,
        idempotency_key: str | None = None,
    ) -> ToolResult:
        """`RecordOp`: record a tool result in a session (created by its first result); it gets
        the next id, r1, r2, ... (see `sessions.record`)."""
        op = RecordOp.of_call(locals())
        return self._guard(
            principal,
            "record",
            f"session:{session_id}",
            lambda: sessions.record(self.store, principal, session_id, op, idempotency_key=idempotency_key),
        )

    def archive_results(
        self,
        principal: Principal,
        session_id: str,
        targets: Iterable[ArchiveTarget | Mapping[str, Any] | tuple[str, str]],
        *,
        idempotency_key: str | None = None,
    ) -> ArchiveReceipt:
        """`ArchiveResultsOp`: archive a batch all or nothing (see `sessions.archive`). Each target
        is an ArchiveTarget, a mapping {result_id, note} or a (result_id, note) pair."""
        op = ArchiveResultsOp.of_call(locals())
        return self._guard(
            principal,
            "archive",
            f"session:{session_id}",
            lambda: sessions.archive(self.store, principal, session_id, op, idempotency_key=idempotency_key),
        )

    def live_view(self, principal: Principal, session_id: str) -> LiveView:
        """`LiveViewOp`: the session's working context, live results in envelopes and archived
        ones as in-place stubs (see `sessions.live_view`)."""
        return self._guard(
            principal,
            "live_view",
            f"session:{session_id}",
            lambda: sessions.live_view(self.store, principal, session_id),
        )

    def list_results(
        self, principal: Principal, session_id: str, *, offset: int = 0, limit: int | None = None
    ) -> list[ToolResult]:
        """The session's results in order (metadata and notes, no content): all of them, or the
        page of at most `limit` after `offset` (see `sessions.list_results`)."""
        return self._guard(
            principal,
            "list_results",
            f"session:{session_id}",
            lambda: sessions.list_results(self.store, principal, session_id, offset=offset, limit=limit),
        )

    def list_results_with_content(
        self, principal: Principal, session_id: str, *, offset: int = 0, limit: int | None = None
    ) -> list[tuple[ToolResult, bytes | None]]:
        """The page `list_results` gives, each live result the principal may read with what it
        shows (hash-verified), others with None, in one read (see
        `sessions.list_results_with_content`)."""
        return self._guard(
            principal,
            "list_results_with_content",
            f"session:{session_id}",
            lambda: sessions.list_results_with_content(
                self.store, principal, session_id, offset=offset, limit=limit
            ),
        )

    def session_info(self, principal: Principal, session_id: str) -> sessions.SessionInfo:
        """One session with its result counts, as `list_sessions` lists it."""
        return self._guard(
            principal,
            "session_info",
            f"session:{session_id}",
            lambda: sessions.session_info(self.store, principal, session_id),
        )

    def list_sessions(
        self, principal: Principal, *, limit: int = 1000, offset: int = 0
    ) -> list[sessions.SessionInfo]:
        return self._guard(
            principal,
            "list_sessions",
            "sessions",
            lambda: sessions.list_sessions(self.store, principal, limit=limit, offset=offset),
        )

    def recover(
        self,
        principal: Principal,
        session_id: str,
        result_id: str,
        *,
        lines: tuple[int, int] | None = None,
        byte_range: tuple[int, int] | None = None,
        match: str | None = None,
        around: int = DEFAULT_AROUND,
        idempotency_key: str | None = None,
    ) -> Recovered:
        """`RecoverOp`: an archived result's exact original, or the excerpt a span names (lines,
        a byte range, or the lines around a match), hash-verified against the whole original and
        appended to the session labelled historical, with a staleness warning for time-sensitive
        data. InvalidSpan, naming the original's size, for a span it cannot satisfy."""
        check_caps(RecoverOp, locals())
        return self._guard(
            principal,
            "recover",
            f"session:{session_id}/{result_id}",
            lambda: sessions.recover(
                self.store,
                principal,
                session_id,
                result_id,
                lines=lines,
                byte_range=byte_range,
                match=match,
                around=around,
                idempotency_key=idempotency_key,
            ),
        )

    def get_result(
        self, principal: Principal, session_id: str, result_id: str, *, with_content: bool = False
    ) -> tuple[ToolResult, bytes | None]:
        return self._guard(
            principal,
            "get_result",
            f"session:{session_id}/{result_id}",
            lambda: sessions.get_result(
                self.store, principal, session_id, result_id, with_content=with_content
            ),
        )

    def read_result(
        self, principal: Principal, session_id: str, result_id: str
    ) -> tuple[ToolResult, datetime | None, bytes | None]:
        return self._guard(
            principal,
            "read_result",
            f"session:{session_id}/{result_id}",
            lambda: sessions.read_result(self.store, principal, session_id, result_id),
        )

    # ---- search hits -------------------------------------------------------------------------

    def read_hits(
        self, principal: Principal, pointers: Sequence[hits.PointsToHit], as_of: datetime | None = None
    ) -> list[hits.HydratedHit | None]:
        """The text of each hit an index answered, as `principal` may read it at `as_of` (None:
        now), in order; None where the caller may not read it or it is no longer current.
        Batched: a constant number of statements however many hits (see archive/hits.py). An
        original failing its hash is dropped and audited (`integrity_failure`), as a direct read
        of it would be."""
        corrupt: list[tuple[str, IntegrityFailure]] = []
        found = self._guard(
            principal,
            "read_hits",
            "search",
            lambda: hits.read_hits(self.store, principal, pointers, as_of, corrupt),
        )
        for target, error in corrupt:
            self._audit(principal, "integrity_failure", target, {"action": "read_hits", **error.detail})
        return found

    def pending_originals(self, principal: Principal) -> int:
        """How many archived originals the caller may read have pages not yet indexed (their
        text is not yet searchable; their notes are): see archive/hits.py."""
        return self._guard(
            principal, "pending_originals", "search", lambda: hits.pending_originals(self.store, principal)
        )

    # ---- evidence ----------------------------------------------------------------------------

    def put_evidence(
        self, principal: Principal, item: EvidenceInput, *, idempotency_key: str | None = None
    ) -> EvidenceRecord:
        return self._guard(
            principal,
            "put_evidence",
            f"evidence:{item.evidence_id}",
            lambda: evidence.put_evidence(self.store, principal, item, idempotency_key=idempotency_key),
        )

    def write_evidence_batch(
        self,
        principal: Principal,
        items: Sequence[EvidenceInput],
        *,
        idempotency_key: str | None = None,
        reactivate: bool = False,
    ) -> evidence.EvidenceBatch:
        """Store a batch of evidence all or nothing (each item as `put_evidence` would), handing
        back the records and every version the committed write made, with its original
        (`EvidenceBatch.made`): the indexer of this process applies those without
        reading them back. Content of a retracted version is refused (RetractedContent) unless
        `reactivate`."""
        return self._guard(
            principal,
            "put_evidence",
            f"evidence:batch of {len(items)}",
            lambda: evidence.put_evidence_batch(
                self.store, principal, items, idempotency_key=idempotency_key, reactivate=reactivate
            ),
        )

    def retracted_among(self, principal: Principal, items: Sequence[EvidenceInput]) -> list[TargetStatus]:
        """Each item's status: `retracted` where a write would refuse its content as retracted,
        else `ok` (`evidence.retracted_among`)."""
        return evidence.retracted_among(self.store, principal, items)

    def retract(
        self, principal: Principal, evidence_id: str, reason: str, *, idempotency_key: str | None = None
    ) -> EvidenceRecord:
        """`RetractOp`: withdraw the current version of a record (it stays in history);
        StateConflict when it has no active version."""
        check_caps(RetractOp, locals())
        return self._guard(
            principal,
            "retract",
            f"evidence:{evidence_id}",
            lambda: evidence.retract(
                self.store, principal, evidence_id, reason, idempotency_key=idempotency_key
            ),
        )

    def get_evidence(
        self,
        principal: Principal,
        evidence_id: str,
        *,
        version: int | None = None,
        as_of: datetime | None = None,
        with_content: bool = False,
    ) -> tuple[EvidenceRecord, bytes | None]:
        return self._guard(
            principal,
            "get_evidence",
            f"evidence:{evidence_id}",
            lambda: evidence.get_evidence(
                self.store, principal, evidence_id, version=version, as_of=as_of, with_content=with_content
            ),
        )

    def evidence_history(self, principal: Principal, evidence_id: str) -> list[EvidenceRecord]:
        return self._guard(
            principal,
            "evidence_history",
            f"evidence:{evidence_id}",
            lambda: evidence.evidence_history(self.store, principal, evidence_id),
        )

    def list_evidence(
        self, principal: Principal, *, prefix: str | None = None, limit: int = 1000, offset: int = 0
    ) -> list[evidence.EvidenceInfo]:
        """The tenant's evidence records by id (those starting with `prefix`, when given), each
        with its newest version, as far as the principal may read them (see `evidence.list_evidence`)."""
        return self._guard(
            principal,
            "list_evidence",
            "evidence",
            lambda: evidence.list_evidence(self.store, principal, prefix=prefix, limit=limit, offset=offset),
        )

    # ---- memory ------------------------------------------------------------------------------

    def remember(
        self,
        principal: Principal,
        owner: str,
        key: str,
        value: str,
        provenance: ProvenanceName,
        *,
        ttl_seconds: float | None = None,
        derived_from: str | None = None,
        idempotency_key: str | None = None,
    ) -> RememberOutcome:
        """`RememberOp`: store a fact for an owner, superseding the key's previous value (see
        `memory.remember`). A model inference never overrides what the user confirmed: it comes
        back as an unpersisted candidate. `derived_from` is a source ref, e.g.
        `str(SourceRef.evidence(id))`."""
        op = RememberOp.of_call(locals())
        return self._guard(
            principal,
            "remember",
            memory_ref(owner, key),
            lambda: memory.remember(self.store, principal, op, idempotency_key=idempotency_key),
        )

    def current(
        self, principal: Principal, owner: str, key: str, *, at: datetime | None = None
    ) -> MemoryFact | None:
        """The owner's current, unexpired value for `key` (at `at`, default now); None if none."""
        return self._guard(
            principal,
            "memory_current",
            memory_ref(owner, key),
            lambda: memory.current(self.store, principal, owner, key, at=at),
        )

    def memory_history(self, principal: Principal, owner: str, key: str) -> list[MemoryFact]:
        """Every version of the fact, oldest first, superseded ones included."""
        return self._guard(
            principal,
            "memory_history",
            memory_ref(owner, key),
            lambda: memory.history(self.store, principal, owner, key),
        )

    def facts(
        self, principal: Principal, owner: str, *, offset: int = 0, limit: int | None = None
    ) -> list[MemoryFact]:
        """The owner's current unexpired facts by key: all, or the page of at most `limit`
        after `offset` (see `memory.facts`)."""
        return self._guard(
            principal,
            "memory_facts",
            f"memory:{owner}",
            lambda: memory.facts(self.store, principal, owner, offset=offset, limit=limit),
        )

    def list_memory_owners(
        self, principal: Principal, *, prefix: str | None = None, limit: int = 1000, offset: int = 0
    ) -> list[memory.MemoryOwner]:
        """The owners the tenant keeps memory about (those starting with `prefix`, when given), by
        name, with their counts of facts (a user: itself only; see `memory.list_owners`)."""
        return self._guard(
            principal,
            "list_memory_owners",
            "memory",
            lambda: memory.list_owners(self.store, principal, prefix=prefix, limit=limit, offset=offset),
        )

    def forget(
        self, principal: Principal, owner: str, key: str, *, idempotency_key: str | None = None
    ) -> DeletionReceipt:
        """`ForgetOp`: delete every version of one fact with its index points and cached searches
        (audited; the receipt is checked by `verify_deleted`)."""
        check_caps(ForgetOp, locals())
        return self._guard(
            principal,
            "forget",
            memory_ref(owner, key),
            lambda: deletion.forget(self.store, principal, owner, key, idempotency_key=idempotency_key),
        )

    def purge_expired(self, principal: Principal, *, now: datetime | None = None) -> DeletionReceipt | None:
        return self._guard(
            principal,
            "purge_expired",
            "memory:expired",
            lambda: deletion.purge_expired(self.store, principal, now=now),
        )

    def purge_expired_everywhere(self, *, now: datetime | None = None) -> list[DeletionReceipt]:
        """The scheduled TTL purge over every tenant (the deployment's housekeeping: no caller
        principal; each tenant's purge is audited in that tenant as memory.PURGE_SUBJECT)."""
        return deletion.purge_expired_everywhere(self.store, now=now)

    # ---- summaries ---------------------------------------------------------------------------

    def create_summary(
        self,
        principal: Principal,
        text: str,
        derived_from: Sequence[str],
        *,
        trace_ref: str | None = None,
        idempotency_key: str | None = None,
    ) -> Summary:
        """`CreateSummaryOp`: a derived summary of existing sources, searchable and labelled
        derived wherever shown; its sensitivity is the highest of its sources'."""
        check_caps(CreateSummaryOp, locals())
        return self._guard(
            principal,
            "create_summary",
            "summary",
            lambda: summaries.create_summary(
                self.store,
                principal,
                text,
                derived_from,
                trace_ref=trace_ref,
                idempotency_key=idempotency_key,
            ),
        )

    def list_summaries(self, principal: Principal, *, limit: int = 1000, offset: int = 0) -> list[Summary]:
        """The summaries the principal may read, oldest first, at most `limit` after `offset`."""
        return self._guard(
            principal,
            "list_summaries",
            "summary",
            lambda: summaries.list_summaries(self.store, principal, limit=limit, offset=offset),
        )

    def get_summary(self, principal: Principal, summary_id: str) -> Summary:
        return self._guard(
            principal,
            "get_summary",
            f"summary:{summary_id}",
            lambda: summaries.get_summary(self.store, principal, summary_id),
        )

    # ---- task state --------------------------------------------------------------------------

    def update_task_state(
        self,
        principal: Principal,
        session_id: str,
        *,
        goal: str,
        confirmed: Sequence[ConfirmedFact | Mapping[str, Any]] = (),
        unresolved: Sequence[str] = (),
        constraints: Sequence[str] = (),
        pending_operations: Sequence[str] = (),
        trace_ref: str | None = None,
        release: Sequence[ReleasedItem | Mapping[str, Any]] = (),
        expected_version: int | None = None,
        owner: str | None = None,
        idempotency_key: str | None = None,
    ) -> TaskState:
        """`UpdateTaskStateOp`: write the next version of a session's task state, validated whole
        against the current one (see `task_state.update_task_state`): every confirmed fact cites
        evidence, no constraint or open item goes without a release reason or a fact that settles
        it. TaskStateRejected lists every problem; nothing is stored then. `confirmed` items are
        {fact, evidence_id, resolves?} or ConfirmedFact; `release` items {item, reason} or
        ReleasedItem."""
        op = UpdateTaskStateOp.of_call(locals())
        return self._guard(
            principal,
            "update_task_state",
            f"task_state:{session_id}",
            lambda: task_state.update_task_state(
                self.store, principal, session_id, op, idempotency_key=idempotency_key
            ),
        )

    def task_state(
        self, principal: Principal, session_id: str, *, version: int | None = None
    ) -> TaskState | None:
        """`TaskStateOp`: the session's current task state (or one version); None when it has none yet."""
        return self._guard(
            principal,
            "task_state",
            f"task_state:{session_id}",
            lambda: task_state.task_state(self.store, principal, session_id, version=version),
        )

    def task_state_history(self, principal: Principal, session_id: str) -> list[TaskState]:
        """Every version of the session's task state the caller's clearance allows, oldest first."""
        return self._guard(
            principal,
            "task_state_history",
            f"task_state:{session_id}",
            lambda: task_state.task_state_history(self.store, principal, session_id),
        )

    # ---- deletion and audit ------------------------------------------------------------------

    def delete_evidence(
        self, principal: Principal, evidence_id: str, *, idempotency_key: str | None = None
    ) -> DeletionReceipt:
        """`DeleteEvidenceOp`: delete every version of a record and everything derived from it (admin)."""
        check_caps(DeleteEvidenceOp, locals())
        return self._guard(
            principal,
            "delete",
            f"evidence:{evidence_id}",
            lambda: deletion.delete_evidence(
                self.store, principal, evidence_id, idempotency_key=idempotency_key
            ),
        )

    def delete_session(
        self, principal: Principal, session_id: str, *, idempotency_key: str | None = None
    ) -> DeletionReceipt:
        """`DeleteSessionOp`: delete a session, its results, notes and everything derived from them
        (admin)."""
        return self._guard(
            principal,
            "delete",
            f"session:{session_id}",
            lambda: deletion.delete_session(
                self.store, principal, session_id, idempotency_key=idempotency_key
            ),
        )

    def delete_owner(
        self, principal: Principal, owner: str, *, idempotency_key: str | None = None
    ) -> DeletionReceipt:
        """`DeleteOwnerOp`: delete everything about one person, a data-subject request (admin)."""
        check_caps(DeleteOwnerOp, locals())
        return self._guard(
            principal,
            "delete",
            f"owner:{owner}",
            lambda: deletion.delete_owner(self.store, principal, owner, idempotency_key=idempotency_key),
        )

    def verify_deleted(self, principal: Principal, receipt: DeletionReceipt) -> list[str]:
        """What of the deletion the archive still holds, in its tables or (SQLite) its write-ahead
        log; empty when nothing is left (see `check_deleted`)."""
        return self.check_deleted(principal, receipt).all

    def check_deleted(self, principal: Principal, receipt: DeletionReceipt) -> deletion.DeletionFindings:
        """`verify_deleted`, with the leftovers in the tables apart from the erasure state of the
        files ("pending_reader" while another connection holds SQLite's write-ahead log)."""
        return self._guard(
            principal,
            "verify_deleted",
            receipt.target,
            lambda: deletion.check_deleted(self.store, principal, receipt),
        )

    def verify_audit(
        self, principal: Principal, anchors: Sequence[AuditAnchor | DeletionReceipt] = ()
    ) -> AuditReport:
        """Check the principal's tenant chain (admin only): any edited or removed event is reported.

        Given anchors (exported with `audit_anchor`, or deletion receipts, which carry the head
        of their time), it also reports a chain rewound or rewritten under any of them. An anchor
        this deployment did not sign for this tenant raises ReceiptInvalid.
        """

        def run() -> AuditReport:
            principal.require(Role.ADMIN, "verifying the audit chain")
            tenant = principal.tenant_id
            checked: list[AuditAnchor] = []
            for anchor in anchors:
                if isinstance(anchor, DeletionReceipt):
                    checked.append(receipt_anchor(self.store.receipt_key, anchor, tenant))
                else:
                    check_anchor(self.store.receipt_key, anchor, tenant)
                    checked.append(anchor)
            with self.store.read() as conn:
                return verify_chain(conn, tenant, tuple(checked))

        return self._guard(principal, "verify_audit", "audit", run)

    def audit_anchor(self, principal: Principal) -> AuditAnchor:
        """The tenant chain's head, signed with the deployment key (admin only). Keep it outside
        the database: `verify_audit` given it detects a chain rewound or rewritten under it.
        Raises IntegrityFailure when the chain is already broken (nothing to vouch for)."""

        def run() -> AuditAnchor:
            principal.require(Role.ADMIN, "anchoring the audit chain")
            with self.store.read() as conn:
                return make_anchor(conn, self.store.receipt_key, principal.tenant_id)

        return self._guard(principal, "audit_anchor", "audit", run)

    def audit_events(self, principal: Principal, *, after_seq: int = 0, limit: int = 100) -> list[AuditEvent]:
        def run() -> list[AuditEvent]:
            principal.require(Role.ADMIN, "reading the audit chain")
            with self.store.read() as conn:
                return list_events(
                    conn, principal.tenant_id, after_seq=after_seq, limit=min(max(limit, 1), 1000)
                )

        return self._guard(principal, "audit_events", "audit", run)

    def find_audit_events(
        self,
        principal: Principal,
        *,
        action: str | None = None,
        actor: str | None = None,
        target: str | None = None,
        target_contains: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before_seq: int | None = None,
        limit: int = 100,
    ) -> list[AuditEvent]:
        """The tenant's audit events of one `action` (kind), by one `actor` (subject), on one
        `target` or a target containing `target_contains` (letter case ignored), at `since` or
        later and before `until`: each given filter narrows, in SQL (admin only). Newest first,
        at most `limit` (1-1000) before `before_seq`: pass the last seq read for the next page."""
        query = _audit_query(action, actor, target, target_contains, since, until)
        if before_seq is not None and not _is_seq(before_seq):
            raise InvalidInput("before_seq", f"must be a positive integer, got {before_seq!r}")

        def run() -> list[AuditEvent]:
            principal.require(Role.ADMIN, "reading the audit chain")
            with self.store.read() as conn:
                return find_events(
                    conn, principal.tenant_id, query, before_seq=before_seq, limit=min(max(limit, 1), 1000)
                )

        return self._guard(principal, "audit_events", "audit", run)


# The widths of the audit columns a filter names (schema.audit_events): a longer value matches no
# event, so it is refused as the mistake it is.
_AUDIT_FILTER_CHARS = {"action": 64, "actor": 128, "target": TARGET_LIMIT, "target_contains": TARGET_LIMIT}


def _is_seq(value: object) -> bool:
    """A sequence number a chain may hold: 1 up to the largest integer SQL stores."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 2**63 - 1


def _audit_query(
    action: str | None,
    actor: str | None,
    target: str | None,
    target_contains: str | None,
    since: datetime | None,
    until: datetime | None,
) -> AuditQuery:
    """The filters of `find_audit_events`, checked before anything is read."""
    texts = {"action": action, "actor": actor, "target": target, "target_contains": target_contains}
    for field, value in texts.items():
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise InvalidInput(field, "must be a non-empty text (or None: no filter)")
        if len(value) > _AUDIT_FILTER_CHARS[field]:
            raise InvalidInput(field, f"is longer than {_AUDIT_FILTER_CHARS[field]} characters")
    return AuditQuery(action, actor, target, target_contains, aware("since", since), aware("until", until))
