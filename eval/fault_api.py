"""Fault scenario of the REST API: kill PostgreSQL, then Redis, under load; restart them; audit.

The API (`mnemo-sea serve`, one process for the whole run) runs on a throwaway PostgreSQL and
a throwaway Redis (own temp folder, own ports, loopback only) and qdrant-client's in-process
engine. A few clients run the usual mix (search, record, archive, recover) while the run
steps through phases:

    baseline -> postgres_killing -> postgres_down -> postgres_restarting -> postgres_back
             -> redis_killing -> redis_down -> redis_restarting -> redis_back

PostgreSQL is killed with an immediate shutdown (every backend gone, crash recovery on
restart), Redis with SIGKILL; each comes back on the same port (and, for PostgreSQL, the same
data folder). A call belongs to the phase it was sent in. What must hold:

- while a store is down, calls that need it answer 503 problem+json, never 500, never a
  hang beyond HANG_BOUND_S (the archive's PostgreSQL connect timeout plus a margin);
- once it is back, the same API process (same pid, never restarted) serves again;
- afterwards every acknowledged record recovers byte-exact, and nothing is stored that its
  client was not told was stored (a 503 means nothing was written).

The report gives per phase the 2xx / 503 / other / no-answer counts (also per operation),
the time from the kill to the first 503, the time from the restart to the first success,
the outbox left behind, the audit and `ok`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from mnemo_sea.archive import PG_CONNECT_TIMEOUT_S

from .api_clients import OPERATIONS, AgentClient, Call, Fleet, seed_evidence
from .api_stack import (
    ApiServer,
    StackError,
    Watchdog,
    keep_logs,
    mint_keys,
)
from .throwaway_stores import ThrowawayPostgres, ThrowawayRedis, missing_fault_binaries
from .write_audit import audit_all

# A dead PostgreSQL refuses connections at once; a silent one fails them after the connect
# timeout. Anything slower than that plus a margin is a hang.
HANG_BOUND_S = PG_CONNECT_TIMEOUT_S + 5.0
FAULT_MIX = {"search": 0.30, "record": 0.35, "archive": 0.20, "recover": 0.15}
# A phase lasts `phase_s` and, on a busy machine, longer: until every operation of the mix was
# answered in it at least this often (a bound of PHASE_CAP times `phase_s` only stops a hang), so
# what a phase shows never rests on how much a loaded machine got done in a fixed time.
MIN_CALLS_PER_OP = 2
PHASE_CAP = 8
TENANT = "faults"


class Timeline:
    """Named phases, each starting at a time.monotonic() mark.

    A call belongs to the phase it was sent in, except that a call still in flight when a
    store was killed or restarted belongs to that transition: it saw the event happen.
    """

    TRANSITIONS = ("_killing", "_restarting")

    def __init__(self) -> None:
        self.marks: list[tuple[str, float]] = []

    def mark(self, name: str) -> float:
        now = time.monotonic()
        self.marks.append((name, now))
        return now

    def phase_of(self, sent: float, answered: float) -> str:
        current = self.marks[0][0]
        for name, start in self.marks:
            if sent >= start or (start <= answered and name.endswith(self.TRANSITIONS)):
                current = name
        return current


class ReadyProbe:
    """GET /v1/health/ready every `every_s` on a thread of its own: (sent, answered, status)."""

    def __init__(self, base_url: str, api_key: str, every_s: float = 0.1) -> None:
        self.samples: list[tuple[float, float, int]] = []
        self._http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=HANG_BOUND_S
        )
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ready-probe", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()
            try:
                status = self._http.get("/v1/health/ready").status_code
            except httpx.HTTPError:
                status = 0
            self.samples.append((sent, time.monotonic(), status))
            self._stop.wait(self._every_s)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(HANG_BOUND_S + 5)
        self._http.close()


def _hold(fleet: Fleet, since: float, phase_s: float) -> None:
    """Let the phase begun at `since` run `phase_s`, then until each operation was answered in
    it MIN_CALLS_PER_OP times (or PHASE_CAP times `phase_s` passed)."""
    time.sleep(phase_s)
    deadline = since + PHASE_CAP * phase_s
    while time.monotonic() < deadline:
        now = time.monotonic()
        answered = Counter(
            c.op for c in fleet.calls() if since <= c.started and c.started + c.ms / 1000 <= now
        )
        if all(answered[op] >= MIN_CALLS_PER_OP for op in FAULT_MIX):
            return
        time.sleep(0.1)


def _outage(
    timeline: Timeline,
    fleet: Fleet,
    name: str,
    kill: Callable[[], None],
    start: Callable[[], float],
    phase_s: float,
) -> dict[str, float]:
    """Kill a store, leave it down for a phase, restart it, leave it up for a phase (`_hold`)."""
    t_kill = timeline.mark(f"{name}_killing")
    kill()
    t_down = timeline.mark(f"{name}_down")
    _hold(fleet, t_down, phase_s)
    t_restart = timeline.mark(f"{name}_restarting")
    start()
    t_back = timeline.mark(f"{name}_back")
    _hold(fleet, t_back, phase_s)
    return {"kill": t_kill, "down": t_down, "restart": t_restart, "back": t_back}


def _bucket(call: Call) -> str:
    if call.status == 0:
        return "no_answer"
    if 200 <= call.status < 300:
        return "2xx"
    return "503" if call.status == 503 else "other"


def _phases(timeline: Timeline, calls: list[Call], end: float) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[Call]] = {name: [] for name, _ in timeline.marks}
    for call in calls:
        grouped[timeline.phase_of(call.started, call.started + call.ms / 1000)].append(call)
    bounds = [*(t for _, t in timeline.marks[1:]), end]
    out: dict[str, dict[str, Any]] = {}
    for (name, start), stop in zip(timeline.marks, bounds, strict=True):
        group = grouped[name]
        by_op: dict[str, dict[str, int]] = {}
        for op in OPERATIONS:
            counted = Counter(_bucket(c) for c in group if c.op == op)
            by_op[op] = {k: counted.get(k, 0) for k in ("2xx", "503", "other", "no_answer")}
        totals = Counter(_bucket(c) for c in group)
        out[name] = {
            "duration_s": round(stop - start, 2),
            **{k: totals.get(k, 0) for k in ("2xx", "503", "other", "no_answer")},
            "by_op": by_op,
            "max_ms": round(max((c.ms for c in group), default=0.0), 1),
            "503_without_problem_json": sum(1 for c in group if c.status == 503 and not c.problem_json),
            "other_samples": [f"{c.op} {c.status}: {c.detail}" for c in group if _bucket(c) == "other"][:5],
        }
    return out


def _first_after(samples: list[tuple[float, int]], since: float, pick: Callable[[int], bool]) -> float | None:
    """Seconds from `since` to the first answer after it that `pick` accepts."""
    times = [answered for answered, status in samples if answered >= since and pick(status)]
    return round(min(times) - since, 3) if times else None


def _recovery(
    times: dict[str, float], calls: list[Call], probe: list[tuple[float, float, int]], ops: tuple[str, ...]
) -> dict[str, Any]:
    """When the outage showed (first 503) and when service came back (first success per operation)."""
    answered = [(c.started + c.ms / 1000, c.status, c.op) for c in calls]
    needing = [(t, s) for t, s, op in answered if op in ops]
    first_success: dict[str, float | None] = {}
    for op in ops:
        mine = [(t, s) for t, s, o in answered if o == op and t >= times["restart"]]
        first_success[op] = _first_after(mine, times["back"], lambda s: 200 <= s < 300)
    known = [v for v in first_success.values() if v is not None]
    return {
        "down_for_s": round(times["back"] - times["down"], 2),
        "restart_took_s": round(times["back"] - times["restart"], 2),
        "first_503_after_kill_s": _first_after(needing, times["kill"], lambda s: s == 503),
        "first_success_after_restart_s": min(known) if known else None,
        "every_operation_succeeded_again_after_s": max(known) if len(known) == len(ops) else None,
        "first_success_after_restart_by_op_s": first_success,
        "ready_probe_503_after_kill_s": _first_after(
            [(a, s) for _, a, s in probe], times["kill"], lambda s: s == 503
        ),
        "ready_probe_200_after_restart_s": _first_after(
            [(a, s) for sent, a, s in probe if sent >= times["back"]], times["back"], lambda s: s == 200
        ),
    }


def _outbox(database_url: str) -> dict[str, Any]:
    """What the outbox holds after the run: rows never applied, and rows set aside as poison."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT count(*) FILTER (WHERE done_at IS NULL), "
                    "count(*) FILTER (WHERE done_at IS NULL AND attempts >= 5), count(*) FROM outbox"
                )
            ).one()
            errors = conn.execute(
                text(
                    "SELECT op, entity, attempts, last_error FROM outbox WHERE done_at IS NULL "
                    "ORDER BY id LIMIT 3"
                )
            ).all()
    finally:
        engine.dispose()
    return {
        "rows": int(row[2]),
        "pending": int(row[0]),
        "set_aside_after_max_attempts": int(row[1]),
        "pending_samples": [
            {"op": e.op, "entity": e.entity, "attempts": e.attempts, "last_error": (e.last_error or "")[:300]}
            for e in errors
        ],
    }


def run(
    *,
    clients: int = 4,
    phase_s: float = 4.0,
    embedder: str = "hashing",
    seed_docs: int = 30,
    hard_timeout_s: float | None = None,
    seed: int = 11,
    logs_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the scenario and return a JSON-able report (`ok` says whether every check held).

    Raises StackError when a binary is missing or a process does not start. The hard timeout
    (default: 12 x phase + 4 min) kills the API server and both stores, which ends every call.
    When a check fails, the API, PostgreSQL and Redis logs are kept in `logs_dir` (default: a
    new temp folder) and the report names it.
    """
    missing = missing_fault_binaries()
    if missing:
        raise StackError(f"the fault scenario needs {', '.join(missing)}")
    # Five phases held up to PHASE_CAP times phase_s each, two restarts, the audit.
    bound = hard_timeout_s if hard_timeout_s is not None else 5 * PHASE_CAP * phase_s + 240
    root = Path(tempfile.mkdtemp(prefix="mnemo-faults-"))
    root.chmod(0o755)  # PostgreSQL runs as its own system user when we are root
    (root / "pg").mkdir()
    (root / "redis").mkdir()
    pg = ThrowawayPostgres(root / "pg")
    cache = ThrowawayRedis(root / "redis")
    server: ApiServer | None = None
    began = time.monotonic()
    load_at_start = round(os.getloadavg()[0], 2)

    def kill_everything() -> None:
        if server is not None:
            server.kill()
        cache.kill()
        pg.stop()

    watchdog = Watchdog(bound, kill_everything)
    try:
        with watchdog:
            pg.init()
            pg.start()
            db_url = pg.create_database("mnemo")
            cache.start()
            subjects = [f"agent-{i}" for i in range(clients)]
            keys = mint_keys(db_url, TENANT, [*subjects, "probe"], ["agent"])
            server = ApiServer(
                {
                    "MNEMO_DATABASE_URL": db_url,
                    "MNEMO_QDRANT_URL": ":memory:",
                    "MNEMO_REDIS_URL": cache.url,
                    "MNEMO_REDIS_PREFIX": "faults:",
                    "MNEMO_EMBEDDER": embedder,
                    "MNEMO_SYNC_WRITES": "true",
                },
                root / "api.log",
            )
            server.start()
            pid = server.pid
            seed_evidence(server.base_url, keys[0], seed_docs)
            fleet = Fleet(
                [
                    AgentClient(
                        server.base_url,
                        key,
                        f"faults-{i}",
                        seed=seed * 1000 + i,
                        timeout_s=HANG_BOUND_S + 5,
                        mix=FAULT_MIX,
                    )
                    for i, key in enumerate(keys[:clients])
                ]
            )
            probe = ReadyProbe(server.base_url, keys[-1])
            timeline = Timeline()
            since = timeline.mark("baseline")
            fleet.start()
            probe.start()
            _hold(fleet, since, phase_s)
            outages = {
                "postgres": _outage(timeline, fleet, "postgres", pg.kill, pg.start, phase_s),
                "redis": _outage(timeline, fleet, "redis", cache.kill, cache.start, phase_s),
            }
            stuck = fleet.stop(HANG_BOUND_S + 10)
            end = time.monotonic()
            probe.stop()
            same_process = server.alive() and server.pid == pid
            calls = fleet.calls()
            crashes = fleet.crashes()
            writes = audit_all(fleet.clients, server.base_url)
            outbox = _outbox(db_url)
    except (httpx.HTTPError, StackError) as e:
        if watchdog.expired:
            raise StackError(f"the fault run overstayed its hard timeout of {bound:.0f} s") from e
        raise
    finally:
        if server is not None:
            server.stop()
        cache.stop()
        pg.stop()
        log = server.log_problems() if server is not None else {}
        logs = keep_logs([root / "api.log", pg.log, cache.log], "faults", logs_dir)
        shutil.rmtree(root, ignore_errors=True)
        failure = sys.exc_info()[1]
        if failure is not None:
            failure.add_note(f"the logs of the run are kept in {logs}")

    phases = _phases(timeline, calls, end)
    recovery = {
        "postgres": _recovery(outages["postgres"], calls, probe.samples, OPERATIONS),
        "redis": _recovery(outages["redis"], calls, probe.samples, ("search",)),
    }
    checks = {
        "only_2xx_or_503": all(p["other"] == 0 for p in phases.values()),
        "every_503_is_problem_json": all(p["503_without_problem_json"] == 0 for p in phases.values()),
        "no_call_unanswered_or_beyond_bound": all(p["no_answer"] == 0 for p in phases.values())
        and all(c.ms <= HANG_BOUND_S * 1000 for c in calls)
        and stuck == 0,
        "baseline_all_2xx": phases["baseline"]["503"] == 0 and phases["baseline"]["2xx"] > 0,
        "postgres_down_answers_503": phases["postgres_down"]["503"] > 0
        and phases["postgres_down"]["2xx"] == 0,
        "redis_down_search_answers_503": phases["redis_down"]["by_op"]["search"]["503"] > 0
        and phases["redis_down"]["by_op"]["search"]["2xx"] == 0,
        "postgres_back_serves_again": _serves(phases["postgres_back"]),
        "redis_back_serves_again": _serves(phases["redis_back"]),
        "same_api_process_throughout": same_process,
        "no_lost_or_half_written_writes": writes.clean,
        "within_hard_timeout": not watchdog.expired,
        "no_client_crashed": not crashes,
    }
    report = {
        "benchmark": "api_faults",
        "config": {
            "clients": clients,
            "phase_s": phase_s,
            "embedder": embedder,
            "mix": FAULT_MIX,
            "hang_bound_s": HANG_BOUND_S,
            "postgres_kill": "pg_ctl stop -m immediate (fsync=off, synchronous_commit=on)",
            "redis_kill": "SIGKILL (no persistence: it restarts empty)",
            "machine_cpus": os.cpu_count(),
            # Other work on the machine shares its cores with the server and the clients.
            "load_avg_1m_at_start": load_at_start,
        },
        "phases": {name: phases[name] for name, _ in timeline.marks},
        "recovery": recovery,
        "api_pid_unchanged": same_process,
        "client_crashes": crashes,
        "writes": writes.to_dict(),
        "outbox_after_run": outbox,
        "server_log": log,
        "checks": checks,
        "logs_kept_in": None if all(checks.values()) else str(logs),
        "wall_s": round(time.monotonic() - began, 1),
        "ok": all(checks.values()),
    }
    if report["ok"] and logs_dir is None:
        shutil.rmtree(logs, ignore_errors=True)
    return report


def _serves(phase: dict[str, Any]) -> bool:
    """Every operation that ran in the phase succeeded at least once, and nothing answered 503."""
    ran = [op for op, counts in phase["by_op"].items() if sum(counts.values()) > 0]
    return bool(ran) and phase["503"] == 0 and all(phase["by_op"][op]["2xx"] > 0 for op in ran)
