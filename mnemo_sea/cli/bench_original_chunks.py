"""`mnemo-sea bench original-chunks`: pages of an archived original indexed by the trail against
the engine's chunk rate on the same text, same run.

`register(bench_app)` adds the command to the `bench` group; the benchmark itself is
mnemo_sea.eval.bench_original_chunks.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mnemo_sea.cli.output import emit, guard


def bench_original_chunks(
    sizes: Annotated[
        str, typer.Option(help="original sizes in bytes, comma-separated (the issue: a 2 MB original)")
    ] = "200000,2000000",
    rounds: Annotated[
        int,
        typer.Option(
            min=1,
            help="interleaved rounds of each side, at least (medians reported); a small original runs"
            " more, until each side's runs add up to about --min-seconds",
        ),
    ] = 3,
    min_seconds: Annotated[
        float, typer.Option(min=0.0, help="timed seconds each side's runs of a size add up to, about")
    ] = 1.0,
    profile: Annotated[
        bool, typer.Option("--profile", help="add a cProfile of one more trail run of the largest size")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Chunks/s of an archived original's pages indexed by the trail (archive_results until every
    page is indexed and flushed, hashing embedder) and of HybridIndex.upsert of the same pages,
    interleaved; the ratio is the trail's share of the engine's rate."""
    from mnemo_sea.eval.bench_original_chunks import run

    with guard():
        parsed = tuple(int(part) for part in sizes.split(",") if part.strip())
        report = run(parsed, rounds=rounds, min_seconds=min_seconds, profile=profile)
    emit(report, as_json)


def register(bench_app: typer.Typer) -> None:
    """Add `bench original-chunks` to the `bench` command group."""
    bench_app.command("original-chunks")(bench_original_chunks)
