"""Domain types the archive returns. Frozen: a value read from the archive never changes.

(`ToolResult` and its ids live in tool_results: the envelopes render them, and records renders
through the envelopes.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast, get_args

from . import in_force
from .errors import InvalidInput
from .json_types import IsoTime, StrictInt
from .principal import Sensitivity
from .tool_results import ToolResult, render_live


@dataclass(frozen=True)
class ArchiveReceipt:
    session_id: str
    batch_id: str
    archived: tuple[str, ...]
    # True when this answer replays an earlier call with the same idempotency key.
    replayed: bool = False


@dataclass(frozen=True)
class LiveItem:
    result: ToolResult
    rendered: str
    # A later result of the same call (tool and arguments) that replaced this one, if any.
    superseded_by: str | None = None


@dataclass(frozen=True)
class LiveView:
    """A session's working context in order: live envelopes and in-place archive stubs."""

    session_id: str
    items: tuple[LiveItem, ...]

    @property
    def text(self) -> str:
        return "\n".join(item.rendered for item in self.items)


@dataclass(frozen=True)
class Recovered:
    """An exact original, appended to the session as a new result labelled historical."""

    original: ToolResult
    appended: ToolResult
    content: bytes
    staleness_warning: str | None

    @property
    def rendered(self) -> str:
        """The appended result in its envelope, labelled historical (rendered on demand:
        escaping a multi-MB original costs more than recovering it)."""
        return render_live(self.appended, self.content, self.staleness_warning)

    @property
    def text(self) -> str | None:
        """The original as text when it is valid UTF-8; None for binary originals."""
        try:
            return self.content.decode("utf-8")
        except UnicodeDecodeError:
            return None


Provenance = Literal["document", "user_claim", "user_correction", "tool_fact", "model_inference"]
PROVENANCES: tuple[str, ...] = get_args(Provenance)
# Which memory write may replace which (see memory.remember): a write never supersedes a current
# fact of a higher rank. What the user corrected outranks what they once said, which outranks
# what a document or a tool said, which outranks a model's guess.
PROVENANCE_RANK: dict[str, int] = {
    "user_correction": 3,
    "user_claim": 2,
    "document": 1,
    "tool_fact": 1,
    "model_inference": 0,
}
EvidenceKind = Literal["knowledge", "tool_result", "memory", "summary"]
EVIDENCE_KINDS: tuple[str, ...] = get_args(EvidenceKind)
# What a search finds: evidence of those kinds, and pages of archived originals, which only
# agents may read (archive/rules/original_pages.py).
ORIGINAL_KIND = "archived_original"
SearchKind = Literal[EvidenceKind, "archived_original"]
SEARCH_KINDS: tuple[str, ...] = get_args(SearchKind)  # the index's own list (retrieval/fields.py)


def parse_provenance(value: str, field: str = "provenance") -> Provenance:
    """`value` as a Provenance; InvalidInput naming `field` and the choices otherwise."""
    for known in PROVENANCES:  # not get_args: it walks the Literal again on every call
        if value == known:
            return cast(Provenance, known)
    raise InvalidInput(field, f"{value!r} is not one of {', '.join(PROVENANCES)}")


EvidenceStatus = Literal["active", "superseded", "retracted"]


@dataclass(frozen=True)
class EvidenceRecord:
    """One version of an evidence record. The body is the original; `statement` a short claim."""

    evidence_id: str
    version: int
    kind: str
    source: str
    scope: str
    locator: str
    statement: str | None
    media_type: str
    content_sha256: str
    observed_at: datetime
    valid_from: datetime | None
    valid_until: datetime | None
    sensitivity: Sensitivity
    provenance: str
    owner: str | None
    session_id: str | None
    status: EvidenceStatus
    recorded_at: datetime
    ended_at: datetime | None
    # The JSON object the caller kept with this version (EvidenceInput.metadata), None when it
    # gave none: a new dict on every read. Left out of the hash (a dict has none); equality
    # compares it.
    metadata: dict[str, Any] | None = field(default=None, hash=False)

    def valid_at(self, when: datetime) -> bool:
        return in_force.valid_at(self.valid_from, self.valid_until, when)


# `expired` is the status of an active version past its TTL, as read at the time of the read; the
# purge (deletion.purge_expired) removes such versions from the archive altogether.
# A fact has no sensitivity of its own: it counts as internal wherever a level is needed (its
# index entry, search hydration, task states citing it), so public clearance never finds it.
MEMORY_SENSITIVITY = Sensitivity.INTERNAL

MemoryStatus = Literal["active", "superseded", "expired"]


@dataclass(frozen=True)
class MemoryFact:
    owner: str
    key: str
    value: str
    version: int
    provenance: str
    status: MemoryStatus
    created_at: datetime
    expires_at: datetime | None
    derived_from: str | None

    def expired(self, now: datetime) -> bool:
        return in_force.expired(self.expires_at, now)


@dataclass(frozen=True)
class RememberOutcome:
    """What `remember` did: persisted a new version, or returned an unpersisted candidate."""

    fact: MemoryFact
    persisted: bool
    reason: str


@dataclass(frozen=True)
class Summary:
    """A derived view. Always shown labelled as derived, with the refs it came from."""

    summary_id: str
    text: str
    derived_from: tuple[str, ...]
    trace_ref: str | None
    created_at: datetime
    sensitivity: Sensitivity
    label: str = "derived summary (not original evidence)"


@dataclass(frozen=True)
class ConfirmedFact:
    """One fact a task state holds as settled, with the evidence it rests on.

    `evidence_id` is as the writer cited it: an evidence record id `X`, a version `X@3`,
    `result:<session>/<rN>` or `memory:<owner>/<key>`. `version` is the evidence record version
    it resolved to when first written (evidence records only; None for results and memory): a
    fact carried over unchanged keeps it, so a reader can tell a fact resting on a version that
    was superseded since. `resolves` names the open item of the previous version it settles.
    """

    fact: str
    evidence_id: str
    version: int | None
    resolves: str | None = None
    # What the citation resolved to, normalised: `evidence:<record id>`, `result:<session>/<rN>`
    # or `memory:<owner>/<key>` (set by the archive; an id may itself contain `@`, so this, not
    # `evidence_id`, says which record a versioned citation names).
    ref: str | None = None


@dataclass(frozen=True)
class ReleasedItem:
    """An item of the previous version a task state let go of on purpose, and why."""

    item: str
    kind: str  # constraint | unresolved | pending_operation | confirmed
    reason: str


@dataclass(frozen=True)
class TaskState:
    """One version of a session's task state: what the agent is doing, what it knows (with
    evidence), what is still open, what it must not do. Derived, never evidence: a new version
    supersedes the previous one, which stays readable."""

    session_id: str
    version: int  # 1, 2, ... per session
    goal: str
    confirmed: tuple[ConfirmedFact, ...]
    unresolved: tuple[str, ...]
    constraints: tuple[str, ...]
    pending_operations: tuple[str, ...]
    trace_ref: str | None
    released: tuple[ReleasedItem, ...]  # what this version released from the previous one
    status: str  # current | superseded
    created_at: datetime
    created_by: str
    sensitivity: Sensitivity
    label: str = "derived task state (not original evidence)"


# How far a deletion's bytes had left the database files when its call returned (see
# deletion.reclaim): "done"; "pending_reader" while another connection holds SQLite's write-ahead
# log, so the page images written before the deletion are still in it (the checkpoint is owed and
# retried: ArchiveStore.empty_log); "pending" when the step failed (the store unreachable).
ErasureState = Literal["done", "pending_reader", "pending"]


@dataclass(frozen=True)
class DeletionReceipt:
    """What a deletion removed from the archive, and the outbox rows it queued for index and caches.

    Signed by the deployment key (`key_id`, `signature`: HMAC-SHA256 over every other field but
    `erasure`) and
    tied to the audit chain: `audit_seq` and `audit_hash` name the deletion's own audit event,
    which was the chain's head when the deletion committed. `verify_deleted` rejects a receipt
    whose signature or audit event does not check out (ReceiptInvalid).
    """

    tenant_id: str
    target: str
    # Strict where a receipt is parsed back (REST, the CLI): `"5"` is not a version (json_types).
    deleted_at: IsoTime
    evidence_versions: tuple[tuple[str, StrictInt], ...] = ()
    tool_results: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()
    memory_facts: tuple[tuple[str, str, StrictInt], ...] = ()
    summaries: tuple[str, ...] = ()
    # (session_id, version) of every task state version deleted, or rewritten without the
    # confirmed facts that cited a deleted source. Left out of the signed payload when empty,
    # so receipts issued before the field existed still verify (see receipts.receipt_payload).
    task_states: tuple[tuple[str, StrictInt], ...] = ()
    blobs: tuple[str, ...] = ()
    content_sha256: tuple[str, ...] = ()
    outbox_ids: tuple[StrictInt, ...] = ()
    audit_seq: StrictInt = 0
    counts: dict[str, StrictInt] = field(default_factory=dict)
    audit_hash: str = ""
    key_id: str = ""
    signature: str = ""
    # The files' state when the call returned, not part of what the receipt proves: never signed
    # (a state that changes later, and receipts issued before it existed, verify alike).
    # `verify_deleted` looks again each time.
    erasure: ErasureState = "done"
