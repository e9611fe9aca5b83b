"""`mnemo-sea bench engine-ingest`: the bare engine's ingest rate against Qdrant Edge alone, same run.

`register(bench_app)` adds the command to the `bench` group; the benchmark itself is
mnemo_sea.eval.bench_engine_ingest.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mnemo_sea.cli.output import emit, guard


def bench_engine_ingest(
    n: Annotated[
        int, typer.Option("--n", min=1, help="synthetic documents to ingest (the issue: 10000)")
    ] = 10_000,
    batch_size: Annotated[
        int, typer.Option(min=1, max=1_000, help="documents per upsert of the batches workload, each flushed")
    ] = 500,
    rounds: Annotated[
        int, typer.Option(min=1, help="alternating rounds of each side (medians reported)")
    ] = 3,
    tenants: Annotated[int, typer.Option(min=1, help="tenants the documents are spread over")] = 100,
    profile: Annotated[bool, typer.Option("--profile", help="add a cProfile of one more engine run")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Docs/s of HybridIndex.upsert + flush (precomputed vectors, then the hashing embedder) and
    points/s of Qdrant Edge alone writing the same points, alternating; edge_share is their ratio.
    Two workloads: every document in one call then one flush (the target's), and batches each
    flushed."""
    from mnemo_sea.eval.bench_engine_ingest import run

    with guard():
        report = run(n, batch_size=batch_size, rounds=rounds, tenants=tenants, profile=profile)
    emit(report, as_json)


def register(bench_app: typer.Typer) -> None:
    """Add `bench engine-ingest` to the `bench` command group."""
    bench_app.command("engine-ingest")(bench_engine_ingest)
