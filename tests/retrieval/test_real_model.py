"""The packaged all-MiniLM-L6-v2: loads with no network, and the dense leg finds paraphrases.

This is the one place the real model runs in the suite (its quality on SciFact and KUAKE-QTR is
measured by `mnemo-sea eval retrieval`, not by tests: see eval/README.md).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mnemo_sea.retrieval import (
    DEFAULT_MODEL_ID,
    AccessScope,
    EvidenceDocument,
    HybridIndex,
    IndexUnavailable,
    SearchMode,
    SearchQuery,
    SentenceTransformerEmbedder,
)


@pytest.fixture(scope="module")
def model() -> Iterator[SentenceTransformerEmbedder]:
    real_connect = socket.socket.connect

    def refuse(self: socket.socket, address: object) -> None:
        raise AssertionError(f"the model tried to reach the network: {address!r}")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    try:
        embedder = SentenceTransformerEmbedder()
        assert embedder.dimension == 384  # loading happens here, with the network refused
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
    yield embedder


def test_default_model_is_packaged_minilm_loaded_offline(model: SentenceTransformerEmbedder) -> None:
    assert model.model_id == DEFAULT_MODEL_ID
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    vectors = model.embed_documents(["The cat sat on the mat.", "Quarterly revenue grew by 4%."])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_dense_leg_finds_a_paraphrase_that_shares_no_word(
    model: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    docs = {
        "cat": "The cat sat on the mat all afternoon.",
        "revenue": "Quarterly revenue grew by four percent.",
        "parcel": "The courier left the parcel at the back door.",
    }
    with HybridIndex.open(tmp_path / "ix", embedder=model) as index:
        index.upsert(
            EvidenceDocument(tenant_id="acme", evidence_id=k, version=1, text=v) for k, v in docs.items()
        )
        query = "a kitten resting on a rug"
        lexical = index.search(AccessScope("acme"), SearchQuery(query, mode=SearchMode.BM25))
        assert lexical.hits == ()  # no shared term: BM25 cannot help
        dense = index.search(AccessScope("acme"), SearchQuery(query, mode=SearchMode.DENSE))
        assert dense.hits[0].evidence_id == "cat"
        hybrid = index.search(AccessScope("acme"), SearchQuery("package delivered by courier"))
        assert hybrid.hits[0].evidence_id == "parcel"


def test_a_model_that_is_not_on_disk_fails_clearly_instead_of_downloading() -> None:
    embedder = SentenceTransformerEmbedder("sentence-transformers/not-a-real-model-xyz")
    with pytest.raises(IndexUnavailable) as caught:
        embedder.embed_queries(["hello"])
    assert "offline" in caught.value.message
