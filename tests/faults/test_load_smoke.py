"""The load benchmark, run briefly: it must stay runnable, error-free and lose no write.

`mnemo-sea bench api` drives a real API process on the machine's PostgreSQL and Redis; a few
seconds with 4 clients keep the script from rotting. The audit it ends with is itself
checked: fed a ledger that disagrees with the archive, it must say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mnemo_sea.cli.bench_api import register
from mnemo_sea.eval.api_clients import AgentClient, SentRecord
from mnemo_sea.eval.api_stack import ApiServer, mint_keys, scratch_database, scratch_redis_prefix
from mnemo_sea.eval.write_audit import audit


def test_a_short_load_run_has_no_error_and_loses_no_write(shared_stores: tuple[str, str]) -> None:
    pg_admin_url, redis_url = shared_stores
    app = typer.Typer()
    bench = typer.Typer()
    app.add_typer(bench, name="bench")
    register(bench)
    args = ["bench", "api", "--clients", "4", "--duration", "4", "--seed-docs", "20", "--timeout", "120"]
    args += ["--pg-admin-url", pg_admin_url, "--redis-url", redis_url, "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
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
