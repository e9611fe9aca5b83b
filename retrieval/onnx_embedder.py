"""OnnxEmbedder: a sentence-transformers model run by ONNX Runtime, the default embedder.

The same vectors as SentenceTransformerEmbedder (cosine >= 0.9999 on every probe, checked on
each load; see onnx_export) for less time: ONNX Runtime fuses BERT's attention, layer norms
and GELU into single kernels and has no per-call framework overhead, so one short query costs
a fraction of the torch forward pass. Documents go through it too, so stored vectors and
query vectors come from one runtime.

The export is made on first use (a few seconds, once per machine and model: it stays in the
cache folder, see onnx_export.default_cache_root) and needs torch then; a process that finds a
verified export does not load torch at all.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .embedding import DEFAULT_MODEL_ID, Vectors, default_model_path
from .errors import IndexUnavailable
from .onnx_export import ExportedModel, default_cache_root, load_export, run_graph


def default_threads() -> int:
    # Two threads split a batch's matrix multiplies; more than the cores only contend.
    return max(1, min(2, os.cpu_count() or 1))


class OnnxEmbedder:
    """`model`: a local sentence-transformers folder; None means the packaged all-MiniLM-L6-v2.

    `model_id` names the model for cache keys and index identity (as SentenceTransformerEmbedder
    does: the hub id for the default), so an index built with torch opens with this embedder and
    the reverse. `cache_dir` holds the exports (default_cache_root() when None). `threads` is
    ONNX Runtime's intra-op thread count. Loading is lazy; failures raise IndexUnavailable
    (ModelExportError for a model that cannot be exported or verified).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        model_id: str | None = None,
        cache_dir: str | Path | None = None,
        threads: int | None = None,
        batch_size: int = 64,
    ) -> None:
        self._source = Path(model) if model is not None else None
        self._model_id = model_id or (DEFAULT_MODEL_ID if model is None else str(model))
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.threads = threads or default_threads()
        self.batch_size = batch_size
        self._loaded: ExportedModel | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        return self.exported.manifest.dimension

    @property
    def exported(self) -> ExportedModel:
        """The verified export in use (loading, and exporting if needed, on first access)."""
        with self._lock:
            if self._loaded is None:
                source = self._source if self._source is not None else default_model_path()
                root = self._cache_dir if self._cache_dir is not None else default_cache_root()
                self._loaded = load_export(source, root, threads=self.threads)
            return self._loaded

    def runtime_report(self) -> dict[str, Any]:
        """Which runtime serves the vectors and how its export was checked (for bench and health)."""
        return {"model_id": self._model_id, "threads": self.threads, **self.exported.report()}

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._encode(texts)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        # The exporter refuses models with query prompts, so a query is encoded as a document.
        return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> Vectors:
        exported = self.exported
        manifest = exported.manifest
        if not texts:
            return np.zeros((0, manifest.dimension), dtype=np.float32)
        out = np.empty((len(texts), manifest.dimension), dtype=np.float32)
        # Longest first, in batches of similar length: padding costs compute on every row.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        try:
            for start in range(0, len(order), self.batch_size):
                picked = order[start : start + self.batch_size]
                out[picked] = run_graph(
                    exported.session,
                    exported.tokenizer,
                    manifest.inputs,
                    [texts[i] for i in picked],
                    lowercase=manifest.lowercase,
                )
        except Exception as exc:
            raise IndexUnavailable("embedder", f"{self._model_id} failed to encode: {exc}") from exc
        return out
