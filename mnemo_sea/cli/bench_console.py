"""`mnemo-sea bench console`: the console's pages on a 10,000-result session, first paint as a
headless Chromium measures it (issue 29).

`register(bench_app)` adds it to the `bench` group; the benchmark is mnemo_sea.eval.bench_console.
JSON on stdout with --json (a table otherwise), progress on stderr; exit 1 when a targeted page's
first-paint p50 misses 300 ms or a page did not load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import CliError, JsonOpt, emit, guarded
from mnemo_sea.system.outcomes import EXIT_PROBLEMS, EXIT_UNAVAILABLE


def bench_console(
    results: Annotated[int, typer.Option(min=100, help="results in the session (at least 100)")] = 10_000,
    loads: Annotated[int, typer.Option(min=1, help="loads of each page, interleaved")] = 10,
    folder: Annotated[Path | None, typer.Option(help="where the temporary data folder goes")] = None,
    as_json: JsonOpt = False,
) -> None:
    """First contentful paint (p50, max) and server time of the sessions list, a session's first
    and last timeline pages, a 20 KB result and the context page, each against the sign-in page
    timed the same way; target p50 <= 300 ms for the list and timeline pages."""
    from mnemo_sea.eval.bench_console import run
    from mnemo_sea.eval.browser import browser_problem

    problem = browser_problem()
    if problem is not None:
        raise CliError(f"no browser to measure with: {problem}", EXIT_UNAVAILABLE)
    report = run(results, loads=loads, folder=folder, progress=lambda msg: typer.echo(msg, err=True))
    emit(report, as_json)
    if not report["ok"]:
        raise typer.Exit(code=EXIT_PROBLEMS)


def register(bench_app: typer.Typer) -> None:
    """Add `bench console` to the `bench` command group."""
    bench_app.command("console")(guarded(bench_console))
