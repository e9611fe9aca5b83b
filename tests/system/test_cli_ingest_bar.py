"""The ingest bar: rates over a sliding window, the ETA from the chunk rate and the chunk total,
and what the rows show, on a clock the test moves (nothing here sleeps or times real work)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mnemo_sea.cli.ingest_bar import IngestBar, IngestView, WindowedRate
from mnemo_sea.system.mnemo import IngestProgress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_steady_rate_is_the_count_over_the_time() -> None:
    clock = Clock()
    rate = WindowedRate(10.0, clock=clock)
    assert rate.per_second() is None
    for n in range(0, 60, 5):
        rate.add(n)
        clock.now += 1.0
    clock.now -= 1.0
    assert rate.per_second() == pytest.approx(5.0)


def test_a_burst_after_a_long_pause_is_averaged_over_the_window() -> None:
    clock = Clock()
    rate = WindowedRate(10.0, clock=clock)
    rate.add(0)
    clock.now += 68.0  # the model embeds: nothing moves
    rate.add(150)  # then everything at once
    assert rate.per_second() == pytest.approx(15.0)  # 150 in the last 10 s, not 150 per instant
    clock.now += 0.001
    rate.add(300)
    assert rate.per_second() == pytest.approx(30.0, rel=1e-3)


def test_the_window_forgets_what_came_before_it() -> None:
    clock = Clock()
    rate = WindowedRate(10.0, clock=clock)
    for n in range(0, 1001, 100):  # fast at first: 100 a second
        rate.add(n)
        clock.now += 1.0
    for n in range(1001, 1021):  # then slow: 1 a second, for 20 s
        rate.add(n)
        clock.now += 1.0
    clock.now -= 1.0
    assert rate.per_second() == pytest.approx(1.0)


def test_a_rate_over_less_than_a_second_is_not_told() -> None:
    clock = Clock()
    rate = WindowedRate(10.0, clock=clock)
    rate.add(0)
    clock.now += 0.2
    rate.add(64)
    assert rate.per_second() is None
    clock.now += 0.8
    assert rate.per_second() == pytest.approx(64.0)


def test_the_eta_is_the_chunks_left_over_the_chunk_rate() -> None:
    clock = Clock()
    view = IngestView(clock=clock, window=10.0)
    view.update(IngestProgress(50, 50, 0, 0))  # stored; the chunks not known yet
    assert [r.name for r in view.rows()] == ["reading", "stored", "indexed"]
    view.update(IngestProgress(50, 50, 0, 0, chunks=100))
    for embedded, indexed in ((20, 8), (40, 16)):
        clock.now += 2.0
        view.update(IngestProgress(50, 50, indexed, embedded, chunks=100))

    assert view.chunk_total() == (100, True)
    assert view.eta_seconds() == pytest.approx(6.0)  # 60 left at 10 a second
    embedded = view.rows()[-1]
    assert (embedded.name, embedded.completed, embedded.total) == ("embedded", 40, 100)
    assert (embedded.count, embedded.rate, embedded.eta) == ("40/100 chunks", "10.0 chunks/s", "ETA 0:00:06")
    assert view.rows()[2].rate == "4.0 docs/s"


def test_a_load_of_several_batches_estimates_its_chunk_total_from_the_batches_chunked() -> None:
    view = IngestView(clock=Clock())
    view.update(IngestProgress(3000, 1000, 0, 0))
    view.update(IngestProgress(3000, 1000, 0, 0, chunks=1500))
    assert view.chunk_total() == (4500, False)
    assert view.rows()[-1].count == "0/~4,500 chunks"
    view.update(IngestProgress(3000, 2000, 1000, 1500, chunks=1500))  # batch 2 stored, not chunked
    assert view.chunk_total() == (4500, False)
    view.update(IngestProgress(3000, 2000, 1000, 1500, chunks=2500))
    assert view.chunk_total() == (3750, False)
    view.update(IngestProgress(3000, 3000, 2000, 2500, chunks=4000))
    assert view.chunk_total() == (4000, True)


def render(bar: IngestBar) -> str:
    out = Console(file=io.StringIO(), width=160, record=True)
    out.print(bar.progress.make_tasks_table(bar.progress.tasks))
    return out.export_text()


def test_the_bar_shows_reading_at_once_then_the_embedded_total_and_an_eta() -> None:
    clock = Clock()
    terminal = Console(file=io.StringIO(), force_terminal=True, width=160)
    bar = IngestBar(False, console=terminal, clock=clock)
    assert not bar.progress.disable and bar.watching is bar
    assert "reading" in render(bar) and "listing files…" in render(bar)  # before any event

    bar(IngestProgress(0, 0, 0, 0, files=150))
    assert "0/150 files" in render(bar)
    bar(IngestProgress(150, 0, 0, 0, files=150, files_read=150))
    bar(IngestProgress(150, 150, 0, 0))
    bar(IngestProgress(150, 150, 0, 0, chunks=600))
    clock.now += 5.0
    bar(IngestProgress(150, 150, 30, 128, chunks=600))

    text = render(bar)
    assert "150/150 files" in text
    assert "stored" in text and "150/150" in text
    assert "indexed" in text and "30/150" in text and "6.0 docs/s" in text
    assert "embedded" in text and "128/600 chunks" in text and "25.6 chunks/s" in text
    assert "ETA 0:00:18" in text  # 472 left at 25.6 a second


def test_the_bar_draws_nothing_and_watches_nothing_when_quiet_or_not_on_a_terminal() -> None:
    for quiet, terminal in ((True, True), (False, False)):
        bar = IngestBar(quiet, console=Console(file=io.StringIO(), force_terminal=terminal))
        # No callback at all: the ingest then embeds each batch in one call, as fast as it can.
        assert bar.progress.disable and bar.watching is None
