"""The archive layer: the source of truth for every original an agent read.

Start with `Archive.open(path_or_url)` and a `Principal`; see `Archive` for the operations.
This is the archive's public face: everything above the archive (the surfaces, context) imports
from here, never a submodule; only mnemo_sea.system, which wires the store into the indexer,
reaches further (a contract in pyproject.toml).
"""

# This folder ships as mnemo_sea.archive (the link mnemo_sea/archive). Imported as `archive` from
# the repository root it would load a second copy of every class, and isinstance checks and
# except clauses would stop matching across the two; so only the one name is accepted.
if __name__ != "mnemo_sea.archive":
    raise ImportError(
        f"import this layer as mnemo_sea.archive, not {__name__} (the repository root is not a package root)"
    )


import warnings
from typing import Any

from .api import Archive
from .features.api_keys import ApiKeyInfo, cached_principal
from .features.evidence import EvidenceInfo
from .features.memory import MemoryOwner
from .features.sessions import SessionInfo
from .rules import limits
from .rules.checks import json_text
from .rules.errors import (
    ArchiveConflict,
    ArchiveError,
    BatchRejected,
    ContentTooLarge,
    Forbidden,
    IdempotencyMismatch,
    IntegrityFailure,
    InvalidBatch,
    InvalidInput,
    InvalidSpan,
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
from .rules.excerpts import DEFAULT_AROUND, Excerpt
from .rules.metadata import metadata_json
from .rules.operations import (
    MAX_VERSION,
    ArchiveResultsOp,
    ArchiveTarget,
    Clearance,
    CreateSummaryOp,
    EvidenceInput,
    ExcerptSpan,
    Idempotent,
    InSession,
    LiveViewOp,
    ProvenanceName,
    RecordOp,
    RecoverOp,
    RememberOp,
    ResultMetadata,
    RetractOp,
    TaskStateOp,
    TextOrBytes,
    UpdateTaskStateOp,
)
from .rules.policy import DEFAULT_PROTECTED_CLASSES, ArchivePolicy, check_policy_class
from .rules.principal import Principal, Role, Sensitivity, check_identifier
from .rules.records import (
    SEARCH_KINDS,
    ArchiveReceipt,
    ConfirmedFact,
    DeletionReceipt,
    ErasureState,
    EvidenceRecord,
    LiveItem,
    LiveView,
    MemoryFact,
    Provenance,
    Recovered,
    ReleasedItem,
    RememberOutcome,
    Summary,
    TaskState,
    parse_provenance,
)
from .rules.refs import (
    DERIVED_ID_PREFIXES,
    EVIDENCE_REF_PREFIX,
    RESULT_PREFIX,
    IndexId,
    MemoryIndexId,
    ResultIndexId,
    SourceRef,
    check_evidence_id,
    parse_index_id,
)
from .rules.result_checks import arguments_fit, check_tool_result
from .rules.tool_results import (
    ToolResult,
    escape_attr,
    escape_text,
    render_live,
    render_stub,
    render_withheld,
)
from .storage.audit import AuditAnchor, AuditEvent, AuditReport
from .storage.outbox import OutboxBacklog
from .storage.signing import ReceiptKey
from .storage.store import PG_CONNECT_TIMEOUT_S
from .storage.verified_keys import VerifiedKeys

__all__ = [
    "DEFAULT_AROUND",
    "DEFAULT_PROTECTED_CLASSES",
    "DERIVED_ID_PREFIXES",
    "EVIDENCE_REF_PREFIX",
    "MAX_VERSION",
    "PG_CONNECT_TIMEOUT_S",
    "RESULT_PREFIX",
    "SEARCH_KINDS",
    "ApiKeyInfo",
    "Archive",
    "ArchiveConflict",
    "ArchiveError",
    "ArchivePolicy",
    "ArchiveReceipt",
    "ArchiveResultsOp",
    "ArchiveTarget",
    "AuditAnchor",
    "AuditEvent",
    "AuditReport",
    "BatchRejected",
    "Clearance",
    "ConfirmedFact",
    "ContentTooLarge",
    "CreateSummaryOp",
    "DeletionReceipt",
    "ErasureState",
    "EvidenceInfo",
    "EvidenceInput",
    "EvidenceRecord",
    "Excerpt",
    "ExcerptSpan",
    "Forbidden",
    "IdempotencyMismatch",
    "Idempotent",
    "InSession",
    "IndexId",
    "IntegrityFailure",
    "InvalidBatch",
    "InvalidInput",
    "InvalidSpan",
    "LiveItem",
    "LiveView",
    "LiveViewOp",
    "MemoryConflict",
    "MemoryFact",
    "MemoryIndexId",
    "MemoryOwner",
    "NotFound",
    "OutboxBacklog",
    "Principal",
    "Provenance",
    "ProvenanceName",
    "ReceiptInvalid",
    "ReceiptKey",
    "ReceiptKeyMissing",
    "RecordOp",
    "RecoverOp",
    "Recovered",
    "ReleasedItem",
    "RememberOp",
    "RememberOutcome",
    "ResultIndexId",
    "ResultMetadata",
    "RetractOp",
    "RetractedContent",
    "Role",
    "Sensitivity",
    "SessionInfo",
    "SourceRef",
    "StateConflict",
    "StoreCorrupt",
    "StoreUnavailable",
    "Summary",
    "TargetStatus",
    "TaskState",
    "TaskStateOp",
    "TaskStateRejected",
    "TextOrBytes",
    "ToolResult",
    "Unauthenticated",
    "UpdateTaskStateOp",
    "VerifiedKeys",
    "arguments_fit",
    "cached_principal",
    "check_evidence_id",
    "check_identifier",
    "check_policy_class",
    "check_tool_result",
    "escape_attr",
    "escape_text",
    "json_text",
    "limits",
    "metadata_json",
    "parse_index_id",
    "parse_provenance",
    "render_live",
    "render_stub",
    "render_withheld",
]


def __getattr__(name: str) -> Any:
    # The integrity class was named IntegrityError until 0.1.0, the name of SQLAlchemy's (and
    # sqlite3's) constraint error, which every module that caught both had to alias. The old name
    # still resolves, with a warning; the wire code stays "integrity_error".
    if name == "IntegrityError":
        warnings.warn(
            "mnemo_sea.archive.IntegrityError is renamed IntegrityFailure",
            DeprecationWarning,
            stacklevel=2,
        )
        return IntegrityFailure
    raise AttributeError(f"module 'mnemo_sea.archive' has no attribute {name!r}")
