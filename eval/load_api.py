"""Load benchmark of the REST API: N concurrent agents for D seconds, then a zero-lost-writes audit.

The API runs as a real `mnemo-sea serve` process on a loopback port, on a fresh database of
the PostgreSQL server at `pg_admin_url` (dropped afterwards), a key prefix of its own on the
Redis at `redis_url` (deleted afterwards) and, for the index, either qdrant-client's in-process
engine (`index="memory"`: the server code path, no Qdrant server being needed) or an embedded
Qdrant Edge index (`index="edge"`, MNEMO_INDEX_PATH). Writes are synchronous
(MNEMO_SYNC_WRITES=true): an archive returns once its note is indexed. Each client has a key
and a session of its own and mixes search, record, archive and recover (see `api_clients`).

Read the latencies with the set-up in mind: the server is one Python process and the load
generator shares the machine's cores with it. qdrant-client's in-process engine evaluates its
tenant filters in pure Python point by point, so with it a search costs far more CPU than on a
Qdrant server and grows with the index (archived notes are indexed as the run goes); Edge is
the Qdrant engine itself, in process.

The report gives, per operation, the count, errors, p50/p95/p99 latency of the successful
calls and the throughput; then the audit: every acknowledged record still there and
byte-exact (sha256), nothing stored that was not acknowledged. `ok` is false on any error,
any audit finding, or when the hard timeout fired.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from mnemo_sea.archive import EvidenceInput

from .api_clients import (
    DEFAULT_MIX,
    QUERY_KINDS,
    AgentClient,
    Call,
    Fleet,
    FloodClient,
    latency_summary,
    searches_report,
    seed_evidence,
    seed_items,
)
from .api_stack import (
    BENCH_RECEIPT_KEY,
    ApiServer,
    StackError,
    Watchdog,
    keep_logs,
    mint_keys,
    postgres_problem,
    redis_problem,
    scratch_database,
    scratch_redis_prefix,
)
from .facade_baseline import run_facade
from .write_audit import audit_all

DEFAULT_PG_ADMIN_URL = os.environ.get("MNEMO_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
DEFAULT_REDIS_URL = os.environ.get("MNEMO_TEST_REDIS", "redis://127.0.0.1:6379/0")
TENANT = "bench"
FLOOD_TENANT = "bench-flood"
# The promise of fairness: under one tenant's flood, the others' p99 stays within this many
# times their p99 without it.
FAIRNESS_TARGET = 5.0
BASELINE = "the same workload, one agent, in this process on Mnemo, on a fresh stack seeded alike"
MIXES: dict[str, dict[str, float]] = {"mixed": DEFAULT_MIX, "search": {"search": 1.0}}
INDEXES = {
    "memory": "qdrant-client :memory: (in the API process; the Qdrant-server code path)",
    "edge": "Qdrant Edge (embedded, in the API process; MNEMO_INDEX_PATH)",
}


def index_env(index: str, tmp: Path) -> dict[str, str]:
    if index == "memory":
        return {"MNEMO_QDRANT_URL": ":memory:"}
    if index == "edge":
        return {"MNEMO_INDEX_PATH": str(tmp / "index")}
    raise ValueError(f"index must be one of {', '.join(INDEXES)}, got {index!r}")


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) a process has used so far; None where /proc is missing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _per_request_ms(cpu_s: float | None, requests: int) -> float | None:
    return None if cpu_s is None or requests == 0 else round(cpu_s * 1000 / requests, 2)


def _facade_baseline(
    *,
    pg_admin_url: str,
    redis_url: str,
    index: str,
    embedder: str,
    seed_docs: int,
    mix: dict[str, float],
    duration_s: float,
    seed: int,
    queries: str,
) -> dict[str, Any]:
    """The same workload in this process on `Mnemo`, on a fresh stack like the API's: a scratch
    database, Redis prefix and index of its own, seeded with the same records. (Reopening the
    API's own Edge index would not do: a reopened index flushes several times slower.)"""
    from mnemo_sea.system.opening import open_mnemo
    from mnemo_sea.system.wiring.settings import MnemoSettings

    with (
        tempfile.TemporaryDirectory(prefix="mnemo-load-baseline-") as tmp,
        scratch_database(pg_admin_url) as db_url,
        scratch_redis_prefix(redis_url, "load-baseline") as prefix,
    ):
        (key,) = mint_keys(db_url, TENANT, ["facade-0"], ["agent"])
        given = {
            "database_url": db_url,
            **{k.removeprefix("MNEMO_").lower(): v for k, v in index_env(index, Path(tmp)).items()},
            "redis_url": redis_url,
            "redis_prefix": prefix,
            "embedder": embedder,
            "sync_writes": True,
            "receipt_key": BENCH_RECEIPT_KEY,
        }
        # Exactly these stores, whatever MNEMO_* this process itself was started with.
        mnemo = open_mnemo(MnemoSettings.model_validate({"data_dir": None, "qdrant_url": None, **given}))
        try:
            principal = mnemo.archive.authenticate(key)
            items = [
                EvidenceInput(body=i["body"], source=i["source"], evidence_id=i["evidence_id"])
                for i in seed_items(seed_docs)
            ]
            for start in range(0, len(items), 50):
                mnemo.ingest(principal, items[start : start + 50])
            load = os.getloadavg()[0]
            cpu_before = time.process_time()
            report = run_facade(
                mnemo, key, "facade-0", mix=mix, duration_s=duration_s, seed=seed, queries=queries
            )
            calls = sum(op["count"] for op in report["operations"].values())
            report["cpu_ms_per_call"] = _per_request_ms(time.process_time() - cpu_before, calls)
            report["load_avg_1m_at_start"] = round(load, 2)
            return report
        finally:
            mnemo.close()


def _ratios(operations: dict[str, Any], baseline: dict[str, Any] | None) -> dict[str, float] | None:
    """REST p50 / in-process p50 per operation both ran."""
    if baseline is None:
        return None
    out: dict[str, float] = {}
    for op, facade in baseline["operations"].items():
        rest = operations.get(op)
        if rest and rest["ok"] and facade["p50_ms"] > 0:
            out[op] = round(rest["p50_ms"] / facade["p50_ms"], 2)
    return out


def _fairness(
    calls: list[Call], flood_calls: list[Call], flood_began: float, phase_s: float
) -> dict[str, Any]:
    """The measured tenant's latencies before the flood began and during it, per operation, and
    the p99 ratios (flooded / unloaded); the flood's own answers by status."""
    before = latency_summary([c for c in calls if c.started < flood_began], phase_s)
    during = latency_summary([c for c in calls if c.started >= flood_began], phase_s)
    ratios = {
        op: round(during[op]["p99_ms"] / before[op]["p99_ms"], 2)
        for op in before
        if before[op]["ok"] and during[op]["ok"] and before[op]["p99_ms"] > 0
    }
    worst = max(ratios.values(), default=None)
    flood = latency_summary(flood_calls, phase_s)["search"]
    return {
        "what": "the measured tenant's p99 with one other tenant flooding / its p99 before the flood",
        "target_p99_ratio": FAIRNESS_TARGET,
        "unloaded": {op: {k: s[k] for k in ("count", "p50_ms", "p99_ms")} for op, s in before.items()},
        "flooded": {op: {k: s[k] for k in ("count", "p50_ms", "p99_ms")} for op, s in during.items()},
        "p99_ratio": ratios,
        "worst_p99_ratio": worst,
        "within_target": worst is not None and worst <= FAIRNESS_TARGET,
        "flood": {k: flood[k] for k in ("count", "ok", "statuses", "p50_ms", "p99_ms", "throughput_per_s")},
    }


def run(
    *,
    clients: int = 32,
    mix: str = "mixed",
    baseline_s: float = 10.0,
    duration_s: float = 60.0,
    embedder: str = "hashing",
    pg_admin_url: str = DEFAULT_PG_ADMIN_URL,
    redis_url: str = DEFAULT_REDIS_URL,
    seed_docs: int = 200,
    index: str = "memory",
    request_timeout_s: float = 30.0,
    hard_timeout_s: float | None = None,
    seed: int = 7,
    queries: str = "repeating",
    flood_clients: int = 0,
) -> dict[str, Any]:
    """Run the load and the audit; returns a JSON-able report (`ok` says whether it passed).

    With `flood_clients` > 0, a second tenant floods (api_clients.FloodClient, that many at
    once) during the second half of the run: the report's `fairness` compares the first
    tenant's p99 before the flood and during it, and `ok` needs every ratio within
    FAIRNESS_TARGET.

    `mix` is `mixed` (search, record, archive, recover) or `search` (searches only);
    `queries` is `repeating` or `unique` (api_clients.QUERY_KINDS: whether searches can be
    answered from the result cache; the report counts those that were). With
    `baseline_s` > 0 the same workload then runs for that long in this process on `Mnemo`
    itself, over the same stores, after the API process stopped (`baseline`).

    Raises StackError when PostgreSQL or Redis is unreachable or the server does not start.
    The hard timeout (default: 3 x duration + 5 min) kills the server, which ends every call.
    """
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {', '.join(MIXES)}, got {mix!r}")
    if queries not in QUERY_KINDS:
        raise ValueError(f"queries must be one of {', '.join(QUERY_KINDS)}, got {queries!r}")
    weights = MIXES[mix]
    for what, url, problem in (
        ("PostgreSQL", pg_admin_url, postgres_problem(pg_admin_url)),
        ("Redis", redis_url, redis_problem(redis_url)),
    ):
        if problem is not None:
            raise StackError(f"{what} at {url} is unreachable: {problem}")
    bound = hard_timeout_s if hard_timeout_s is not None else 3 * duration_s + 300
    began = time.monotonic()
    load_at_start = round(os.getloadavg()[0], 2)
    with (
        tempfile.TemporaryDirectory(prefix="mnemo-load-") as tmp,
        scratch_database(pg_admin_url) as db_url,
        scratch_redis_prefix(redis_url, "load") as prefix,
    ):
        subjects = [f"agent-{i}" for i in range(clients)]
        keys = mint_keys(db_url, TENANT, subjects, ["agent"])
        flood_keys = mint_keys(db_url, FLOOD_TENANT, [f"flood-{i}" for i in range(flood_clients)], ["agent"])
        server_env = {
            "MNEMO_DATABASE_URL": db_url,
            **index_env(index, Path(tmp)),
            "MNEMO_REDIS_URL": redis_url,
            "MNEMO_REDIS_PREFIX": prefix,
            "MNEMO_EMBEDDER": embedder,
            "MNEMO_SYNC_WRITES": "true",
        }
        server = ApiServer(server_env, Path(tmp) / "api.log")
        watchdog = Watchdog(bound, server.kill)
        try:
            with watchdog:
                startup_s = server.start()
                seed_evidence(server.base_url, keys[0], seed_docs)
                fleet = Fleet(
                    [
                        AgentClient(
                            server.base_url,
                            key,
                            f"load-{i}",
                            seed=seed * 1000 + i,
                            timeout_s=request_timeout_s,
                            mix=weights,
                            queries=queries,
                        )
                        for i, key in enumerate(keys)
                    ]
                )
                flood_fleet = Fleet(
                    [
                        FloodClient(server.base_url, key, f"flood-{i}", seed=i, timeout_s=request_timeout_s)
                        for i, key in enumerate(flood_keys)
                    ]
                )
                if flood_keys:  # the flooding tenant's data: as much to search as the other's
                    seed_evidence(server.base_url, flood_keys[0], seed_docs)
                load_at_load = round(os.getloadavg()[0], 2)
                server_cpu_before = process_cpu_s(server.pid)
                client_cpu_before = time.process_time()
                started = time.monotonic()
                fleet.start()
                flood_began = started
                if flood_keys:
                    time.sleep(duration_s / 2)
                    flood_began = time.monotonic()
                    flood_fleet.start()
                    time.sleep(duration_s / 2)
                else:
                    time.sleep(duration_s)
                stuck = fleet.stop(request_timeout_s + 10)
                flood_fleet.stop(request_timeout_s + 10)
                elapsed = time.monotonic() - started
                client_cpu_s = time.process_time() - client_cpu_before
                server_cpu_after = process_cpu_s(server.pid)
                server_cpu_s = (
                    None
                    if server_cpu_before is None or server_cpu_after is None
                    else server_cpu_after - server_cpu_before
                )
                calls = fleet.calls()
                crashes = fleet.crashes()
                writes = audit_all(fleet.clients, server.base_url)
        except (httpx.HTTPError, StackError) as e:
            if watchdog.expired:
                raise StackError(f"the load run overstayed its hard timeout of {bound:.0f} s") from e
            raise
        finally:
            server.stop()
        log = server.log_problems()
        logs = keep_logs([server.log_path], "load")
    baseline = (
        _facade_baseline(
            pg_admin_url=pg_admin_url,
            redis_url=redis_url,
            index=index,
            embedder=embedder,
            seed_docs=seed_docs,
            mix=weights,
            duration_s=baseline_s,
            seed=seed,
            queries=queries,
        )
        if baseline_s > 0 and not watchdog.expired
        else None
    )
    operations = latency_summary(calls, elapsed)
    errors = sum(op["errors"] for op in operations.values())
    count = sum(op["count"] for op in operations.values())
    error_samples = [f"{c.op} {c.status}: {c.detail}" for c in calls if not c.ok][:10]
    report: dict[str, Any] = {
        "benchmark": "api_load",
        "config": {
            "clients": clients,
            "duration_s": duration_s,
            "embedder": embedder,
            "mix": mix,
            "mix_weights": weights,
            "queries": queries,
            "seed_docs": seed_docs,
            "sync_writes": True,
            "index": INDEXES[index],
            "machine_cpus": os.cpu_count(),
            # Other work on the machine shares its cores with the server and the clients.
            "load_avg_1m_at_start": load_at_start,
            "load_avg_1m_when_the_load_began": load_at_load,
            # How the figures were served: one `mnemo-sea serve` process (one uvicorn worker).
            "api_processes": 1,
        },
        "startup_s": round(startup_s, 2),
        "elapsed_s": round(elapsed, 2),
        "operations": operations,
        "searches": searches_report(
            sum(c.searches_answered for c in fleet.clients), sum(c.searches_from_cache for c in fleet.clients)
        ),
        "total": {
            "count": count,
            "ok": count - errors,
            "errors": errors,
            "throughput_per_s": round((count - errors) / elapsed, 1),
        },
        "cpu": {
            # CPU time per request over the load phase: the API process, and this process (the
            # clients), which share the machine's cores with it.
            "server_ms_per_request": _per_request_ms(server_cpu_s, count),
            "load_generator_ms_per_request": _per_request_ms(client_cpu_s, count),
            "server_cores_busy": None if server_cpu_s is None else round(server_cpu_s / elapsed, 2),
            "load_generator_cores_busy": round(client_cpu_s / elapsed, 2),
        },
        "baseline": None
        if baseline is None
        else {"what": "the same workload in process on Mnemo", **baseline},
        "rest_over_facade_p50": _ratios(operations, baseline),
        "errors_total": errors,
        "error_samples": error_samples,
        "clients_stuck": stuck,
        "client_crashes": crashes,
        "writes": writes.to_dict(),
        "server_log": log,
        "hard_timeout_s": bound,
        "timed_out": watchdog.expired,
        "wall_s": round(time.monotonic() - began, 1),
    }
    report["fairness"] = (
        _fairness(calls, flood_fleet.calls(), flood_began, duration_s / 2) if flood_keys else None
    )
    report["config"]["flood_clients"] = flood_clients
    fair = report["fairness"] is None or report["fairness"]["within_target"]
    report["ok"] = (
        errors == 0 and writes.clean and stuck == 0 and not crashes and not watchdog.expired and fair
    )
    report["logs_kept_in"] = None if report["ok"] else str(logs)
    if report["ok"]:
        shutil.rmtree(logs, ignore_errors=True)
    return report
