"""Our BM25 leg on a real corpus, held against rank_bm25 (the exact reference) and BEIR's figures.

No model is involved: the BM25 leg alone is the subject, so the dense side gets the fake
embedder. Documents are indexed whole (one chunk each) so both systems score the same units.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mnemo_sea.eval.beir import load_beir
from mnemo_sea.eval.retrieval import run_evaluation
from mnemo_sea.retrieval import ChunkingPolicy, Embedder, EncodingSettings, SearchMode


def test_scifact_bm25_leg_ranks_like_rank_bm25_and_reaches_beir_quality(
    scifact_dir: Path, embedder_factory: Callable[[], Embedder]
) -> None:
    data = load_beir(scifact_dir, "test")
    report = run_evaluation(
        data,
        embedder=embedder_factory(),
        encoding=EncodingSettings(chunking=ChunkingPolicy(max_chars=20_000)),
        modes=[SearchMode.BM25],
        show_progress=False,
    )
    assert report["ingest"]["chunks"] == len(data.doc_ids)  # whole documents, as rank_bm25 sees them
    print("SciFact BM25:", report["results"], "overlap@10:", report["bm25_overlap@10_vs_rank_bm25"])
    assert report["bm25_overlap@10_vs_rank_bm25"] >= 0.9
    assert report["results"]["bm25"]["ndcg@10"] >= 0.67  # Anserini's BM25 flat: 0.679
    assert report["results"]["rank_bm25"]["ndcg@10"] >= 0.66  # the reference itself is sane
