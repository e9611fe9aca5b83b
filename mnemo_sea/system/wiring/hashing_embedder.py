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
_BUCKET_MEMO_ENTRIES = 1 << 16
_FLOAT32_COUNT_LIMIT = 1 << 24  # float32 + 1.0 stays put from here


class HashingEmbedder:
    """Embedder protocol (see mnemo_sea.retrieval.embedding): L2-normalised rows, same text, same row."""

    # Cheaper than an embedding cache to miss: ~14 us a 40-word text (43 us before the memo),
    # where the SQLite cache takes ~14 us to look up and store a 64-d row, on top of embedding
    # it, and ~3 us to hit (bench engine-ingest, docs/figures.md). A test embedder re-ingesting
    # unchanged text is rare; every first ingest paying the cache is not.
    cheap_to_embed = True

    def __init__(self, dimension: int = 64) -> None:
        self._dimension = dimension
        # Each distinct token's bucket, worked out once: hashing every token was most of the cost.
        self._buckets: dict[str, int] = {}

    @property
    def model_id(self) -> str:
        return HASHING_MODEL_ID

    @property
    def dimension(self) -> int:
        return self._dimension

    def _bucket(self, token: str) -> int:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest()
        bucket = int.from_bytes(digest, "big") % self._dimension
        if len(self._buckets) >= _BUCKET_MEMO_ENTRIES:
            self._buckets.clear()
        self._buckets[token] = bucket
        return bucket

    def _embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Each row counts its tokens' buckets, then is L2-normalised. Counted in one bincount over
        the batch (adding 1.0 a token into float32 cells cost 7 us a text); the counts are exact
        integers, so the rows are bit for bit those of adding 1.0 per token, which stops growing
        at 2**24 (tests/system/test_hashing_embedder.py keeps that loop as the reference)."""
        dimension = self._dimension
        known = self._buckets.get
        cells: list[int] = []  # row * dimension + bucket, one per token
        for row, text in enumerate(texts):
            base = row * dimension
            for token in _TOKENS.findall(text.lower()):
                bucket = known(token)
                cells.append(base + (self._bucket(token) if bucket is None else bucket))
        counts = np.bincount(np.array(cells, dtype=np.int64), minlength=len(texts) * dimension)
        out = np.minimum(counts, _FLOAT32_COUNT_LIMIT).reshape(len(texts), dimension).astype(np.float32)
        for row in range(len(texts)):
            vector = out[row]  # a view: changed in place
            norm = float(np.sqrt(vector.dot(vector)))  # np.linalg.norm of a vector, without its checks
            if norm:
                vector /= norm
            else:
                vector[0] = 1.0  # no words at all: a fixed unit vector keeps the row normalised
        return out

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._embed(texts)


__all__ = ["HASHING_MODEL_ID", "HashingEmbedder"]
