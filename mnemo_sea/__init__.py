"""mnemo-sea: a Session Evidence Archive plus hybrid retrieval for tool-using LLM agents.

The public face. `Mnemo` is the facade every surface calls; a `Principal` says who calls (tenant,
subject, roles, clearance); the errors are the typed answers every operation gives. Everything
else lives in the layers, each a sub-package (see docs/architecture.md):

    cli        the `mnemo-sea` command line               (entry)
    eval, demo evaluations and benchmarks; the demo        (over the surfaces)
    mcp, rest  the agent's tools over MCP; the REST API    (surfaces)
    client     the REST API's typed Python client          (beside rest: the wire, not the server)
    integrations  LangChain and LlamaIndex retrievers      (beside rest; import one by name, extras)
    system     the facade, indexer, worker, caches, citations, settings
    context    working-context assembly and token counts
    archive    the Session Evidence Archive (SQL + blobs)  | retrieval: hybrid BM25 + vector index

`Mnemo` (and `AsyncMnemo`, the facade for asyncio), the retrieval errors and ContextOverBudget
are loaded on first use, so `import mnemo_sea` (and a client that only needs the archive's
errors) loads neither the index engine, the embedding model nor the tokenizer; on the slim
install, using one names the extra to install (`ExtraMissing`, mnemo_sea/extras.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mnemo_sea.archive import (
    ArchiveConflict,
    ArchiveError,
    ArchiveTarget,
    BatchRejected,
    ContentTooLarge,
    EvidenceInput,
    Forbidden,
    IdempotencyMismatch,
    IntegrityFailure,
    InvalidBatch,
    InvalidInput,
    InvalidSpan,
    MemoryConflict,
    NotFound,
    Principal,
    ReceiptInvalid,
    ReceiptKeyMissing,
    RetractedContent,
    Role,
    Sensitivity,
    StateConflict,
    StoreCorrupt,
    StoreUnavailable,
    TaskStateRejected,
    Unauthenticated,
)
from mnemo_sea.extras import ExtraMissing, extra_missing

if TYPE_CHECKING:
    from mnemo_sea.context.errors import ContextOverBudget
    from mnemo_sea.retrieval.errors import (
        IndexConfigMismatch,
        IndexLocked,
        IndexUnavailable,
        InvalidDocument,
        InvalidQuery,
        RetrievalError,
    )
    from mnemo_sea.system.acting import AsyncMnemo
    from mnemo_sea.system.mnemo import Mnemo

__version__ = "0.1.0"

__all__ = [
    "ArchiveConflict",
    "ArchiveError",
    "ArchiveTarget",
    "AsyncMnemo",
    "BatchRejected",
    "ContentTooLarge",
    "ContextOverBudget",
    "EvidenceInput",
    "ExtraMissing",
    "Forbidden",
    "IdempotencyMismatch",
    "IndexConfigMismatch",
    "IndexLocked",
    "IndexUnavailable",
    "IntegrityFailure",
    "InvalidBatch",
    "InvalidDocument",
    "InvalidInput",
    "InvalidQuery",
    "InvalidSpan",
    "MemoryConflict",
    "Mnemo",
    "NotFound",
    "Principal",
    "ReceiptInvalid",
    "ReceiptKeyMissing",
    "RetractedContent",
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


# Loaded on first use (see the module docstring): name -> the module that defines it.
_LAZY = {
    "Mnemo": "mnemo_sea.system.mnemo",
    "AsyncMnemo": "mnemo_sea.system.acting",
    "ContextOverBudget": "mnemo_sea.context.errors",
    **dict.fromkeys(
        (
            "IndexConfigMismatch",
            "IndexLocked",
            "IndexUnavailable",
            "InvalidDocument",
            "InvalidQuery",
            "RetrievalError",
        ),
        "mnemo_sea.retrieval.errors",
    ),
}


def __getattr__(name: str) -> Any:
    if name == "IntegrityError":  # the old name of IntegrityFailure (see mnemo_sea.archive)
        from mnemo_sea import archive

        return archive.IntegrityError
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mnemo_sea' has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        raise (extra_missing(e, f"mnemo_sea.{name}") or e) from e
