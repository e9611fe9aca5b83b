"""Test doubles shared by the suites (importable because tests/conftest.py puts tests/ on sys.path)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.system.hashing_embedder import HashingEmbedder as _Hashing


class HashingEmbedder(_Hashing):
    """The package's deterministic embedder, counting what it embeds and able to fail on demand."""

    def __init__(self, dimension: int = 64) -> None:
        super().__init__(dimension)
        self.documents_embedded = 0
        self.fail = False

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if self.fail:
            raise IndexUnavailable("embedder", "test model switched off")
        self.documents_embedded += len(texts)
        return super().embed_documents(texts)
