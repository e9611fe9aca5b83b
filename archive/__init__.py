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


from .api import Archive
from .audit import AuditAnchor, AuditEvent, AuditReport
from .errors import (
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
from .operations import ArchiveTarget, EvidenceInput
from .policy import ArchivePolicy
from .principal import Principal, Role, Sensitivity
from .records import (
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
from .refs import SourceRef
from .signing import ReceiptKey
from .tool_results import ToolResult

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
]
