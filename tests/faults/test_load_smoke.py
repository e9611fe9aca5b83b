"""The load benchmark, run briefly: it must stay runnable, error-free and lose no write.

`mnemo-sea bench api` drives a real API process on the machine's PostgreSQL and Redis; a few
seconds with 4 clients keep the script from rotting. The audit it ends with is itself
checked: fed a ledger that disagrees with the archive, it must say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from mnemo_sea.cli.bench_api import register
from mnemo_sea.eval.api_clients import AgentClient, SentRecord
from mnemo_sea.eval.api_stack import ApiServer, mint_keys, scratch_database, scratch_redis_prefix
from mnemo_sea.eval.write_audit import audit


def bench_api(stores: tuple[str, str], *args: str) -> dict[str, Any]:
    """`mnemo-sea bench api ARGS --json` on the shared stores; its report, once it passed."""
    pg_admin_url, redis_url = stores
    app = typer.Typer()
    bench = typer.Typer()
    app.add_typer(bench, name="bench")
    register(bench)
    every = ["bench", "api", *args, "--timeout", "120", "--pg-admin-url", pg_admin_url]
    result = CliRunner().invoke(app, [*every, "--redis-url", redis_url, "--json"])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.output)
    return report


def test_a_short_load_run_has_no_error_and_loses_no_write(shared_stores: tuple[str, str]) -> None:
    report = bench_api(shared_stores, "--clients", "4", "--duration", "4", "--seed-docs", "20")
    assert report["ok"] and report["errors_total"] == 0, report["error_samples"]
    assert all(report["operations"][op]["ok"] > 0 for op in ("search", "record", "archive", "recover"))
    writes = report["writes"]
    assert writes["acknowledged_records"] > 0
    assert writes["verified_records"] == writes["acknowledged_records"]
    assert writes["lost"] == writes["mismatched"] == 0 and writes["clean"], writes
    assert report["server_log"]["error_lines"] == 0, report["server_log"]


@pytest.fixture
def server(shared_stores: tuple[str, str], tmp_path: Path) -> Iterator[tuple[ApiServer, str]]:
    pg_admin_url, redis_url = shared_stores
    with scratch_database(pg_admin_url) as db_url, scratch_redis_prefix(redis_url, "audit") as prefix:
        (key,) = mint_keys(db_url, "audit", ["agent-0"], ["agent"])
        api = ApiServer(
            {
                "MNEMO_DATABASE_URL": db_url,
                "MNEMO_QDRANT_URL": ":memory:",
                "MNEMO_REDIS_URL": redis_url,
                "MNEMO_REDIS_PREFIX": prefix,
                "MNEMO_EMBEDDER": "hashing",
            },
            tmp_path / "api.log",
        )
        try:
            api.start()
            yield api, key
        finally:
            api.stop()


def test_the_audit_reports_lost_mismatched_and_unacknowledged_writes(server: tuple[ApiServer, str]) -> None:
    api, key = server
    client = AgentClient(api.base_url, key, "audited", seed=1, timeout_s=30)
    try:
        for _ in range(4):
            client.record()
        client.archive()
    finally:
        client.close()
    assert [s.outcome for s in client.sent] == ["acked"] * 4
    assert audit(client, api.base_url).clean  # the ledger as it happened

    first, second = client.sent[0], client.sent[1]
    second.outcome, second.detail = "503", "store_unavailable (request x)"  # stored, yet "503"
    client.sent.append(SentRecord("0" * 64, "acked", "r99"))  # acknowledged, never stored
    client.sent[2].sha256 = "f" * 64  # stored bytes differ from the sent ones
    found = audit(client, api.base_url)
    assert [f.split(":")[0] for f in found.findings["lost"]] == ["audited/r99"]
    assert [f.split(":")[0] for f in found.findings["mismatched"]] == ["audited/r3"]
    assert [f.split(":")[0] for f in found.findings["written_despite_503"]] == [f"audited/{second.result_id}"]
    assert first.result_id is not None and not found.clean


def test_searches_answered_from_the_cache_are_counted_and_unique_queries_miss_it(
    server: tuple[ApiServer, str],
) -> None:
    """`--queries repeating` lets an agent ask what it asked before (a cached answer, counted);
    `--queries unique` gives every search a word of its own, so none is answered from the cache."""
    api, key = server
    for kind, from_cache in (("repeating", 1), ("unique", 0)):
        client = AgentClient(api.base_url, key, f"searches-{kind}", seed=3, timeout_s=30, queries=kind)
        try:
            for _ in range(2):
                client.rng.seed(3)  # the same draw twice: one question asked again
                client.search()
        finally:
            client.close()
        assert [c.status for c in client.calls] == [200, 200]
        assert (client.searches_answered, client.searches_from_cache) == (2, from_cache), kind


def test_a_short_run_of_unique_searches_reports_none_from_the_cache(shared_stores: tuple[str, str]) -> None:
    report = bench_api(
        shared_stores,
        *("--clients", "2", "--duration", "2", "--baseline", "1", "--seed-docs", "20"),
        *("--mix", "search", "--queries", "unique"),
    )
    assert report["config"]["queries"] == "unique"
    searches = report["searches"]
    assert searches["answered"] == report["operations"]["search"]["ok"] > 0
    assert searches["from_cache"] == 0 and searches["from_cache_share"] == 0.0
    baseline = report["baseline"]["searches"]
    assert baseline["answered"] > 0 and baseline["from_cache"] == 0
