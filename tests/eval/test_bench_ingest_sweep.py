"""The ingest sweep's report (issue 31): every cell measured, its calls spread over its tenants,
and a pass/fail per cell that follows its ratio. Nothing here depends on how fast anything ran."""

from __future__ import annotations

from typer.testing import CliRunner

from mnemo_sea.cli.app import app
from mnemo_sea.eval.bench_ingest_sweep import TARGET_RATIO, cell_documents, run_sweep


def test_a_cell_holds_whole_batches() -> None:
    assert [cell_documents(size) for size in (1, 10, 100, 1_000)] == [200, 800, 3_200, 6_000]
    for size in (1, 3, 7, 10, 999, 1_000):
        for scale in (0.001, 0.3, 1.0):
            n = cell_documents(size, scale)
            assert n >= size and n % size == 0


def test_the_sweep_reports_every_cell_and_judges_each_by_its_ratio() -> None:
    report = run_sweep((1, 3), (1, 2), rounds=1, scale=0.03)
    cells = report["cells"]
    assert [(c["batch_size"], c["tenants"]) for c in cells] == [(1, 1), (1, 2), (3, 1), (3, 2)]
    for cell in cells:
        assert cell["documents"] == cell_documents(cell["batch_size"], 0.03)
        assert cell["calls"] * cell["batch_size"] == cell["documents"]
        sides = ("engine_seconds", "engine_flush_once_seconds", "mnemo_seconds")
        assert all(len(cell[side]) == 1 for side in sides)
        assert cell["ratio"] > 0 and cell["ratio_vs_flush_once"] > 0
        # The facade flushes at least once (its closing sync), every flush timed, in the one round.
        assert len(cell["mnemo_flushes"]) == len(cell["mnemo_flush_seconds"]) == 1
        assert cell["mnemo_flushes"][0] >= 1 and cell["mnemo_flush_seconds"][0] >= 0
        # Garbage collections inside each side's run, one entry a round (how many depends on the
        # heap, so only their shape and signs are asserted; eval/timing.py's test counts them).
        for side in ("engine", "mnemo"):
            full, seconds = cell[f"{side}_full_collections"], cell[f"{side}_collection_seconds"]
            assert len(full) == len(seconds) == 1 and full[0] >= 0 and seconds[0] >= 0
    targets = report["targets"]
    assert [t["pass"] for t in targets["cells"]] == [c["ratio"] >= TARGET_RATIO for c in cells]
    assert targets["all_pass"] == all(t["pass"] for t in targets["cells"])


def test_the_cli_refuses_a_batch_size_out_of_range_before_any_work() -> None:
    result = CliRunner().invoke(app, ["bench", "mnemo-ingest", "--sweep", "--batch-sizes", "0,5"])
    assert result.exit_code == 2
    assert "each must be 1 to 1000" in result.output
