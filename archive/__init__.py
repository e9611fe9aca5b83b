"""The archive layer: the source of truth for every original an agent read.

Start with `Archive.open(path_or_url)` and a `Principal`; see `Archive` for the operations.
"""

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
    StateConflict,
    StoreCorrupt,
    StoreUnavailable,
    TargetStatus,
    TaskStateRejected,
    Unauthenticated,
)
from .evidence import EvidenceInput
from .policy import ArchivePolicy
from .principal import Principal, Role, Sensitivity
from .records import (
    ArchiveReceipt,
    ArchiveTarget,
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
    ToolResult,
)
from .refs import SourceRef
from .signing import ReceiptKey

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
    "Recovered",
    "ReleasedItem",
    "RememberOutcome",
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
