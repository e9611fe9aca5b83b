"""Choose RRF's k and the leg weights on a tuning split, reproducibly.

    python -m mnemo_sea.eval.fusion_sweep --dataset ../shared/data/kuake_qtr --split train --json

Ingests the dataset once, runs each leg once per query (top 100 documents), then fuses the two
ranked lists offline with weighted_rrf (the same function the index uses) for every point of
the grid, and reports nDCG@10 per point, best first. Fusing document lists offline equals the
index's hybrid mode when each document is one chunk, and approximates it otherwise.

Tune on a split you do not report (KUAKE-QTR has `train`); SciFact ships only `test`, so a
sweep there is a sensitivity analysis, not a way to pick defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemo_sea.retrieval import (
    FusionSettings,
    HybridIndex,
    OnnxEmbedder,
    SearchMode,
    SearchSettings,
    SqliteEmbeddingCache,
    weighted_rrf,
)

from .beir import load_beir
from .metrics import evaluate
from .retrieval import DEPTH, Bars, fitted_encoding, ingest_dataset, rank_queries, settings_from_options

K_GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 100.0)
WEIGHT_GRID = (0.5, 0.67, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)  # bm25 weight; the dense weight stays 1


def fuse(
    bm25: dict[str, list[str]], dense: dict[str, list[str]], settings: FusionSettings
) -> dict[str, list[str]]:
    weights = {"bm25": settings.bm25_weight, "dense": settings.dense_weight}
    return {
        q: [
            doc for doc, _ in weighted_rrf({"bm25": bm25[q], "dense": dense.get(q, [])}, weights, settings.k)
        ][:DEPTH]
        for q in bm25
    }


def sweep(
    dataset_dir: Path,
    split: str,
    *,
    max_chars: int | None = None,
    cache: Path | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    data = load_beir(dataset_dir, split)
    encoding, _ = settings_from_options(max_chars=max_chars)
    encoding = fitted_encoding(data, encoding)
    with (
        tempfile.TemporaryDirectory(prefix="mnemo-sweep-") as tmp,
        Bars(show_progress) as bars,
        HybridIndex.open(
            Path(tmp),
            embedder=OnnxEmbedder(),  # the default embedder
            encoding=encoding,
            search_settings=SearchSettings(candidates=DEPTH),
            cache=SqliteEmbeddingCache(cache) if cache else None,
        ) as index,
    ):
        ingest_dataset(index, data, bars.task("ingest", len(data.doc_ids)))
        legs = {
            mode: rank_queries(index, data.queries, mode, bars.task(mode.value, len(data.queries)))[0]
            for mode in (SearchMode.BM25, SearchMode.DENSE)
        }
    grid = []
    for k in K_GRID:
        for w in WEIGHT_GRID:
            settings = FusionSettings(k=k, bm25_weight=w, dense_weight=1.0)
            fused = fuse(legs[SearchMode.BM25], legs[SearchMode.DENSE], settings)
            grid.append({"k": k, "bm25_weight": w, "dense_weight": 1.0, **evaluate(data.qrels, fused)})
    grid.sort(key=lambda row: -row["ndcg@10"])
    return {
        "dataset": data.name,
        "split": split,
        "queries": len(data.queries),
        "legs": {mode.value: evaluate(data.qrels, ranked) for mode, ranked in legs.items()},
        "default": next(r for r in grid if r["k"] == FusionSettings().k and r["bm25_weight"] == 1.0),
        "grid": grid,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mnemo_sea.eval.fusion_sweep", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--dataset", required=True, type=Path)
    parser.add_argument("--split", required=True)
    parser.add_argument("--max-chars", type=int, default=None)
    parser.add_argument("--embedding-cache", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        report = sweep(
            args.dataset,
            args.split,
            max_chars=args.max_chars,
            cache=args.embedding_cache,
            show_progress=not args.quiet,
        )
    except Exception as exc:  # noqa: BLE001 - a command line reports any input error in one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for row in report["grid"][:10]:
            print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
