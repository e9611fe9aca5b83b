"""`bench ingest-beside-trail` at a tiny size: its report's shape, and that every side did the
work (every record stored, every row applied by the end), not how fast."""

from __future__ import annotations

from mnemo_sea.archive.rules.original_pages import PAGE_BYTES
from mnemo_sea.eval.bench_ingest_beside_trail import run


def test_the_report_gives_each_phase_alone_and_beside_the_trail() -> None:
    report = run(batches_per_side=2, batch_size=3, original_bytes=3 * PAGE_BYTES, rounds=1)
    assert report["benchmark"] == "ingest-beside-trail" and report["rounds"] == 1
    for phase in ("ingest_s", "archive_write_s", "archive_write_superseding_s"):
        timing = report[phase]
        assert timing["alone_runs"] == [timing["alone"]] and timing["beside_trail_runs"] == [
            timing["beside_trail"]
        ]
        assert timing["alone"] > 0 and timing["beside_trail"] > 0 and timing["slowdown"] > 0
        assert len(timing["trail_pending_at_end"]) == 1
        # Both sides stored the two batches of three, and applied every outbox row by the end.
        assert timing["stored"] == [6, 6] and timing["pending_after_sync"] == [0, 0]
        # The superseding phase's timed writes made a second version of each record.
        versions = 2 if phase == "archive_write_superseding_s" else 1
        assert timing["versions_of_first"] == [versions, versions]
