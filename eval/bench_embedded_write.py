"""Benchmark: one embedded write (record, archive) against the bare engine write (issue 13, row 3).

In one process, on one temporary data folder (`Mnemo.open`, SQLite archive + Qdrant Edge, the
hashing embedder, so the model is not the subject), interleaved write by write:

- `record`: `Mnemo.record` of one tool result (archive only: a result is indexed once archived);
- `archive`: `Mnemo.archive_results` of that result with a note: the SQL commit with its outbox
  rows, the note indexed (searchable when the call returns), the flush left to the group
  commit (mnemo_sea/system/projection/indexer.py), so a share of the calls pays the flush for the group;
- `archive_synced`: the same write followed by `Mnemo.sync()`, which flushes: what every
  archive cost before the group commit (one full flush per write);
- `engine_upsert_flush`: `HybridIndex.upsert` of one document into a second embedded index plus
  its `flush()`: the bare engine's durable single write, the baseline of the ratios;
- `engine_upsert`: the same upsert without the flush.

Reported: p50/p95 per side in ms, `ratio_archive` = archive p50 / engine_upsert_flush p50, and
the target (record and archive p50 <= 50 ms). Then, unless `cli_runs` is 0, the wall time of CLI
processes on a data folder: `mnemo-sea session record` and `session archive` (one write each,
from process start to exit), and a process that only imports the CLI (the floor under both).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemo_sea.archive import ArchiveTarget, Principal, Role, Sensitivity
from mnemo_sea.retrieval import EvidenceDocument, HybridIndex
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

TARGET_MS = 50.0
TENANT = "bench"
WRITER = Principal(TENANT, "cli", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
SIDES = ("record", "archive", "archive_synced", "engine_upsert_flush", "engine_upsert")


def _ms(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1e3, 3), "p95_ms": round(p95 * 1e3, 3)}


def _timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = call(*args)
    return time.perf_counter() - started, out


def _archive_then_sync(mnemo: Mnemo, session: str, targets: list[ArchiveTarget]) -> None:
    mnemo.archive_results(WRITER, session, targets)
    mnemo.sync()


def _upsert_then_flush(engine: HybridIndex, doc: EvidenceDocument) -> None:
    engine.upsert([doc])
    engine.flush()


def _document(evidence_id: str, i: int) -> EvidenceDocument:
    return EvidenceDocument(
        tenant_id=TENANT, evidence_id=evidence_id, version=1, text=f"note {i}: parcel courier"
    )


def _in_process(folder: Path, writes: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    with (
        Mnemo.open(folder / "data", embedder=HashingEmbedder()) as mnemo,
        HybridIndex.open(folder / "engine", embedder=HashingEmbedder()) as engine,
    ):
        for i in range(writes):
            session = f"s{i // 20}"  # sessions of 20 results, as an agent's would be
            content = f"grep output {i}: delivery policy parcel courier line {i}".encode()
            spent, result = _timed(mnemo.record, WRITER, session, "logs.search", content)
            times["record"].append(spent)
            target = [ArchiveTarget(result.result_id, f"note {i}: parcel courier log kept aside")]
            times["archive"].append(_timed(mnemo.archive_results, WRITER, session, target)[0])
            again = mnemo.record(WRITER, session, "logs.search", content + b" again")
            synced = [ArchiveTarget(again.result_id, f"note {i}: synced copy")]
            times["archive_synced"].append(_timed(_archive_then_sync, mnemo, session, synced)[0])
            flushed = _document(f"doc-{i}", i)
            times["engine_upsert_flush"].append(_timed(_upsert_then_flush, engine, flushed)[0])
            times["engine_upsert"].append(_timed(engine.upsert, [_document(f"raw-{i}", i)])[0])
        # Searchable when the call returned: the last archived note is found.
        found = mnemo.search(WRITER, f"note {writes - 1}: parcel courier log kept aside", limit=5)
        if not any(h.kind == "tool_result" for h in found.hits):
            raise RuntimeError("the last archived note is not searchable")
    return {side: _ms(values) for side, values in times.items()}


def _cli(args: list[str], env: dict[str, str]) -> float:
    command = [sys.executable, "-c", "from mnemo_sea.cli.app import app; app()", *args]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)  # noqa: S603 - our own interpreter
    return time.perf_counter() - started


def _cli_processes(folder: Path, runs: int) -> dict[str, Any]:
    data = folder / "cli-data"
    env = {**os.environ, "MNEMO_DATA_DIR": str(data), "MNEMO_EMBEDDER": "hashing"}
    _cli(["init"], env)
    times: dict[str, list[float]] = {"import_only": [], "record": [], "archive": []}
    for i in range(runs):
        started = time.perf_counter()
        importing = [sys.executable, "-c", "import mnemo_sea.cli.app"]
        subprocess.run(importing, env=env, check=True)  # noqa: S603 - our own interpreter
        times["import_only"].append(time.perf_counter() - started)
        times["record"].append(_cli(["session", "record", "s1", "logs.search", "--content", f"log {i}"], env))
        times["archive"].append(_cli(["session", "archive", "s1", f"r{i + 1}=note {i}"], env))
    return {
        side: {"median_s": round(statistics.median(v), 3), "runs_s": [round(x, 3) for x in v]}
        for side, v in times.items()
    }


def run(writes: int = 200, *, cli_runs: int = 3, folder: Path | None = None) -> dict[str, Any]:
    """Time every side `writes` times, interleaved, then `cli_runs` CLI processes of each kind."""
    load = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="bench-embedded-write-", dir=folder) as tmp:
        sides = _in_process(Path(tmp), writes)
        cli = _cli_processes(Path(tmp), cli_runs) if cli_runs else None
    base = sides["engine_upsert_flush"]["p50_ms"]
    report: dict[str, Any] = {
        "writes": writes,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": load},
        "in_process": sides,
        "ratio_archive": round(sides["archive"]["p50_ms"] / base, 3),
        "ratio_archive_synced": round(sides["archive_synced"]["p50_ms"] / base, 3),
        "target_p50_ms": TARGET_MS,
        "meets_target": max(sides["record"]["p50_ms"], sides["archive"]["p50_ms"]) <= TARGET_MS,
    }
    if cli is not None:
        report["cli_process"] = cli
    return report
