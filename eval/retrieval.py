"""Retrieval quality on a BEIR-layout dataset: our BM25 leg, dense leg, hybrid, and rank_bm25.

    python -m mnemo_sea.eval.retrieval --dataset ../shared/data/scifact --split test --json
    mnemo-sea eval retrieval --dataset ../shared/data/scifact --split test --json
    mnemo-sea eval retrieval --dataset ../shared/data/scifact --modes hybrid --min-score 0.55

The corpus is ingested into a fresh embedded index (a temporary directory unless --index-dir)
under one tenant, exactly as an application would; every query then runs through
HybridIndex.search in each mode, keeping the best chunk per document. BM25's avgdl is fitted on
the corpus' chunks before ingestion, as a bulk load does. rank_bm25 (BM25Okapi, same tokenizer,
same k1 and b, whole documents) is the reference, reported with its top-10 overlap with our leg.
With --min-score, the hybrid and dense modes run again with that relevance floor
(`SearchQuery.min_score`), and `floor` reports, per mode, nDCG@10 with and without it and the
share of irrelevant top-10 hits it left out (queries with one relevant document: metrics.floor_effect).

Progress goes to stderr; the report (a dict, JSON with --json) to stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mnemo_sea.retrieval import (
    AccessScope,
    Bm25Params,
    ChunkingPolicy,
    Embedder,
    EmbeddingCache,
    EncodingSettings,
    EvidenceDocument,
    FusionSettings,
    HybridIndex,
    OnnxEmbedder,
    SearchMode,
    SearchQuery,
    SearchSettings,
    SentenceTransformerEmbedder,
    SqliteEmbeddingCache,
    Tokenizer,
    fit_avg_doc_len,
)

from .beir import BeirDataset, load_beir
from .metrics import evaluate, floor_effect, mean_overlap
from .reference import RankBm25Reference

TENANT = "eval"
DEPTH = 100


class Bars:
    """Progress bars on stderr, or nothing; `task(name, total)` returns an `advance(n)` callback."""

    def __init__(self, enabled: bool) -> None:
        self._progress = (
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
            )
            if enabled
            else None
        )

    def __enter__(self) -> Bars:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def task(self, name: str, total: int) -> Callable[[int], None]:
        progress = self._progress
        if progress is None:
            return lambda n: None
        task_id = progress.add_task(name, total=total)
        return lambda n: progress.advance(task_id, n)


def fitted_encoding(dataset: BeirDataset, encoding: EncodingSettings | None) -> EncodingSettings:
    """`encoding` with BM25's avgdl fitted on the dataset's chunks, as a bulk load does."""
    base = encoding or EncodingSettings()
    avgdl = fit_avg_doc_len(dataset.doc_texts, base)
    return replace(base, bm25=replace(base.bm25, avg_doc_len=round(avgdl, 3)))


def ingest_dataset(
    index: HybridIndex, dataset: BeirDataset, advance: Callable[[int], None]
) -> dict[str, Any]:
    """Upsert every non-empty document under the eval tenant, then optimize and flush."""
    documents = [
        EvidenceDocument(tenant_id=TENANT, evidence_id=doc_id, version=1, text=text, source=dataset.name)
        for doc_id, text in zip(dataset.doc_ids, dataset.doc_texts, strict=True)
        if text.strip()
    ]
    t = time.perf_counter()
    upserted = index.upsert(documents, progress=lambda p: advance(len(p.written)))
    index.optimize()
    index.flush()
    return {"chunks": upserted.chunks, "seconds": round(time.perf_counter() - t, 1)}


def rank_queries(
    index: HybridIndex,
    queries: dict[str, str],
    mode: SearchMode,
    advance: Callable[[int], None],
    min_score: float | None = None,
) -> tuple[dict[str, list[str]], list[float]]:
    """Each query's top DEPTH documents (best chunk per document; with `min_score`, only those
    the floor keeps) and each search's latency in ms."""
    scope = AccessScope(TENANT)
    ranked: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid, text in queries.items():
        query = SearchQuery(text, limit=DEPTH, mode=mode, one_hit_per_evidence=True, min_score=min_score)
        outcome = index.search(scope, query)
        if not outcome.ok:
            raise RuntimeError(f"query {qid} ({mode.value}): {outcome.status.value}: {outcome.reason}")
        ranked[qid] = [h.evidence_id for h in outcome.hits]
        latencies.append(outcome.timings_ms.get("total", 0.0))
        advance(1)
    return ranked, latencies


def run_evaluation(
    dataset: BeirDataset,
    *,
    embedder: Embedder | None = None,
    encoding: EncodingSettings | None = None,
    fusion: FusionSettings | None = None,
    modes: Sequence[SearchMode] = (SearchMode.BM25, SearchMode.DENSE, SearchMode.HYBRID),
    reference: bool = True,
    index_dir: Path | None = None,
    cache: EmbeddingCache | None = None,
    show_progress: bool = True,
    min_score: float | None = None,
) -> dict[str, Any]:
    """Ingest `dataset` into a fresh index and evaluate each mode (see the module docstring)."""
    if min_score is not None:
        SearchQuery("probe", min_score=min_score)  # InvalidQuery for a bad floor, before any ingest
    started = time.perf_counter()
    encoding = fitted_encoding(dataset, encoding)
    # Explicit fusion settings apply to every query; the defaults keep the Han-script variant.
    search = (
        SearchSettings(candidates=DEPTH)
        if fusion is None
        else SearchSettings(fusion=fusion, fusion_han=None, candidates=DEPTH)
    )
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "split": dataset.split,
        "documents": len(dataset.doc_ids),
        "queries": len(dataset.queries),
        "settings": {
            "tokenizer": encoding.tokenizer.fingerprint(),
            "bm25": {"k1": encoding.bm25.k1, "b": encoding.bm25.b, "avg_doc_len": encoding.bm25.avg_doc_len},
            "chunking": {
                "max_chars": encoding.chunking.max_chars,
                "overlap_chars": encoding.chunking.overlap_chars,
            },
            "fusion": vars(search.fusion),
            "fusion_han_queries": None if search.fusion_han is None else vars(search.fusion_han),
        },
        "results": {},
    }
    with ExitStack() as stack:
        directory = index_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mnemo-eval-")))
        bars = stack.enter_context(Bars(show_progress))
        index = HybridIndex.open(
            directory,
            embedder=embedder or OnnxEmbedder(),
            encoding=encoding,
            search_settings=search,
            cache=cache,
        )
        stack.callback(index.close)
        report["ingest"] = ingest_dataset(index, dataset, bars.task("ingest", len(dataset.doc_ids)))
        rankings: dict[str, dict[str, list[str]]] = {}
        for mode in modes:
            ranked, latencies = rank_queries(
                index, dataset.queries, mode, bars.task(f"search {mode.value}", len(dataset.queries))
            )
            rankings[mode.value] = ranked
            report["results"][mode.value] = {
                **evaluate(dataset.qrels, ranked),
                "search_p50_ms": round(statistics.median(latencies), 2),
            }
            if min_score is not None and mode is not SearchMode.BM25:  # bm25 computes no similarity
                floored, _ = rank_queries(
                    index,
                    dataset.queries,
                    mode,
                    bars.task(f"search {mode.value} min_score {min_score}", len(dataset.queries)),
                    min_score,
                )
                report.setdefault("floor", {})[mode.value] = {
                    "min_score": min_score,
                    **floor_effect(dataset.qrels, ranked, floored),
                }

        if reference:
            tokenizer = Tokenizer(encoding.tokenizer)
            ref = RankBm25Reference(
                dataset.doc_ids, tokenizer.tokenize_many(dataset.doc_texts), encoding.bm25.k1, encoding.bm25.b
            )
            ref_ranked = ref.rank_all(
                {q: tokenizer.tokenize(t) for q, t in dataset.queries.items()},
                DEPTH,
                progress=bars.task("rank_bm25", len(dataset.queries)),
            )
            report["results"]["rank_bm25"] = evaluate(dataset.qrels, ref_ranked)
            if SearchMode.BM25.value in rankings:
                report["bm25_overlap@10_vs_rank_bm25"] = mean_overlap(
                    rankings[SearchMode.BM25.value], ref_ranked
                )
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mnemo_sea.eval.retrieval", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--dataset", required=True, type=Path, help="a BEIR-layout folder")
    parser.add_argument("--split", default="test", help="qrels/<split>.tsv to evaluate (default: test)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--modes", default="bm25,dense,hybrid", help="comma-separated subset of bm25,dense,hybrid"
    )
    parser.add_argument("--no-reference", action="store_true", help="skip the rank_bm25 reference")
    parser.add_argument("--model", default=None, help="sentence-transformers model path or cached name")
    parser.add_argument("--k1", type=float, default=None)
    parser.add_argument("--b", type=float, default=None)
    parser.add_argument(
        "--max-chars", type=int, default=None, help="chunk budget (default: the index default)"
    )
    parser.add_argument("--rrf-k", type=float, default=None)
    parser.add_argument("--bm25-weight", type=float, default=None)
    parser.add_argument("--dense-weight", type=float, default=None)
    parser.add_argument("--index-dir", type=Path, default=None, help="keep the index here (must be new)")
    parser.add_argument(
        "--embedding-cache",
        type=Path,
        default=None,
        help="an SQLite embedding cache to reuse across runs (default: a fresh one inside the index)",
    )
    parser.add_argument(
        "--min-score",
        type=float,
        default=None,
        help="also run hybrid and dense with this relevance floor and report what it changes",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def settings_from_options(
    *,
    k1: float | None = None,
    b: float | None = None,
    max_chars: int | None = None,
    rrf_k: float | None = None,
    bm25_weight: float | None = None,
    dense_weight: float | None = None,
) -> tuple[EncodingSettings, FusionSettings | None]:
    """Encoding and fusion settings: the index defaults, overridden by whatever options were given.

    Fusion is None (the index defaults, Han-script variant included) unless an RRF option is given.
    """
    base = EncodingSettings()
    bm25 = Bm25Params(k1=base.bm25.k1 if k1 is None else k1, b=base.bm25.b if b is None else b)
    chunking = base.chunking if max_chars is None else ChunkingPolicy(max_chars=max_chars)
    fusion = None
    if (rrf_k, bm25_weight, dense_weight) != (None, None, None):
        default = FusionSettings()
        fusion = FusionSettings(
            k=default.k if rrf_k is None else rrf_k,
            bm25_weight=default.bm25_weight if bm25_weight is None else bm25_weight,
            dense_weight=default.dense_weight if dense_weight is None else dense_weight,
        )
    return replace(base, bm25=bm25, chunking=chunking), fusion


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        dataset = load_beir(args.dataset, args.split)
        modes = [SearchMode(m.strip()) for m in args.modes.split(",") if m.strip()]
    except Exception as exc:  # noqa: BLE001 - a command line reports any input error in one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    encoding, fusion = settings_from_options(
        k1=args.k1,
        b=args.b,
        max_chars=args.max_chars,
        rrf_k=args.rrf_k,
        bm25_weight=args.bm25_weight,
        dense_weight=args.dense_weight,
    )
    report = run_evaluation(
        dataset,
        embedder=SentenceTransformerEmbedder(args.model) if args.model else None,
        encoding=encoding,
        fusion=fusion,
        modes=modes,
        reference=not args.no_reference,
        index_dir=args.index_dir,
        cache=SqliteEmbeddingCache(args.embedding_cache) if args.embedding_cache else None,
        show_progress=not args.quiet,
        min_score=args.min_score,
    )
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for mode, metrics in report["results"].items():
            print(f"{mode:10s} " + "  ".join(f"{k}={v}" for k, v in metrics.items()))
        for mode, effect in report.get("floor", {}).items():
            print(f"{mode:10s} floor " + "  ".join(f"{k}={v}" for k, v in effect.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
