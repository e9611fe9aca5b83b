"""BM25 split across the two sides: document weights here, IDF in the engine."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from rank_bm25 import BM25Okapi

from mnemo_sea.retrieval import (
    AccessScope,
    Bm25Encoder,
    Bm25Params,
    Embedder,
    EncodingSettings,
    EvidenceDocument,
    HybridIndex,
    SearchMode,
    SearchQuery,
    Tokenizer,
)
from mnemo_sea.retrieval.bm25 import term_index

CORPUS = [
    "Refunds are paid within 30 days of a delivery complaint.",
    "Delivery delays: order O-1042 was delayed by the carrier; delivery resumed.",
    "Carrier contracts renew every year; delays are penalised.",
    "The cafeteria menu changes every Monday.",
    "Refund policy for damaged goods: refunds need a photo of the damage.",
]
QUERIES = ["refund delivery", "carrier delays delays", "O-1042", "damaged goods photo refunds"]


def _dot(query: dict[int, float], doc: dict[int, float], idf: dict[int, float]) -> float:
    return sum(q * idf.get(i, 0.0) * doc.get(i, 0.0) for i, q in query.items())


def test_document_weights_times_rank_bm25_idf_reproduce_rank_bm25_exactly() -> None:
    tok = Tokenizer()
    docs = tok.tokenize_many(CORPUS)
    reference = BM25Okapi(docs, k1=0.9, b=0.4)
    encoder = Bm25Encoder(tok, Bm25Params(k1=0.9, b=0.4, avg_doc_len=reference.avgdl))
    idf = {term_index(t): v for t, v in reference.idf.items()}
    for query in QUERIES:
        terms = tok.tokenize(query)
        qv = encoder.query_vector(terms)
        q = dict(zip(qv.indices, qv.values, strict=True))
        expected = reference.get_scores(terms)
        for d, doc_terms in enumerate(docs):
            dv = encoder.document_vector(doc_terms)
            ours = _dot(q, dict(zip(dv.indices, dv.values, strict=True)), idf)
            assert ours == pytest.approx(expected[d], rel=1e-9, abs=1e-12)


def test_query_vector_counts_repeated_terms() -> None:
    tok = Tokenizer()
    qv = Bm25Encoder(tok, Bm25Params()).query_vector(tok.tokenize("delays delays carrier"))
    weights = dict(zip(qv.indices, qv.values, strict=True))
    assert weights[term_index("delay")] == 2.0
    assert weights[term_index("carrier")] == 1.0


def test_longer_documents_get_lower_weights_for_the_same_tf() -> None:
    encoder = Bm25Encoder(Tokenizer(), Bm25Params(k1=1.2, b=0.75, avg_doc_len=10))
    short = encoder.document_vector(["refund"] * 1 + ["x"] * 4)
    long = encoder.document_vector(["refund"] * 1 + ["x"] * 40)
    i = short.indices.index(term_index("refund"))
    j = long.indices.index(term_index("refund"))
    assert short.values[i] > long.values[j]


@pytest.mark.parametrize("backend", ["edge", "server"])
def test_engine_applies_lucene_idf_over_the_tenant(
    backend: str, tmp_path: Path, embedder_factory: Callable[[], Embedder]
) -> None:
    """The engine's BM25 score is sum(q * idf * w) with idf = ln(1 + (N - df + .5) / (df + .5))."""
    encoding = EncodingSettings(bm25=Bm25Params(k1=0.9, b=0.4, avg_doc_len=8.0))
    index = (
        HybridIndex.open(tmp_path / "i", embedder=embedder_factory(), encoding=encoding)
        if backend == "edge"
        else HybridIndex.connect(":memory:", "idf", embedder=embedder_factory(), encoding=encoding)
    )
    with index:
        index.upsert(
            EvidenceDocument(tenant_id="acme", evidence_id=f"d{i}", version=1, text=text)
            for i, text in enumerate(CORPUS)
        )
        # Another tenant's documents must not change acme's IDF (tenant-scoped statistics).
        index.upsert(
            EvidenceDocument(tenant_id="other", evidence_id=f"x{i}", version=1, text="refund refund delivery")
            for i in range(20)
        )
        tok = Tokenizer()
        docs = tok.tokenize_many(CORPUS)
        n = len(docs)
        df = Counter(t for d in docs for t in set(d))
        encoder = Bm25Encoder(tok, encoding.bm25)
        for query in QUERIES:
            terms = tok.tokenize(query)
            outcome = index.search(AccessScope("acme"), SearchQuery(query, mode=SearchMode.BM25))
            qv = encoder.query_vector(terms)
            q = dict(zip(qv.indices, qv.values, strict=True))
            idf = {term_index(t): math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in df}
            for hit in outcome.hits:
                d = int(hit.evidence_id[1:])
                dv = encoder.document_vector(docs[d])
                expected = _dot(q, dict(zip(dv.indices, dv.values, strict=True)), idf)
                assert hit.score == pytest.approx(expected, rel=1e-4)
