"""The `mnemo-sea` command line.

User mistakes print one clear line and exit non-zero; they never show a traceback. The exit
codes are every command's (mnemo_sea.cli.output, from the one error table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import CliError, OneLineErrorsGroup, emit, guard

app = typer.Typer(
    cls=OneLineErrorsGroup, no_args_is_help=True, help="mnemo-sea: evidence archive and hybrid retrieval."
)
eval_app = typer.Typer(no_args_is_help=True, help="Quality evaluations (retrieval, citations).")
bench_app = typer.Typer(no_args_is_help=True, help="Performance benchmarks; JSON on stdout.")
app.add_typer(eval_app, name="eval")
app.add_typer(bench_app, name="bench")


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("mnemo-sea")
        except PackageNotFoundError:  # run from a source tree that was never installed
            installed = "(not installed: run from the source tree)"
        typer.echo(f"mnemo-sea {installed}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit"),
    ] = False,
) -> None:
    """mnemo-sea: evidence archive and hybrid retrieval."""


@bench_app.command("archive")
def bench_archive(
    db: Annotated[
        str | None, typer.Option(help="database URL; default: a fresh temporary SQLite file")
    ] = None,
    batches: Annotated[int, typer.Option(min=1, help="archive batches of 26 results (2.2 MB) to time")] = 30,
    recoveries: Annotated[int, typer.Option(min=1, help="recoveries of the 10 KB original to time")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Time archiving a 26-result, 2.2 MB batch and recovering 10 KB and 2 MB originals."""
    from mnemo_sea.eval.bench_archive import run

    with guard():
        report = run(db, batches=batches, recoveries=recoveries)
    emit(report, as_json)


@bench_app.command("curation")
def bench_curation(
    archives: Annotated[int, typer.Option(min=1, help="archive calls of a 2 MB original to time")] = 15,
    recalls: Annotated[int, typer.Option(min=1, help="recalls (and excerpt recoveries) to time")] = 10,
    embedder: Annotated[str, typer.Option(help="default | hashing")] = "default",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Time what an agent waits for through the facade: archiving a 2 MB original (its pages
    indexed behind the call), recall and excerpt recovery; and the trail's time to searchable."""
    from mnemo_sea.eval.bench_curation import run

    with guard():
        report = run(archives=archives, recalls=recalls, embedder=embedder)
    emit(report, as_json)


@bench_app.command("context")
def bench_context(
    repeats: Annotated[int, typer.Option(min=1, help="warm assemblies to time")] = 20,
    seed: Annotated[int, typer.Option(help="seed of the scripted session")] = 7,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Stub overhead in tokens, and assembly time at the paper's session size (26 results, 2.25 M chars)."""
    from mnemo_sea.eval.bench_context import run

    with guard():
        report = run(repeats=repeats, seed=seed)
    emit(report, as_json)


@app.command("demo")
def demo(
    data_dir: Annotated[
        Path | None, typer.Option(help="keep the data here; default: a fresh temp folder")
    ] = None,
) -> None:
    """Walk the archive scenarios end to end on the embedded default; ends with PASS or FAIL."""
    from mnemo_sea.demo.walkthrough import main as run_demo

    raise typer.Exit(code=run_demo(data_dir))


@app.command("worker")
def worker(
    poll: Annotated[float, typer.Option(min=0.01, help="seconds to wait when the outbox is empty")] = 0.5,
    heartbeat: Annotated[
        Path | None, typer.Option(help="touch this file after each pass (for a container health check)")
    ] = None,
    embedder: Annotated[
        str | None, typer.Option(help="default | hashing (tests/offline smoke only); default: MNEMO_EMBEDDER")
    ] = None,
) -> None:
    """Server mode: apply the outbox to the index and caches until SIGTERM or Ctrl-C.

    Reads MNEMO_DATABASE_URL, MNEMO_QDRANT_URL, MNEMO_REDIS_URL, MNEMO_EMBEDDER (see
    mnemo_sea.system.wiring.settings); run as many workers as you like against one database. Also deletes
    expired memory facts every MNEMO_TTL_PURGE_SECONDS (default 300; 0: never). Prints its
    counts as JSON when it stops.
    """
    import signal
    import threading

    from mnemo_sea.system.mnemo import Mnemo
    from mnemo_sea.system.opening import settings_embedder
    from mnemo_sea.system.wiring.settings import MnemoSettings
    from mnemo_sea.system.worker import run_worker

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        settings = MnemoSettings() if embedder is None else MnemoSettings(embedder=embedder)  # type: ignore[arg-type]
    except ValueError as e:
        with guard():
            raise CliError(" ".join(str(e).split())) from None
    # Exit codes as every other command's, by the one error table (mnemo_sea.system.outcomes):
    # bad settings are a usage error, a store down at start unavailable, and an error the drain
    # does not wait out (a corrupt store, say) is answered by its category.
    with guard():
        mnemo = Mnemo.from_settings(settings, embedder=settings_embedder(settings), sync_writes=False)
        try:
            stats = run_worker(
                mnemo, stop, poll_seconds=poll, heartbeat=heartbeat, purge_seconds=settings.ttl_purge_seconds
            )
        finally:
            mnemo.close()
    emit(stats.__dict__, True)


def main() -> None:
    app()


from .retrieval import register as _register_retrieval  # noqa: E402 - needs eval_app/bench_app above

_register_retrieval(eval_app, bench_app)

from . import checks, deletion, evidence, knowledge, memory, sessions  # noqa: E402 - need the apps above

for _group in (knowledge, sessions, evidence, memory, deletion):
    _group.register(app)
checks.register(app, eval_app)

from .service import register as _register_service  # noqa: E402 - needs app above

_register_service(app)

from .console import register as _register_console  # noqa: E402 - needs app above

_register_console(app)

from .mcp import register as _register_mcp  # noqa: E402 - needs app above

_register_mcp(app)

from . import (  # noqa: E402 - they need bench_app above
    bench_api,
    bench_console,
    bench_embedded_write,
    bench_engine_ingest,
    bench_ingest_beside_trail,
    bench_mnemo_ingest,
    bench_original_chunks,
    bench_query_embedding,
    bench_search_path,
)

for _bench in (
    bench_api,
    bench_embedded_write,
    bench_engine_ingest,
    bench_mnemo_ingest,
    bench_search_path,
    bench_query_embedding,
    bench_console,
    bench_original_chunks,
    bench_ingest_beside_trail,
):
    _bench.register(bench_app)

from .curation import register as _register_curation  # noqa: E402 - needs eval_app above

_register_curation(eval_app)
