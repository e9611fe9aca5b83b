"""`mnemo-sea bench query-embedding`: single-query latency and queries/s of the real model (JSON with --json).

`register(bench_app)` adds it to the `bench` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import JsonOpt, emit, guarded


def bench_query_embedding(
    queries: Annotated[int, typer.Option(min=2, help="distinct queries, half English, half Chinese")] = 100,
    rounds: Annotated[int, typer.Option(min=1, help="interleaved rounds; medians are reported")] = 2,
    concurrency: Annotated[list[int] | None, typer.Option(help="threads for queries/s (repeatable)")] = None,
    seconds: Annotated[float, typer.Option(min=0.1, help="seconds per throughput run")] = 1.0,
    documents: Annotated[
        int, typer.Option(min=0, help="SciFact chunks for documents/s, torch vs ONNX (0: skip)")
    ] = 256,
    data: Annotated[
        Path, typer.Option(help="folder with scifact/ and kuake_qtr/ (synthetic queries when absent)")
    ] = Path("../shared/data"),
    as_json: JsonOpt = False,
) -> None:
    """Time one query's embedding: the old encode_query path against the torch forward pass, ONNX
    Runtime (the default, 1 and 2 threads), the query cache and the micro-batcher, in the same run;
    cosine of every candidate's vectors; documents/s of torch and ONNX on the same chunks."""
    from mnemo_sea.eval.bench_query_embedding import run

    levels = concurrency or [1, 8]
    report = run(
        queries=queries,
        rounds=rounds,
        concurrency=levels,
        seconds=seconds,
        documents=documents,
        data_dir=data,
    )
    emit(report, as_json)


def register(bench_app: typer.Typer) -> None:
    bench_app.command("query-embedding")(guarded(bench_query_embedding))
