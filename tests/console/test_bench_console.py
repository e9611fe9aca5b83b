"""`mnemo-sea bench console` as a user runs it (a real process), on a tiny session and one load of
each page: the report's shape, and that every page loaded. Never its speed: exit 1 is a missed
target on a busy machine, which the report then says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stores import require

from mnemo_sea.eval.browser import browser_problem

CLI = [sys.executable, "-c", "from mnemo_sea.cli.app import main; main()"]
TIMINGS = (
    "first_paint_p50_ms",
    "first_paint_max_ms",
    "first_paint_first_load_ms",
    "server_p50_ms",
    "server_max_ms",
    "dom_content_loaded_p50_ms",
)


def test_the_benchmark_loads_every_page_in_the_browser_and_reports_its_first_paint(tmp_path: Path) -> None:
    require(browser_problem(), "browser")
    args = ["bench", "console", "--results", "120", "--loads", "1", "--folder", str(tmp_path), "--json"]
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == (0 if report["ok"] else 1), proc.stderr
    assert report["benchmark"] == "console" and report["loads"] == 1
    session = report["session"]
    assert session["results"] == 120 and session["live"] + session["archived"] == 120
    assert session["archived"] > 0 and session["recovered_excerpts"] == 1
    assert set(report["setup_seconds"]) == {"record", "archive", "recover", "sync", "total"}
    pages = report["pages"]
    assert [p["path"] for p in pages] == [
        "/ui/login",
        "/ui/sessions",
        "/ui/sessions/agent-run-1",
        "/ui/sessions/agent-run-1?offset=100",
        f"/ui/sessions/agent-run-1/results/{report['big_result']}",
        "/ui/sessions/agent-run-1/context",
    ]
    assert report["all_loaded"] and all(p["loaded"] and p["loads"] == 1 for p in pages)
    for page in pages:
        assert all(isinstance(page[k], float | int) and page[k] >= 0 for k in TIMINGS), page
        assert page["first_paint_p50_ms"] > 0
        assert page["ratio_to_baseline"] == round(
            page["first_paint_p50_ms"] / pages[0]["first_paint_p50_ms"], 2
        )
    targeted = [p for p in pages if p["targeted"]]
    assert [p["path"] for p in targeted] == [p["path"] for p in pages[1:4]]
    assert all(p["meets"] == (p["first_paint_p50_ms"] <= 300) for p in targeted)
    assert all(p["meets"] is None for p in pages if not p["targeted"])
    assert report["meets"] == all(p["meets"] for p in targeted)
    assert pages[4]["html_kb"] > 20  # the 20 KB original is on its page
    assert not list(tmp_path.iterdir())  # the temporary data folder is gone
