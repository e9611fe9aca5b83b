"""CLI commands of the retrieval layer: `eval retrieval`, `bench search`, `bench ingest`.

`register(eval_app, bench_app)` adds them to the `mnemo-sea` command line. Reports go to
stdout (JSON with --json), progress to stderr; a failure prints one line and exits with the
code of mnemo_sea.system.outcomes (a missing dataset or a bad option value 2, a locked index 6),
never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import CliError, emit, guarded


def eval_retrieval(
    dataset: Annotated[Path, typer.Option(help="a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/)")],
    split: Annotated[str, typer.Option(help="qrels/<split>.tsv to evaluate")] = "test",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    modes: Annotated[
        str, typer.Option(help="comma-separated subset of bm25,dense,hybrid")
    ] = "bm25,dense,hybrid",
    reference: Annotated[bool, typer.Option(help="also run rank_bm25 as the reference")] = True,
    model: Annotated[str | None, typer.Option(help="sentence-transformers model path or cached name")] = None,
    k1: Annotated[float | None, typer.Option(help="BM25 k1 (default: the index default)")] = None,
    b: Annotated[float | None, typer.Option(help="BM25 b (default: the index default)")] = None,
    max_chars: Annotated[int | None, typer.Option(help="chunk budget in characters")] = None,
    rrf_k: Annotated[float | None, typer.Option(help="RRF k")] = None,
    bm25_weight: Annotated[float | None, typer.Option(help="RRF weight of the BM25 leg")] = None,
    dense_weight: Annotated[float | None, typer.Option(help="RRF weight of the dense leg")] = None,
    embedding_cache: Annotated[
        Path | None, typer.Option(help="an SQLite embedding cache to reuse across runs")
    ] = None,
    min_score: Annotated[
        float | None,
        typer.Option(help="also run hybrid and dense with this relevance floor and report what it changes"),
    ] = None,
    quiet: Annotated[bool, typer.Option(help="no progress bars")] = False,
) -> None:
    """nDCG@10 and Recall@100 of our BM25 leg, dense leg and hybrid, and of rank_bm25."""
    from mnemo_sea.eval.beir import DatasetError, load_beir
    from mnemo_sea.eval.retrieval import run_evaluation, settings_from_options
    from mnemo_sea.retrieval import (
        SearchMode,
        SentenceTransformerEmbedder,
        SqliteEmbeddingCache,
    )

    try:
        data = load_beir(dataset, split)
        chosen = [SearchMode(m.strip()) for m in modes.split(",") if m.strip()]
        encoding, fusion = settings_from_options(
            k1=k1, b=b, max_chars=max_chars, rrf_k=rrf_k, bm25_weight=bm25_weight, dense_weight=dense_weight
        )
        report = run_evaluation(
            data,
            embedder=SentenceTransformerEmbedder(model) if model else None,
            encoding=encoding,
            fusion=fusion,
            modes=chosen,
            reference=reference,
            cache=SqliteEmbeddingCache(embedding_cache) if embedding_cache else None,
            show_progress=not quiet,
            min_score=min_score,
        )
    except (DatasetError, ValueError) as exc:
        raise CliError(str(exc)) from None
    emit(report, as_json)


def bench_search(
    n: Annotated[int, typer.Option("--n", min=1_000, help="synthetic chunks")] = 100_000,
    tenants: Annotated[int, typer.Option(min=1, help="tenants the chunks are spread over")] = 100,
    queries: Annotated[int, typer.Option(min=10, help="timed queries")] = 200,
    alternative: Annotated[
        bool | None,
        typer.Option(help="also time rank_bm25 + numpy + RRF + post-filter (default: only up to 200k)"),
    ] = None,
    embed_queries: Annotated[bool, typer.Option(help="time query embedding with the real model")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Tenant-filtered hybrid top-10 latency over N chunks in 100 tenants, against the common recipe."""
    from mnemo_sea.eval.bench_search import run

    report = run(n, tenants=tenants, queries=queries, alternative=alternative, embed_queries=embed_queries)
    emit(report, as_json)


def bench_ingest(
    n: Annotated[int, typer.Option("--n", min=10, help="documents")] = 1_000,
    rounds: Annotated[
        int, typer.Option(min=1, help="alternating raw/ours runs; the best of each counts")
    ] = 3,
    dataset: Annotated[
        Path | None, typer.Option(help="take documents from this BEIR folder (default: synthetic text)")
    ] = None,
    embedder: Annotated[
        str,
        typer.Option(
            help="torch: SentenceTransformer.encode vs HybridIndex.upsert, with re-ingestion; "
            "onnx: the default OnnxEmbedder vs HybridIndex.upsert and Mnemo.ingest (try --n 200 --rounds 2)"
        ),
    ] = "torch",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Ingestion chunks/s against the model's own encode rate (and, with torch, re-ingestion)."""
    from mnemo_sea.eval.beir import DatasetError

    if embedder == "onnx":
        from mnemo_sea.eval.bench_onnx_ingest import run as run_onnx

        emit(run_onnx(n, rounds=rounds), as_json)
        return
    if embedder != "torch":
        raise CliError(f"--embedder is torch or onnx, not {embedder!r}")
    from mnemo_sea.eval.bench_ingest import run

    try:
        report = run(n, dataset=dataset, rounds=rounds)
    except DatasetError as exc:
        raise CliError(str(exc)) from None
    emit(report, as_json)


def eval_floor(
    dataset: Annotated[Path, typer.Option(help="a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/)")],
    calibration: Annotated[
        Path,
        typer.Option(
            help="judgments of other queries to choose the floor on: a BEIR qrels .tsv, or SciFact's "
            "claims (claims_train.csv, or the zip holding it)"
        ),
    ],
    split: Annotated[str, typer.Option(help="qrels/<split>.tsv to judge the chosen floor on")] = "test",
    max_ndcg_loss: Annotated[
        float, typer.Option(min=0.0, help="target: nDCG@10 falls by at most this")
    ] = 0.005,
    min_dropped: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="target: at least this share of irrelevant hits left out")
    ] = 0.5,
    embedding_cache: Annotated[
        Path | None, typer.Option(help="an SQLite embedding cache to reuse across runs")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    quiet: Annotated[bool, typer.Option(help="no progress bars")] = False,
) -> None:
    """Choose a relevance floor on calibration queries and judge it on a split (hybrid search);
    exit 1 when the chosen floor misses a target there."""
    from mnemo_sea.eval.beir import DatasetError, load_beir
    from mnemo_sea.eval.floor_calibration import calibration_set, run_floor_calibration
    from mnemo_sea.retrieval import SqliteEmbeddingCache

    try:
        data = load_beir(dataset, split)
        queries, qrels = calibration_set(dataset, calibration)
        report = run_floor_calibration(
            data,
            queries,
            qrels,
            cache=SqliteEmbeddingCache(embedding_cache) if embedding_cache else None,
            max_ndcg_loss=max_ndcg_loss,
            min_dropped=min_dropped,
            show_progress=not quiet,
        )
    except DatasetError as exc:
        raise CliError(str(exc)) from None
    emit(report, as_json)
    if not report["meets"]:
        raise typer.Exit(1)


def register(eval_app: typer.Typer, bench_app: typer.Typer) -> None:
    """Add the retrieval commands to the `eval` and `bench` command groups."""
    eval_app.command("retrieval")(guarded(eval_retrieval))
    eval_app.command("floor")(guarded(eval_floor))
    bench_app.command("search")(guarded(bench_search))
    bench_app.command("ingest")(guarded(bench_ingest))
