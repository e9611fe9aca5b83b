"""`mnemo-sea bench api` (load) and `mnemo-sea bench faults` (store outages) against a real API process.

`register(bench_app)` adds both to the `bench` group. Each prints its report (JSON with
`--json`, else a short summary) and exits 0 when every check held, 1 when a check failed
(an error answer, a lost or half-written write, a 500, a hang), 6 when the stack could not
be set up (PostgreSQL or Redis unreachable, a binary missing, the server not starting, the
hard timeout fired).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NoReturn

import typer

from mnemo_sea.system.outcomes import EXIT_PROBLEMS, EXIT_UNAVAILABLE

Embedder = Literal["hashing", "default"]
EmbedderOption = Annotated[
    Embedder,
    typer.Option(help="hashing: deterministic and fast (the load is the subject); default: the real model"),
]
AsJson = Annotated[bool, typer.Option("--json", help="print the whole report as JSON")]


def _finish(report: dict[str, Any], as_json: bool, summary: list[str]) -> None:
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        for line in summary:
            typer.echo(line)
    if not report["ok"]:
        raise typer.Exit(code=EXIT_PROBLEMS)


def _setup_failed(e: Exception) -> NoReturn:
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    for line in [first, *getattr(e, "__notes__", [])]:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code=EXIT_UNAVAILABLE)


def bench_api(
    clients: Annotated[int, typer.Option(min=1, max=256, help="concurrent clients, a session each")] = 32,
    duration: Annotated[float, typer.Option(min=1, help="seconds of load")] = 60.0,
    mix: Annotated[
        Literal["mixed", "search"],
        typer.Option(help="mixed: search, record, archive and recover; search: searches only"),
    ] = "mixed",
    queries: Annotated[
        Literal["repeating", "unique"],
        typer.Option(
            help="repeating: two words of a small vocabulary, so most searches are answered from "
            "the result cache (the report counts them); unique: each search also has a word of "
            "its own, so every one runs the engine"
        ),
    ] = "repeating",
    baseline: Annotated[
        float,
        typer.Option(
            min=0,
            help="seconds of the same workload run afterwards in process on Mnemo, over the same "
            "stores, for REST / in-process ratios (0: none; --index edge only: the memory "
            "engine's points die with the API process)",
        ),
    ] = 10.0,
    embedder: EmbedderOption = "hashing",
    pg_admin_url: Annotated[
        str | None,
        typer.Option(
            help="PostgreSQL server to create the scratch database on (default: MNEMO_TEST_PG or local)"
        ),
    ] = None,
    redis_url: Annotated[
        str | None,
        typer.Option(help="Redis to use under a scratch prefix (default: MNEMO_TEST_REDIS or local)"),
    ] = None,
    seed_docs: Annotated[int, typer.Option(min=0, help="knowledge records stored before the load")] = 200,
    index: Annotated[
        Literal["memory", "edge"],
        typer.Option(
            help="memory: qdrant-client's in-process engine (the server code path); edge: Qdrant Edge"
        ),
    ] = "memory",
    timeout: Annotated[
        float | None, typer.Option(min=10, help="hard timeout in seconds (default: 3 x duration + 300)")
    ] = None,
    flood: Annotated[
        int,
        typer.Option(
            min=0,
            max=256,
            help="clients of a second tenant that floods (searches for 100 hits, each new, without "
            "pause) during the second half of the run; the report's `fairness` gives the first "
            "tenant's p99 during the flood over its p99 before it (target <= 5x; 0: no flood)",
        ),
    ] = 0,
    as_json: AsJson = False,
) -> None:
    """Load the REST API with concurrent agents (search, record, archive, recover; or searches
    only), then check that every acknowledged record recovers byte-exact, and run the same
    workload in process on Mnemo as the baseline. Reports p50/p95/p99 and req/s per operation,
    the CPU time per request of the API process and of the load generator, and the REST /
    in-process p50 ratios. One API process; loopback only; cleans up after itself."""
    import httpx

    from mnemo_sea.eval import load_api
    from mnemo_sea.eval.api_stack import StackError

    try:
        report = load_api.run(
            clients=clients,
            mix=mix,
            baseline_s=baseline,
            duration_s=duration,
            embedder=embedder,
            pg_admin_url=pg_admin_url or load_api.DEFAULT_PG_ADMIN_URL,
            redis_url=redis_url or load_api.DEFAULT_REDIS_URL,
            seed_docs=seed_docs,
            index=index,
            hard_timeout_s=timeout,
            queries=queries,
            flood_clients=flood,
        )
    except (StackError, httpx.HTTPError) as e:
        _setup_failed(e)
    searches = report["searches"]
    lines = [
        f"{op:8} n={s['count']:<6} errors={s['errors']:<4} p50={s['p50_ms']}ms p95={s['p95_ms']}ms "
        f"p99={s['p99_ms']}ms {s['throughput_per_s']}/s"
        for op, s in report["operations"].items()
        if s["count"]
    ]
    writes = report["writes"]
    cpu = report["cpu"]
    if searches["answered"]:
        cached, answered = searches["from_cache"], searches["answered"]
        lines.append(f"searches answered from the result cache: {cached}/{answered}")
    lines.append(
        f"cpu per request: API process {cpu['server_ms_per_request']} ms, "
        f"load generator {cpu['load_generator_ms_per_request']} ms"
    )
    if report["baseline"] is not None:
        lines += [
            f"in process {op:8} p50={s['p50_ms']}ms p95={s['p95_ms']}ms {s['throughput_per_s']}/s"
            for op, s in report["baseline"]["operations"].items()
        ]
        lines.append(f"REST / in-process p50: {report['rest_over_facade_p50']}")
    lines.append(
        f"total {report['total']['ok']}/{report['total']['count']} ok, "
        f"{report['total']['throughput_per_s']}/s over {report['elapsed_s']} s with {clients} clients"
    )
    lines.append(
        f"writes: {writes['verified_records']}/{writes['acknowledged_records']} acknowledged records "
        f"verified, lost {writes['lost']}, mismatched {writes['mismatched']}"
    )
    fairness = report["fairness"]
    if fairness is not None:
        lines.append(
            f"under a {flood}-client flood of another tenant: p99 / unloaded p99 {fairness['p99_ratio']} "
            f"(target <= {fairness['target_p99_ratio']}); the flood: {fairness['flood']['statuses']}"
        )
    lines.append("PASS" if report["ok"] else "FAIL")
    _finish(report, as_json, lines)


def bench_faults(
    clients: Annotated[int, typer.Option(min=1, max=64, help="concurrent clients")] = 4,
    phase: Annotated[
        float,
        typer.Option(
            min=1, help="seconds per phase (up, down, back), longer until each operation answered twice"
        ),
    ] = 4.0,
    embedder: EmbedderOption = "hashing",
    timeout: Annotated[
        float | None, typer.Option(min=30, help="hard timeout in seconds (default: 40 x phase + 240)")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Kill PostgreSQL, then Redis, under load (throwaway servers of their own), restart them,
    and check: 503 problem+json while down (no 500, no hang), the same API process serving
    again, no lost and no half-written write."""
    import httpx

    from mnemo_sea.eval import fault_api
    from mnemo_sea.eval.api_stack import StackError

    try:
        report = fault_api.run(clients=clients, phase_s=phase, embedder=embedder, hard_timeout_s=timeout)
    except (StackError, httpx.HTTPError) as e:
        _setup_failed(e)
    lines = [
        f"{name:20} 2xx={p['2xx']:<5} 503={p['503']:<5} other={p['other']:<3} no_answer={p['no_answer']}"
        for name, p in report["phases"].items()
    ]
    for store, r in report["recovery"].items():
        lines.append(
            f"{store}: first 503 {r['first_503_after_kill_s']} s after the kill, first success "
            f"{r['first_success_after_restart_s']} s after the restart"
        )
    lines += [f"{'ok  ' if held else 'FAIL'} {check}" for check, held in report["checks"].items()]
    lines.append("PASS" if report["ok"] else "FAIL")
    _finish(report, as_json, lines)


def register(bench_app: typer.Typer) -> None:
    """Add `bench api` and `bench faults` to the `bench` command group."""
    bench_app.command("api")(bench_api)
    bench_app.command("faults")(bench_faults)
