"""Store outages under load: PostgreSQL, then Redis, killed and restarted under one API process.

The scenario (`mnemo-sea bench faults`, here with phases of 2.5 seconds and as long as it takes
every operation to be answered twice in each) runs once for the module
on throwaway servers; each test checks one promise of the API on its report:

- while a store is down, calls that need it answer 503 problem+json, never 500, never hang;
- once the store is back, the same API process serves again (no restart);
- no acknowledged write is lost, and a failed write left nothing behind.
"""

from __future__ import annotations

from typing import Any

import pytest

from mnemo_sea.eval import fault_api

ALL_OPS = ("search", "record", "archive", "recover")


@pytest.fixture(scope="module")
def report(fault_binaries: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    logs = tmp_path_factory.mktemp("fault-logs")
    # The hard timeout bounds a hang only: on a busy machine each phase waits for its calls.
    return fault_api.run(clients=4, phase_s=2.5, seed_docs=20, hard_timeout_s=300, logs_dir=logs)


def test_calls_answer_2xx_or_503_problem_json_and_never_500(report: dict[str, Any]) -> None:
    others = {name: p["other_samples"] for name, p in report["phases"].items() if p["other"]}
    assert not others, others
    assert all(p["503_without_problem_json"] == 0 for p in report["phases"].values())
    log = report["server_log"]
    assert all(route.endswith(" 503") for route in log["responses_5xx"]), log["responses_5xx"]
    assert log["error_lines"] == 0, log["errors"]


def test_no_call_hangs_beyond_the_bound(report: dict[str, Any]) -> None:
    assert report["client_crashes"] == []
    bound_ms = report["config"]["hang_bound_s"] * 1000
    assert all(p["no_answer"] == 0 for p in report["phases"].values())
    assert all(p["max_ms"] <= bound_ms for p in report["phases"].values()), {
        name: p["max_ms"] for name, p in report["phases"].items()
    }


def test_while_postgresql_is_down_every_call_answers_503(report: dict[str, Any]) -> None:
    assert report["phases"]["baseline"]["503"] == 0 and report["phases"]["baseline"]["2xx"] > 0
    down = report["phases"]["postgres_down"]
    assert down["503"] > 0 and down["2xx"] == 0, down
    assert report["recovery"]["postgres"]["first_503_after_kill_s"] is not None


def test_while_redis_is_down_search_answers_503_and_writes_go_on(report: dict[str, Any]) -> None:
    down = report["phases"]["redis_down"]["by_op"]
    assert down["search"]["503"] > 0 and down["search"]["2xx"] == 0, down
    assert down["record"]["2xx"] > 0 and down["record"]["503"] == 0, down


@pytest.mark.parametrize("store", ["postgres", "redis"])
def test_the_same_api_process_serves_again_once_the_store_is_back(report: dict[str, Any], store: str) -> None:
    assert report["api_pid_unchanged"]
    back = report["phases"][f"{store}_back"]
    assert back["503"] == 0 and back["other"] == 0, back
    assert all(back["by_op"][op]["2xx"] > 0 for op in ALL_OPS), back["by_op"]
    assert report["recovery"][store]["first_success_after_restart_s"] is not None


def test_no_acknowledged_write_is_lost(report: dict[str, Any]) -> None:
    writes = report["writes"]
    assert writes["acknowledged_records"] > 0
    assert writes["verified_records"] == writes["acknowledged_records"], writes
    lost = ("lost", "mismatched", "archive_lost", "recovery_copy_lost", "bad_recovery_during_run")
    assert all(writes["findings"][kind] == 0 for kind in lost), writes["examples"]


def test_a_failed_record_or_recovery_left_nothing_behind(report: dict[str, Any]) -> None:
    writes = report["writes"]
    assert writes["failed_writes_left_nothing"] > 0  # the outage did fail writes
    behind = (
        "written_despite_503",
        "written_unacknowledged",
        "recovered_despite_503",
        "recovered_unacknowledged",
        "archived_unacknowledged",
        "phantom",
    )
    assert all(writes["findings"][kind] == 0 for kind in behind), writes["examples"]


def test_a_503_archive_left_nothing_behind(report: dict[str, Any]) -> None:
    writes = report["writes"]
    assert writes["findings"]["archived_despite_503"] == 0, writes["examples"]
