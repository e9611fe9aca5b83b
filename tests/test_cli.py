"""The command line as a user runs it: real processes, real exit codes, JSON on stdout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-c", "from mnemo_sea.cli.app import main; main()"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False)


def test_demo_passes_and_keeps_data_where_asked(tmp_path: Path) -> None:
    proc = run("demo", "--data-dir", str(tmp_path / "data"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "PASS: mnemo-sea demo"
    assert "[FAIL]" not in proc.stdout
    assert (tmp_path / "data" / "archive.db").exists() and (tmp_path / "data" / "index").is_dir()


def test_bench_archive_prints_json_with_targets() -> None:
    proc = run("bench", "archive", "--json", "--batches", "2", "--recoveries", "5")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["benchmark"] == "archive"
    assert report["workload"] == {"batch_results": 26, "batch_bytes": 2_200_000, "batches": 2}
    assert report["archive_batch"]["runs"] == 2 and report["recover_10kb"]["runs"] == 5
    keys = (
        "archive_batch",
        "recover_10kb",
        "recover_2mb",
        "recover_2mb_excerpt_lines",
        "recover_2mb_excerpt_match",
    )
    for key in keys:
        assert 0 < report[key]["p50_ms"] <= report[key]["p95_ms"] <= report[key]["max_ms"]
    assert set(report["excerpt_vs_whole_2mb_p50"]) == {"lines", "match"}
    assert set(report["meets_targets"]) == set(report["targets_ms"])


def test_bench_curation_prints_json_and_finds_the_line_no_note_holds() -> None:
    proc = run("bench", "curation", "--json", "--archives", "2", "--recalls", "1", "--embedder", "hashing")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["benchmark"] == "curation" and report["archive_2mb"]["runs"] == 2
    # The first original (and the warm-up's) waited for the trail, then its middle line was found.
    searchable = report["original_searchable"]
    assert searchable["pending_originals_before"] == 2
    assert searchable["rank_of_the_line_in_five"]["bm25"] == 1
    for key in ("archive_2mb", "recall", "recover_excerpt_10_lines"):
        assert 0 < report[key]["p50_ms"] <= report[key]["p95_ms"] <= report[key]["max_ms"]
    assert set(report["meets_targets"]) == {"archive_2mb_p50"}


def test_bench_archive_unreachable_database_is_one_clear_line() -> None:
    proc = run("bench", "archive", "--db", "postgresql+psycopg://postgres@127.0.0.1:1/nope", "--batches", "1")
    assert proc.returncode == 6  # a store unavailable, as for every command (was 2 before the one table)
    assert proc.stderr.startswith("error: archive store unreachable")
    assert "Traceback" not in proc.stderr


def test_bench_search_path_reports_each_size_and_the_same_hits_as_the_engine() -> None:
    args = ["--n", "300", "--n", "600", "--queries", "10", "--rounds", "1", "--no-profile"]
    proc = run("bench", "search-path", "--json", *args)
    report = json.loads(proc.stdout)
    # Exit 1 is a missed ratio (a timing on a busy machine), never a wrong answer; see below.
    assert proc.returncode == (0 if report["ok"] else 1), proc.stderr
    assert [r["docs"] for r in report["sizes"]] == [300, 600]
    for size in report["sizes"]:
        assert size["hits_differing_from_engine"] == 0 and size["mean_hits"] > 0
        assert size["ratio_p50"] == round(size["facade_uncached"]["p50_ms"] / size["engine"]["p50_ms"], 3)
    assert report["ratio_p50"] == {
        "300": report["sizes"][0]["ratio_p50"],
        "600": report["sizes"][1]["ratio_p50"],
    }
