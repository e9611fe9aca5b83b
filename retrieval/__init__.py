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


import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from .server_backend import ServerIndex
    from .settings import EncodingSettings, SearchSettings
    from .tokenizer import ChineseSegmentation, Tokenizer, TokenizerSettings
    from .tuning import IndexTuning
    from .upsert_plan import UpsertProgress

# Every name is loaded on first use (PEP 562): the engines behind this package (Qdrant Edge,
# qdrant-client, the tokenizers, ONNX Runtime, sentence-transformers) cost seconds to import,
# and a caller that only needs the errors or the value types (the REST client,
# mnemo_sea.client; the CLI's early failures) must not pay for them. name -> its module.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("Leg", "LegQuery", "ScoredPoint", "VectorIndex"), "backend"),
    **dict.fromkeys(("Bm25Encoder", "Bm25Params", "SparseVector"), "bm25"),
    **dict.fromkeys(("ChunkingPolicy", "split_into_chunks"), "chunking"),
    "EdgeIndex": "edge_backend",
    **dict.fromkeys(
        ("DEFAULT_MODEL_ID", "Embedder", "SentenceTransformerEmbedder", "default_model_path"), "embedding"
    ),
    **dict.fromkeys(
        ("CachingEmbedder", "EmbeddingCache", "InMemoryEmbeddingCache", "SqliteEmbeddingCache"),
        "embedding_cache",
    ),
    **dict.fromkeys(
        (
            "IndexConfigMismatch",
            "IndexLocked",
            "IndexUnavailable",
            "InvalidDocument",
            "InvalidQuery",
            "LockHolder",
            "ModelExportError",
            "RetrievalError",
        ),
        "errors",
    ),
    **dict.fromkeys(("Chunk", "EvidenceDocument", "sha256_hex"), "evidence"),
    **dict.fromkeys(("FilterSpec", "search_filter"), "filters"),
    **dict.fromkeys(("FusionSettings", "weighted_rrf"), "fusion"),
    **dict.fromkeys(("DeleteReport", "HybridIndex", "UpsertReport"), "hybrid_index"),
    "fit_avg_doc_len": "ingest",
    "OnnxEmbedder": "onnx_embedder",
    **dict.fromkeys(("Hit", "LegScore", "SearchOutcome", "SearchStatus"), "outcome"),
    **dict.fromkeys(("IndexPoint", "PointPayload", "point_id"), "points"),
    **dict.fromkeys(("AccessScope", "SearchMode", "SearchQuery"), "query"),
    # qdrant-client's import alone costs seconds (pydantic builds its models): only a Qdrant
    # server needs it, never the embedded default.
    "ServerIndex": "server_backend",
    **dict.fromkeys(("EncodingSettings", "SearchSettings"), "settings"),
    **dict.fromkeys(("ChineseSegmentation", "Tokenizer", "TokenizerSettings"), "tokenizer"),
    "IndexTuning": "tuning",
    "UpsertProgress": "upsert_plan",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
    "UpsertProgress",
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
