"""`mnemo-sea bench search-path`: `Mnemo.search` against the bare engine call, same index, same queries.

`register(bench_app)` adds it to the `bench` group; the report (eval/bench_search_path.py) is
JSON on stdout with --json, progress on stderr; exit 1 when the ratio misses its target.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import JsonOpt, emit, guarded
from mnemo_sea.system.outcomes import EXIT_PROBLEMS


def bench_search_path(
    n: Annotated[
        list[int] | None,
        typer.Option("--n", min=10, help="documents over 100 tenants; repeat for several sizes"),
    ] = None,
    queries: Annotated[int, typer.Option(min=1, help="distinct queries per round")] = 100,
    rounds: Annotated[int, typer.Option(min=1, help="interleaved rounds over the queries")] = 5,
    limit: Annotated[int, typer.Option(min=1, max=100, help="hits per search")] = 10,
    profile: Annotated[bool, typer.Option(help="add a cProfile of uncached facade searches")] = True,
    profile_searches: Annotated[int, typer.Option(min=1, help="searches profiled")] = 200,
    folder: Annotated[Path | None, typer.Option(help="where the temporary data folder goes")] = None,
    busy: Annotated[
        int, typer.Option(min=0, max=64, help="CPU-bound processes beside the timed rounds (stopped after)")
    ] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Mnemo.search (uncached, and cached apart) vs HybridIndex.search: p50/p95 and the ratio, JSON.

    By default at the sizes the target names, 10,000 and 100,000 documents, each in its own
    index; the run is ok when every size meets the target."""
    from mnemo_sea.eval.bench_search_path import DEFAULT_SIZES, TARGETS, run

    sizes = [
        run(
            size,
            queries=queries,
            rounds=rounds,
            limit=limit,
            profile=profile,
            profile_searches=profile_searches,
            folder=folder,
            progress=lambda msg: typer.echo(msg, err=True),
            busy=busy,
        )
        for size in (n or DEFAULT_SIZES)
    ]
    report = {
        "benchmark": "search-path",
        "targets": TARGETS,
        "busy": busy,
        "ratio_p50": {str(r["docs"]): r["ratio_p50"] for r in sizes},
        "sizes": sizes,
        "ok": all(r["ok"] for r in sizes),
    }
    emit(report, as_json)
    if not report["ok"]:
        raise typer.Exit(code=EXIT_PROBLEMS)


def register(bench_app: typer.Typer) -> None:
    bench_app.command("search-path")(guarded(bench_search_path))
