"""An Embedder that looks vectors up instead of computing them, for engine benchmarks.

A benchmark of the engine's own ingest path wants the model out of the picture: the vectors of
the corpus are made beforehand (eval.synthetic's random unit rows) and handed over by text.
Embedding a document is then a dict lookup, cheaper than the embedding cache's lookup and store,
so it declares `cheap_to_embed` and CachingEmbedder passes it through.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray


class PrecomputedEmbedder:
    """Embedder protocol over `vectors[i]` for `texts[i]` (unit rows). A text it was not given
    (a query, say) gets the first row: searches still run, their dense leg means nothing."""

    cheap_to_embed = True

    def __init__(self, texts: Sequence[str], vectors: NDArray[np.float32]) -> None:
        if len(texts) != len(vectors) or not len(vectors):
            raise ValueError(
                f"need one vector per text and at least one, got {len(texts)} and {len(vectors)}"
            )
        self._rows = {text: row for text, row in zip(texts, vectors, strict=True)}
        self._fallback = vectors[0]
        self._dimension = int(vectors.shape[1])

    @property
    def model_id(self) -> str:
        return f"eval/precomputed-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        rows, fallback = self._rows, self._fallback
        return np.stack([rows.get(text, fallback) for text in texts]).astype(np.float32, copy=False)

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self.embed_documents(texts)
