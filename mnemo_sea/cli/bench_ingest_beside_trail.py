"""`mnemo-sea bench ingest-beside-trail`: evidence writes while the trail indexes a large
original, against the same writes alone, same run.

`register(bench_app)` adds the command to the `bench` group; the benchmark itself is
mnemo_sea.eval.bench_ingest_beside_trail.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mnemo_sea.cli.output import emit, guard


def bench_ingest_beside_trail(
    batches: Annotated[int, typer.Option(min=1, help="batches a side, written then ingested")] = 3,
    batch_size: Annotated[int, typer.Option(min=1, max=1_000, help="records a batch")] = 1_000,
    original_bytes: Annotated[
        int, typer.Option(min=1_000, help="size of the original whose trail runs beside the writes")
    ] = 2_000_000,
    rounds: Annotated[
        int, typer.Option(min=1, help="interleaved rounds of each side (medians reported)")
    ] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Seconds of the archive's evidence writes and of Mnemo.ingest, alone and while the
    indexer's trail indexes an archived original on its own thread (hashing embedder); the
    slowdown is beside / alone."""
    from mnemo_sea.eval.bench_ingest_beside_trail import run

    with guard():
        report = run(
            batches_per_side=batches, batch_size=batch_size, original_bytes=original_bytes, rounds=rounds
        )
    emit(report, as_json)


def register(bench_app: typer.Typer) -> None:
    """Add `bench ingest-beside-trail` to the `bench` command group."""
    bench_app.command("ingest-beside-trail")(bench_ingest_beside_trail)
