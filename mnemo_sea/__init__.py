"""mnemo-sea: a Session Evidence Archive plus hybrid retrieval for tool-using LLM agents.

The public face. `Mnemo` is the facade every surface calls; a `Principal` says who calls (tenant,
subject, roles, clearance); the errors are the typed answers every operation gives. Everything
else lives in the layers, each a sub-package (see docs/architecture.md):

    cli        the `mnemo-sea` command line               (entry)
    eval, demo evaluations and benchmarks; the demo        (over the surfaces)
    mcp, rest  the agent's tools over MCP; the REST API    (surfaces)
    system     the facade, indexer, worker, caches, citations, settings
    context    working-context assembly and token counts
    archive    the Session Evidence Archive (SQL + blobs)  | retrieval: hybrid BM25 + vector index

`Mnemo` and the retrieval errors are loaded on first use, so `import mnemo_sea` (and a client
that only needs the archive's errors) does not load the index engine or the embedding model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemo_sea.archive import (
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
    Principal,
    ReceiptInvalid,
    Role,
    Sensitivity,
    StateConflict,
    StoreCorrupt,
    StoreUnavailable,
    TaskStateRejected,
    Unauthenticated,
)

if TYPE_CHECKING:
    from mnemo_sea.retrieval.errors import (
        IndexConfigMismatch,
        IndexLocked,
        IndexUnavailable,
        InvalidDocument,
        InvalidQuery,
        RetrievalError,
    )
    from mnemo_sea.system.mnemo import Mnemo

__version__ = "0.1.0"

__all__ = [
    "ArchiveConflict",
    "ArchiveError",
    "BatchRejected",
    "ContentTooLarge",
    "Forbidden",
    "IdempotencyMismatch",
    "IndexConfigMismatch",
    "IndexLocked",
    "IndexUnavailable",
    "IntegrityError",
    "InvalidBatch",
    "InvalidDocument",
    "InvalidInput",
    "InvalidQuery",
    "MemoryConflict",
    "Mnemo",
    "NotFound",
    "Principal",
    "ReceiptInvalid",
    "RetrievalError",
    "Role",
    "Sensitivity",
    "StateConflict",
    "StoreCorrupt",
    "StoreUnavailable",
    "TaskStateRejected",
    "Unauthenticated",
    "__version__",
]


_RETRIEVAL_ERRORS = frozenset(
    {
        "IndexConfigMismatch",
        "IndexLocked",
        "IndexUnavailable",
        "InvalidDocument",
        "InvalidQuery",
        "RetrievalError",
    }
)


def __getattr__(name: str) -> Any:
    if name == "Mnemo":
        from mnemo_sea.system.mnemo import Mnemo

        return Mnemo
    if name in _RETRIEVAL_ERRORS:
        from mnemo_sea.retrieval import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'mnemo_sea' has no attribute {name!r}")
