"""A deterministic bag-of-words embedder, for tests and offline smoke runs only.

`mnemo-sea --embedder hashing` (or MNEMO_EMBEDDER=hashing) uses it instead of all-MiniLM-L6-v2,
which takes seconds to load in every process. Its vectors carry no meaning beyond shared words
(each lower-cased word, and each CJK character, adds one to a hashed bucket), so dense-leg
rankings are only as good as word overlap. Never use it for real data: an index built with it
refuses to open with the real model (IndexConfigMismatch), and re-indexing means rebuilding.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

HASHING_MODEL_ID = "mnemo-sea/hashing-bow-64"
_TOKENS = re.compile(r"[\u3400-\u9fff]|[^\W_]+", re.UNICODE)


class HashingEmbedder:
    """Embedder protocol (see mnemo_sea.retrieval.embedding): L2-normalised rows, same text, same row."""

    def __init__(self, dimension: int = 64) -> None:
        self._dimension = dimension

    @property
    def model_id(self) -> str:
        return HASHING_MODEL_ID

    @property
    def dimension(self) -> int:
        return self._dimension

    def _embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in _TOKENS.findall(text.lower()):
                digest = hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest()
                out[row, int.from_bytes(digest, "big") % self._dimension] += 1.0
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
            else:
                out[row, 0] = 1.0  # no words at all: a fixed unit vector keeps the row normalised
        return out

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._embed(texts)


__all__ = ["HASHING_MODEL_ID", "HashingEmbedder"]
