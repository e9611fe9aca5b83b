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
    sweep: Annotated[
        bool,
        typer.Option(
            "--sweep",
            help="sweep batch sizes x tenants instead (issue 31; --n and --batch-size are then unused)",
        ),
    ] = False,
    batch_sizes: Annotated[
        str, typer.Option(help="with --sweep: comma-separated batch sizes")
    ] = "1,10,100,1000",
    tenants: Annotated[
        str, typer.Option(help="with --sweep: comma-separated tenant counts (calls rotate over them)")
    ] = "1,100",
    scale: Annotated[float, typer.Option(min=0.01, help="with --sweep: documents per cell times this")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Docs/s of Mnemo.ingest until searchable (archive + outbox + index, hashing embedder) and of
    HybridIndex.upsert of the same documents, interleaved; the ratio is the facade's share.
    With --sweep, every batch size x tenant count, against the engine flushing per batch and once
    (mnemo_sea.eval.bench_ingest_sweep), with a pass/fail per cell."""
    sizes, tenant_counts = _counts(batch_sizes), _counts(tenants)  # a usage error, before any work
    with guard():
        if sweep:
            from mnemo_sea.eval.bench_ingest_sweep import run_sweep

            report = run_sweep(sizes, tenant_counts, rounds=rounds, scale=scale)
        else:
            from mnemo_sea.eval.bench_mnemo_ingest import run

            report = run(n, batch_size=batch_size, rounds=rounds, profile=profile)
    emit(report, as_json)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"not a list of whole numbers: {text!r}") from None
    if not counts or min(counts) < 1 or max(counts) > 1_000:
        raise typer.BadParameter(f"each must be 1 to 1000: {text!r}")
    return counts


def register(bench_app: typer.Typer) -> None:
    """Add `bench mnemo-ingest` to the `bench` command group."""
    bench_app.command("mnemo-ingest")(bench_mnemo_ingest)
