"""`mnemo-sea bench mnemo-ingest`: `Mnemo.ingest` throughput against the bare engine, same run.

`register(bench_app)` adds the command to the `bench` group; the benchmark itself is
mnemo_sea.eval.bench_mnemo_ingest.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mnemo_sea.cli.output import emit, guard


def bench_mnemo_ingest(
    n: Annotated[
        int, typer.Option("--n", min=1, help="synthetic documents to ingest (the issue: 10000)")
    ] = 2_000,
    batch_size: Annotated[int, typer.Option(min=1, max=1_000, help="documents per Mnemo.ingest call")] = 500,
    rounds: Annotated[
        int, typer.Option(min=1, help="interleaved rounds of each side (medians reported)")
    ] = 3,
    profile: Annotated[bool, typer.Option("--profile", help="add a cProfile of one more Mnemo run")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Docs/s of Mnemo.ingest until searchable (archive + outbox + index, hashing embedder) and of
    HybridIndex.upsert of the same documents, interleaved; the ratio is the facade's share."""
    from mnemo_sea.eval.bench_mnemo_ingest import run

    with guard():
        report = run(n, batch_size=batch_size, rounds=rounds, profile=profile)
    emit(report, as_json)


def register(bench_app: typer.Typer) -> None:
    """Add `bench mnemo-ingest` to the `bench` command group."""
    bench_app.command("mnemo-ingest")(bench_mnemo_ingest)
