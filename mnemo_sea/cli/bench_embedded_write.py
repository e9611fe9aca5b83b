"""`mnemo-sea bench embedded-write`: one embedded record / archive against the bare engine write.

`register(bench_app)` adds the command to the `bench` group; the benchmark itself is
mnemo_sea.eval.bench_embedded_write. JSON on stdout with --json; exit 1 when the target is missed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import JsonOpt, emit, guarded
from mnemo_sea.system.outcomes import EXIT_PROBLEMS


def bench_embedded_write(
    writes: Annotated[int, typer.Option(min=1, help="writes of each kind, interleaved")] = 200,
    cli_runs: Annotated[
        int, typer.Option(min=0, help="CLI processes of each kind (record, archive, import only); 0: none")
    ] = 3,
    folder: Annotated[Path | None, typer.Option(help="where the temporary data folders go")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Mnemo.record / Mnemo.archive_results p50/p95 (group commit) vs HybridIndex.upsert + flush,
    the same archive followed by sync(), and CLI process wall times; JSON."""
    from mnemo_sea.eval.bench_embedded_write import run

    report = run(writes, cli_runs=cli_runs, folder=folder)
    emit(report, as_json)
    if not report["meets_target"]:
        raise typer.Exit(code=EXIT_PROBLEMS)


def register(bench_app: typer.Typer) -> None:
    """Add `bench embedded-write` to the `bench` command group."""
    bench_app.command("embedded-write")(guarded(bench_embedded_write))
