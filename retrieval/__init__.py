"""Hybrid BM25 + dense retrieval under tenant pre-filters (shipped as `mnemo_sea.retrieval`).

The index finds pointers, never holds text: each point is one chunk of one evidence version,
with pointer and filter fields as payload; the archive hydrates hits. This package never
imports the archive, the CLI or the evaluation harnesses.

Entry point: HybridIndex (open an embedded index, or connect to a Qdrant server), with
EvidenceDocument in, AccessScope + SearchQuery -> SearchOutcome out.
"""

# This folder ships as mnemo_sea.retrieval (the link mnemo_sea/retrieval). Imported as `retrieval` from
# the repository root it would load a second copy of every class, and isinstance checks and
# except clauses would stop matching across the two; so only the one name is accepted.
if __name__ != "mnemo_sea.retrieval":
    raise ImportError(
        f"import this layer as mnemo_sea.retrieval, not {__name__} "
        "(the repository root is not a package root)"
    )


from typing import TYPE_CHECKING, Any

from .backend import Leg, LegQuery, ScoredPoint, VectorIndex
from .bm25 import Bm25Encoder, Bm25Params, SparseVector
from .chunking import ChunkingPolicy, split_into_chunks
from .edge_backend import EdgeIndex
from .embedding import DEFAULT_MODEL_ID, Embedder, SentenceTransformerEmbedder, default_model_path
from .embedding_cache import CachingEmbedder, EmbeddingCache, InMemoryEmbeddingCache, SqliteEmbeddingCache
from .errors import (
    IndexConfigMismatch,
    IndexLocked,
    IndexUnavailable,
    InvalidDocument,
    InvalidQuery,
    LockHolder,
    ModelExportError,
    RetrievalError,
)
from .evidence import Chunk, EvidenceDocument, sha256_hex
from .filters import FilterSpec, search_filter
from .fusion import FusionSettings, weighted_rrf
from .hybrid_index import DeleteReport, HybridIndex, UpsertReport
from .ingest import fit_avg_doc_len
from .onnx_embedder import OnnxEmbedder
from .outcome import Hit, LegScore, SearchOutcome, SearchStatus
from .points import IndexPoint, PointPayload, point_id
from .query import AccessScope, SearchMode, SearchQuery
from .settings import EncodingSettings, SearchSettings
from .tokenizer import ChineseSegmentation, Tokenizer, TokenizerSettings
from .tuning import IndexTuning

if TYPE_CHECKING:
    from .server_backend import ServerIndex


def __getattr__(name: str) -> Any:
    # qdrant-client's import costs seconds (pydantic builds its models) and only a Qdrant server
    # needs it: the embedded default, and every CLI process on it, never pays for it.
    if name == "ServerIndex":
        from .server_backend import ServerIndex

        return ServerIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_MODEL_ID",
    "AccessScope",
    "Bm25Encoder",
    "Bm25Params",
    "CachingEmbedder",
    "ChineseSegmentation",
    "Chunk",
    "ChunkingPolicy",
    "DeleteReport",
    "EdgeIndex",
    "Embedder",
    "EmbeddingCache",
    "EncodingSettings",
    "EvidenceDocument",
    "FilterSpec",
    "FusionSettings",
    "Hit",
    "HybridIndex",
    "InMemoryEmbeddingCache",
    "IndexConfigMismatch",
    "IndexLocked",
    "IndexPoint",
    "IndexTuning",
    "IndexUnavailable",
    "InvalidDocument",
    "InvalidQuery",
    "Leg",
    "LegQuery",
    "LegScore",
    "LockHolder",
    "ModelExportError",
    "OnnxEmbedder",
    "PointPayload",
    "RetrievalError",
    "ScoredPoint",
    "SearchMode",
    "SearchOutcome",
    "SearchQuery",
    "SearchSettings",
    "SearchStatus",
    "SentenceTransformerEmbedder",
    "ServerIndex",
    "SparseVector",
    "SqliteEmbeddingCache",
    "Tokenizer",
    "TokenizerSettings",
    "UpsertReport",
    "VectorIndex",
    "default_model_path",
    "fit_avg_doc_len",
    "point_id",
    "search_filter",
    "sha256_hex",
    "split_into_chunks",
    "weighted_rrf",
]
