"""The archive layer: the source of truth for every original an agent read.

Start with `Archive.open(path_or_url)` and a `Principal`; see `Archive` for the operations.
"""

# This folder ships as mnemo_sea.archive (the link mnemo_sea/archive). Imported as `archive` from
# the repository root it would load a second copy of every class, and isinstance checks and
# except clauses would stop matching across the two; so only the one name is accepted.
if __name__ != "mnemo_sea.archive":
    raise ImportError(
        f"import this layer as mnemo_sea.archive, not {__name__} (the repository root is not a package root)"
    )


from mnemo_sea.archive.api import Archive
from mnemo_sea.archive.rules import limits
from mnemo_sea.archive.rules.errors import (
    ArchiveConflict,
    ArchiveError,
    BatchRejected,
    ContentTooLarge,
    Forbidden,
    IdempotencyMismatch,
    IntegrityError,
    InvalidBatch,
    InvalidInput,
    MemoryConflict,
    NotFound,
    ReceiptInvalid,
    ReceiptKeyMissing,
    RetractedContent,
    StateConflict,
    StoreCorrupt,
    StoreUnavailable,
    TargetStatus,
    TaskStateRejected,
    Unauthenticated,
)
from mnemo_sea.archive.rules.operations import ArchiveTarget, EvidenceInput
from mnemo_sea.archive.rules.policy import ArchivePolicy
from mnemo_sea.archive.rules.principal import Principal, Role, Sensitivity
from mnemo_sea.archive.rules.records import (
    ArchiveReceipt,
    ConfirmedFact,
    DeletionReceipt,
    ErasureState,
    EvidenceRecord,
    LiveView,
    MemoryFact,
    Recovered,
    ReleasedItem,
    RememberOutcome,
    Summary,
    TaskState,
)
from mnemo_sea.archive.rules.refs import SourceRef
from mnemo_sea.archive.rules.tool_results import ToolResult
from mnemo_sea.archive.storage.audit import AuditAnchor, AuditEvent, AuditReport
from mnemo_sea.archive.storage.signing import ReceiptKey

__all__ = [
    "Archive",
    "ArchiveConflict",
    "ArchiveError",
    "ArchivePolicy",
    "ArchiveReceipt",
    "ArchiveTarget",
    "AuditAnchor",
    "AuditEvent",
    "AuditReport",
    "BatchRejected",
    "ConfirmedFact",
    "ContentTooLarge",
    "DeletionReceipt",
    "ErasureState",
    "EvidenceInput",
    "EvidenceRecord",
    "Forbidden",
    "IdempotencyMismatch",
    "IntegrityError",
    "InvalidBatch",
    "InvalidInput",
    "LiveView",
    "MemoryConflict",
    "MemoryFact",
    "NotFound",
    "Principal",
    "ReceiptInvalid",
    "ReceiptKey",
    "ReceiptKeyMissing",
    "Recovered",
    "ReleasedItem",
    "RememberOutcome",
    "RetractedContent",
    "Role",
    "Sensitivity",
    "SourceRef",
    "StateConflict",
    "StoreCorrupt",
    "StoreUnavailable",
    "Summary",
    "TargetStatus",
    "TaskState",
    "TaskStateRejected",
    "ToolResult",
    "Unauthenticated",
    "limits",
]
