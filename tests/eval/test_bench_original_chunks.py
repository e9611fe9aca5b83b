"""`bench original-chunks` at a tiny size: its report's shape, and that both sides indexed the
same chunks of the original's pages (the work was done, not how fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo_sea.archive.rules.original_pages import PAGE_BYTES, page_count
from mnemo_sea.eval import bench_original_chunks as bench
from mnemo_sea.eval.bench_original_chunks import (
    WARM_UP,
    _recorded,
    engine_run,
    log_text,
    page_docs,
    run,
    trail_run,
)
from mnemo_sea.retrieval.filters import tenant_filter


def test_the_report_names_each_size_with_both_rates_and_their_ratio() -> None:
    report = run((3 * PAGE_BYTES,), rounds=1, min_seconds=0)
    assert report["benchmark"] == "original-chunks" and report["rounds"] == 1
    (size,) = report["sizes"]
    assert size["rounds"] == 1
    assert 3 <= size["pages"] <= page_count(size["bytes"])  # pages with text
    assert size["chunks"] > size["pages"]  # several chunks a page
    assert len(size["engine_seconds"]) == len(size["trail_seconds"]) == 1
    # The rates are rounded to 0.1 chunks/s in the report, the ratio computed before that.
    assert abs(size["ratio"] - size["trail_chunks_per_s"] / size["engine_chunks_per_s"]) < 0.01
    assert report["meets_target"] == (size["ratio"] >= report["target_ratio"])


def test_the_trail_indexes_every_page_the_engine_does() -> None:
    text = log_text(2 * PAGE_BYTES + 100)
    docs = page_docs(text)
    assert [d.version for d in docs] == [2, 3, 4]  # every page, after the note (version 1)
    assert "".join(d.text for d in docs) == text  # the pages cut the whole original
    _, engine_chunks = engine_run(docs)
    total, behind, trail_chunks = trail_run(text)
    assert trail_chunks == engine_chunks > 0
    assert 0 < behind <= total


def test_the_trail_side_is_warmed_up_by_another_tenant_before_the_clock_starts(tmp_path: Path) -> None:
    mnemo, _, _ = _recorded(tmp_path, log_text(PAGE_BYTES))
    try:
        warm = [
            p
            for p in mnemo.index.points_matching(tenant_filter(WARM_UP.tenant_id))
            if p.kind == "archived_original"
        ]
        assert warm  # the warm-up's original was archived and its pages indexed
        assert mnemo.sync().pending == 0
    finally:
        mnemo.close()


def test_a_short_run_is_repeated_until_each_side_adds_up_to_the_minimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rounds come from the first round's times (here fixed: no clock is read), the shorter
    side deciding, within `rounds` and MAX_ROUNDS."""
    runs: list[str] = []

    def engine(docs: object) -> tuple[float, int]:
        runs.append("engine")
        return 0.25, 10

    def trail(text: str) -> tuple[float, float, int]:
        runs.append("trail")
        return 0.3, 0.28, 10

    monkeypatch.setattr(bench, "engine_run", engine)
    monkeypatch.setattr(bench, "trail_run", trail)
    monkeypatch.setattr(bench, "page_docs", lambda text: [])
    report = run((PAGE_BYTES,), rounds=2, min_seconds=1.0)
    assert report["sizes"][0]["rounds"] == 4 and runs == ["engine", "trail"] * 4  # 4 x 0.25 s
    assert bench.rounds_for(2, 0.5, 0.1) == 2  # never fewer than asked
    assert bench.rounds_for(2, 0.001, 1.0) == bench.MAX_ROUNDS
    assert bench.rounds_for(2, 0.0, 1.0) == bench.MAX_ROUNDS
