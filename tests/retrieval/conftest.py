"""Fixtures of the retrieval tests: a deterministic fake embedder and both index backends.

The fake embedder hashes words into buckets (a bag-of-words vector), so texts that share words
are close and the dense leg behaves plausibly, without loading a model. The real model is used
only in test_real_model.py, where the model itself is the subject.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from mnemo_sea.retrieval import HybridIndex, IndexUnavailable

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


class HashingEmbedder:
    """Deterministic bag-of-words embedder; counts the texts it was asked to embed."""

    def __init__(self, dimension: int = 64, model_id: str = "test-hashing-64") -> None:
        self.dimension = dimension
        self.model_id = model_id
        self.documents_embedded = 0
        self.fail = False

    def _embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if self.fail:
            raise IndexUnavailable("embedder", "test model switched off")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                bucket = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
                out[row, bucket % self.dimension] += 1.0
            norm = float(np.linalg.norm(out[row]))
            out[row] = out[row] / norm if norm else np.eye(self.dimension, dtype=np.float32)[0]
        return out

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.documents_embedded += len(texts)
        return self._embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._embed(texts)


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="session")
def embedder_factory() -> type[HashingEmbedder]:
    """The fake embedder class, for tests that build several (test modules cannot import conftest)."""
    return HashingEmbedder


@pytest.fixture(params=["edge", "server"])
def index(request: pytest.FixtureRequest, tmp_path: Path, embedder: HashingEmbedder) -> Iterator[HybridIndex]:
    """A fresh index on each backend: Qdrant Edge in tmp_path, and QdrantClient(':memory:')."""
    if request.param == "edge":
        opened = HybridIndex.open(tmp_path / "index", embedder=embedder)
    else:
        opened = HybridIndex.connect(":memory:", f"test-{tmp_path.name}", embedder=embedder)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def edge_index(tmp_path: Path, embedder: HashingEmbedder) -> Iterator[HybridIndex]:
    opened = HybridIndex.open(tmp_path / "index", embedder=embedder)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def scifact_dir() -> Path:
    """The SciFact BEIR folder in ../shared/data (beside the repository, in CI too)."""
    path = SHARED_DATA / "scifact"
    assert (path / "corpus.jsonl").is_file(), f"SciFact is expected at {path} (shared/ beside the repo)"
    return path
