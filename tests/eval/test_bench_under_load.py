"""`bench search-path --busy N`: the CPU-bound processes run during the measurement only, and
none outlives it, also when the measurement fails."""

from __future__ import annotations

import os

import pytest

from mnemo_sea.eval.bench_search_path import run
from mnemo_sea.eval.busy_cpus import busy_processes


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_busy_processes_run_inside_the_block_and_are_gone_after() -> None:
    with busy_processes(2) as busy:
        assert len(busy.pids) == 2 and all(_alive(pid) for pid in busy.pids)
    assert not any(_alive(pid) for pid in busy.pids)
    assert busy.report()["cpu_bound_processes"] == 2


def test_the_busy_processes_are_stopped_when_the_measurement_fails() -> None:
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="measurement failed"), busy_processes(1) as busy:
        pids = busy.pids
        raise RuntimeError("measurement failed")
    assert len(pids) == 1 and not _alive(pids[0])


def test_search_path_reports_the_processes_beside_it_and_the_same_hits() -> None:
    report = run(300, queries=5, rounds=1, profile=False, busy=1)
    assert report["busy"]["cpu_bound_processes"] == 1
    assert report["hits_differing_from_engine"] == 0 and report["mean_hits"] > 0
    assert report["engine"]["runs"] == report["facade_uncached"]["runs"] == 5
