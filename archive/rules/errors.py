"""Typed errors of the archive layer.

Every error carries structured detail so that a caller (the REST layer, the CLI, an agent)
can say what was wrong without parsing a message, and its category (mnemo_sea.errors.Category),
from which mnemo_sea.system.outcomes gives the answer of every surface (HTTP status, exit code,
MCP error); nothing here knows about HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mnemo_sea.errors import Category, MnemoError


class ArchiveError(MnemoError):
    """Base of every error the archive raises on purpose: a MnemoError (message, detail,
    `_restore`, `to_dict`, `request_id` are the base's). Raised as itself it is an internal
    error: no more specific category is known."""

    code = "archive_error"
    category = Category.INTERNAL


class InvalidInput(ArchiveError):
    """A value the caller passed is malformed (bad id, empty note, NUL in a name, ...)."""

    code = "invalid_input"
    category = Category.INVALID_INPUT
    field: str
    problem: str

    def __init__(self, field: str, problem: str, **detail: Any) -> None:
        super().__init__(f"{field}: {problem}", field=field, problem=problem, **detail)

    def _restore(self) -> None:
        self.field = self.detail.get("field", "")
        self.problem = self.detail.get("problem", "")


class JsonTooDeep(InvalidInput):
    """User JSON nests arrays and objects deeper than `limit` levels (a whole document:
    mnemo_sea.system.json_text; a field: limits.JsonCap);
    nothing was done with it. `field` names where it came from (a file, a line, an option)."""

    code = "json_too_deep"
    limit: int

    def __init__(self, where: str, limit: int) -> None:
        super().__init__(
            where,
            f"JSON nested deeper than {limit} levels of arrays and objects; flatten it",
            limit=limit,
        )

    def _restore(self) -> None:
        super()._restore()
        self.limit = int(self.detail.get("limit", 0))


class InvalidBatch(InvalidInput):
    """Items of a batch are invalid; nothing was stored. `problems` names each item and why."""

    code = "invalid_batch"

    def __init__(self, problems: Sequence[dict[str, Any]]) -> None:
        shown = "; ".join(f"item {p['index']}: {p.get('field', '')}: {p['problem']}" for p in problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        super().__init__(
            "items", f"{len(problems)} invalid, nothing was stored: {shown}{more}", problems=list(problems)
        )

    def _restore(self) -> None:
        super()._restore()
        self.problems: list[dict[str, Any]] = list(self.detail.get("problems", ()))


class TaskStateRejected(InvalidInput):
    """A task state update was refused whole; nothing was stored. `problems` lists every problem
    found, each with the `field` (`confirmed[2].evidence_id`, `constraints`, ...), the `item` it
    is about, a `problem` code and a `message` saying how to fix the call."""

    code = "task_state_rejected"

    def __init__(self, problems: Sequence[dict[str, Any]]) -> None:
        shown = "; ".join(f"{p['field']}: {p['problem']}" for p in problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        super().__init__(
            "task_state",
            f"{len(problems)} problem(s), nothing was stored: {shown}{more}",
            problems=list(problems),
        )

    def _restore(self) -> None:
        super()._restore()
        self.problems: list[dict[str, Any]] = list(self.detail.get("problems", ()))


class InvalidSpan(InvalidInput):
    """A span of an excerpt recovery that the original cannot satisfy: outside it, inverted,
    empty, splitting a character, or naming a text it does not hold. `field` names the span
    (lines, byte_range, match); `lines` and `size` (bytes) the original's size, so the caller
    can ask again within it. Nothing was appended. (A malformed span, two spans at once or an
    `around` out of range is a plain InvalidInput, refused before anything is read.)"""

    code = "invalid_span"
    result_id: str
    lines: int
    size: int  # bytes

    def __init__(self, span: str, problem: str, result_id: str, lines: int, size: int) -> None:
        super().__init__(
            span,
            f"{problem}; {result_id} has {lines} lines ({size} bytes)",
            result_id=result_id,
            lines=lines,
            bytes=size,
        )

    def _restore(self) -> None:
        super()._restore()
        self.result_id = self.detail.get("result_id", "")
        self.lines = self.detail.get("lines", 0)
        self.size = self.detail.get("bytes", 0)


class ContentTooLarge(InvalidInput):
    """Content exceeds the configured size limit; nothing was stored."""

    code = "content_too_large"
    # An InvalidInput, but a size over the limit: 413, not 422.
    category = Category.TOO_LARGE
    size: int
    limit: int

    def __init__(self, field: str, size: int, limit: int) -> None:
        super().__init__(field, f"{size} bytes exceeds the limit of {limit} bytes", size=size, limit=limit)

    def _restore(self) -> None:
        super()._restore()
        self.size = self.detail.get("size", 0)
        self.limit = self.detail.get("limit", 0)


class NotFound(ArchiveError):
    """The thing does not exist *for this principal*.

    Records of another tenant raise exactly this error with the same message, so the
    answer is never an oracle for what other tenants hold.
    """

    code = "not_found"
    category = Category.NOT_FOUND

    def __init__(self, what: str, ref: str) -> None:
        super().__init__(f"{what} {ref!r} not found", what=what, ref=ref)


class Forbidden(ArchiveError):
    """The principal may not do this: a missing role or insufficient clearance."""

    code = "forbidden"
    category = Category.FORBIDDEN

    def __init__(self, reason: str, **detail: Any) -> None:
        super().__init__(reason, **detail)


class StateConflict(ArchiveError):
    """The target exists but is in a state that forbids the operation (already archived, ...)."""

    code = "state_conflict"
    category = Category.CONFLICT


class MemoryConflict(StateConflict):
    """A memory write would supersede a current fact of a higher-ranked provenance (a user's
    correction, say); nothing was stored. The detail names the current fact, never its value."""

    code = "memory_conflict"

    def __init__(self, owner: str, key: str, provenance: str, current_version: int, current: str) -> None:
        super().__init__(
            f"memory {owner}/{key}: a {provenance} does not supersede the current {current} "
            f"(version {current_version}); nothing was stored. Store it as a {current} (or higher) "
            "if the user confirms the new value, or forget the fact first",
            owner=owner,
            key=key,
            provenance=provenance,
            current_version=current_version,
            current_provenance=current,
        )


class IdempotencyMismatch(StateConflict):
    """An idempotency key was reused for a different request."""

    code = "idempotency_mismatch"

    def __init__(self, key: str) -> None:
        super().__init__(
            f"idempotency key {key!r} was already used for a different request; use a new key",
            idempotency_key=key,
        )


@dataclass(frozen=True)
class TargetStatus:
    """Why one target of a batch is (or is not) acceptable."""

    result_id: str
    # ok | unknown | malformed | duplicate | already_archived | empty_note | note_too_long | protected
    status: str
    message: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class BatchRejected(ArchiveError):
    """A batch was rejected whole: nothing changed. `targets` says why for each item."""

    code = "batch_rejected"
    category = Category.INVALID_INPUT

    def __init__(self, targets: Sequence[TargetStatus], hint: str) -> None:
        bad = [t for t in targets if not t.ok]
        summary = "; ".join(f"{t.result_id}: {t.status}" for t in bad)
        super().__init__(
            f"batch rejected, nothing was archived ({summary}). {hint}",
            targets=[t.__dict__ for t in targets],
        )

    def _restore(self) -> None:
        super()._restore()
        # Only the fields this version knows: an answer of a newer server may carry more.
        known = TargetStatus.__dataclass_fields__
        self.targets = tuple(
            TargetStatus(**{k: v for k, v in t.items() if k in known}) for t in self.detail.get("targets", ())
        )


class ArchiveConflict(BatchRejected, StateConflict):
    """Every rejected target was already archived (typically by a concurrent archiver)."""

    code = "archive_conflict"
    # Both parents' categories differ: the target's state (archived) wins over the rejection.
    category = Category.CONFLICT


class RetractedContent(BatchRejected, StateConflict):
    """Items of a write carry exactly the content of a retracted version of their record: stored,
    they would bring retracted text back as current (a nightly re-ingest undoing a retraction).
    Nothing was stored; `targets` marks each such item `retracted`. Changed content is a new
    version as always; bringing the retracted text back on purpose is the `reactivate` option."""

    code = "retracted_content"
    # Both parents' categories differ: the record's state (retracted) wins over the rejection.
    category = Category.CONFLICT


class Unauthenticated(ArchiveError):
    """No key, a malformed key, an unknown key or a revoked key: the caller is nobody. `reason`
    says which, never whether a key id exists."""

    code = "unauthenticated"
    category = Category.UNAUTHENTICATED

    def __init__(self, reason: str) -> None:
        super().__init__(reason)

    def _restore(self) -> None:
        self.reason = self.message


class StoreUnavailable(ArchiveError):
    """The store could not be reached or failed mid-operation. Nothing was changed (fail closed)."""

    code = "store_unavailable"
    category = Category.UNAVAILABLE


class OutboxOwned(StoreUnavailable):
    """Another process is already the sole drainer of this database's outbox (it applies the
    outbox to an index only it can open); a second one would split the rows between two
    indexes and reset the first one's unflushed rows. Nothing was changed."""

    code = "outbox_owned"


class IntegrityFailure(ArchiveError):
    """Stored bytes no longer match their recorded hash, or the audit chain is broken."""

    code = "integrity_error"
    category = Category.INTEGRITY


class StoreCorrupt(IntegrityFailure):
    """The database file is not (any more) a database, or its pages are damaged, as its engine
    reports it (SQLite: SQLITE_NOTADB, SQLITE_CORRUPT). Nothing was changed; waiting does not
    help, restoring a backup does. `database` names the file, `reason` is the engine's word."""

    code = "store_corrupt"

    def __init__(self, database: str, reason: str) -> None:
        super().__init__(
            f"archive database {database} is corrupt: {reason} "
            "(restore it from a backup; nothing was changed)",
            database=database,
            reason=reason,
        )


class ReceiptKeyMissing(IntegrityFailure):
    """The deployment key file of an existing archive is gone. It is never made up again: a new
    key would sign new receipts but reject every earlier receipt and anchor as another
    deployment's. Nothing was changed. `key_file` names the file."""

    code = "receipt_key_missing"

    def __init__(self, key_file: str) -> None:
        super().__init__(
            f"the deployment key {key_file} is missing, though this archive already exists: the "
            "deletion receipts and audit anchors signed with it can no longer be checked, and no "
            "new ones are signed. Restore the file from a backup of the data folder; if it is "
            "lost for good, `mnemo-sea keys rotate-receipt-key` starts a new key (what the lost "
            "key signed will then be refused as another deployment's). Nothing was changed",
            key_file=key_file,
        )


class ReceiptInvalid(IntegrityFailure):
    """A deletion receipt or audit anchor this deployment did not issue, or one the audit chain
    no longer matches. `check` names what failed: `unsigned`, `foreign_key` (signed by another
    deployment's key), `signature` (edited after signing), `unknown_audit_event` (the chain holds
    no such event, e.g. it was rewound) or `audit_mismatch` (the event differs from the one signed).
    """

    code = "receipt_invalid"
    # An IntegrityFailure, but of the client's document, not the store: invalid input.
    category = Category.INVALID_INPUT
    check: str

    def __init__(self, check: str, message: str, **detail: Any) -> None:
        super().__init__(message, check=check, **detail)

    def _restore(self) -> None:
        self.check = self.detail.get("check", "")
