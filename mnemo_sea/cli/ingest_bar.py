"""The `ingest` command's progress bar: `IngestProgress` events rendered on stderr (a terminal only).

The bar holds no knowledge of its own: the loader and `Mnemo.ingest` report (the same events a
library caller's `progress` callback gets), the bar renders. Its rows: files read, documents
stored, documents indexed, chunks embedded. Rates are over the last RATE_WINDOW seconds
(`WindowedRate`), not since the start and not the last burst; the ETA is the chunks left over the
chunk rate, since embedding is the slow part.

`IngestView` is the state (the last counts, the rates, the ETA) and takes the clock, so a test
drives it with a clock of its own; `IngestBar` draws it with rich.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mnemo_sea.system.ingest_progress import IngestProgress

# Seconds a rate is measured over: several embedding steps of the default model (one is a few
# seconds on two cores), short enough that a change of pace shows within it.
RATE_WINDOW = 15.0
# A rate over less than this says nothing yet (the first step after a long model load, say).
MIN_RATE_SPAN = 1.0


class WindowedRate:
    """Units per second over the last `window` seconds of `clock`: the count now minus the count
    `window` seconds ago, over the window (over the time since the first sample while that is
    shorter). A burst after a pause is averaged with the pause inside the window, not shown as
    an instant speed, and samples older than the window are forgotten. None until the samples
    span `min_span` seconds."""

    def __init__(
        self,
        window: float = RATE_WINDOW,
        *,
        clock: Callable[[], float] = time.monotonic,
        min_span: float = MIN_RATE_SPAN,
    ) -> None:
        self.window = window
        self.min_span = min_span
        self.clock = clock
        self._samples: deque[tuple[float, int]] = deque()  # (time, running count)

    def add(self, count: int) -> None:
        """The running count now."""
        now = self.clock()
        self._samples.append((now, count))
        self._forget(now)

    def per_second(self) -> float | None:
        if not self._samples:
            return None
        now = self.clock()
        self._forget(now)
        since, base = self._samples[0]
        span = min(now - since, self.window)
        if span < self.min_span:
            return None
        return (self._samples[-1][1] - base) / span

    def _forget(self, now: float) -> None:
        # The last sample at or before the window's start stays: it is the count at that start.
        start = now - self.window
        while len(self._samples) >= 2 and self._samples[1][0] <= start:
            self._samples.popleft()


@dataclass(frozen=True)
class BarRow:
    """One row as drawn: the bar's `completed` of `total` and the texts beside it."""

    name: str
    completed: int
    total: int | None
    count: str  # "12/150 files"
    rate: str = ""  # "3.1 docs/s"
    eta: str = ""  # "ETA 0:01:05"


class IngestView:
    """The bar's state: the last reading event, the last ingest event, windowed rates of indexed
    documents and embedded chunks, and the ETA."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, window: float = RATE_WINDOW) -> None:
        self.reading: IngestProgress | None = None
        self.last: IngestProgress | None = None
        # Documents whose chunks `last.chunks` counts: those stored when it last changed (each
        # batch is stored, then chunked). A load of several batches knows its later ones' not yet.
        self.chunked_documents = 0
        self.indexed_rate = WindowedRate(window, clock=clock)
        self.chunk_rate = WindowedRate(window, clock=clock)

    def update(self, p: IngestProgress) -> None:
        if p.files is not None:
            self.reading = p
            return
        if p.chunks is not None and (self.last is None or p.chunks != self.last.chunks):
            self.chunked_documents = p.stored
        self.last = p
        self.indexed_rate.add(p.indexed)
        if p.chunks is not None:
            self.chunk_rate.add(p.chunks_embedded)

    def chunk_total(self) -> tuple[int, bool] | None:
        """The chunks the whole load embeds and whether that is exact, or an estimate from the
        chunks per document so far (batches not yet chunked); None before any is known."""
        p = self.last
        if p is None or p.chunks is None:
            return None
        if self.chunked_documents in (0, p.documents):
            return p.chunks, True
        return max(p.chunks, round(p.chunks * p.documents / self.chunked_documents)), False

    def eta_seconds(self) -> float | None:
        """Seconds until every chunk is embedded at the current chunk rate; None while unknown."""
        total, rate = self.chunk_total(), self.chunk_rate.per_second()
        if total is None or self.last is None or not rate:
            return None
        return max(total[0] - self.last.chunks_embedded, 0) / rate

    def rows(self) -> list[BarRow]:
        rows = [self._reading_row()]
        p = self.last
        if p is None:
            return rows
        rows.append(BarRow("stored", p.stored, p.documents, f"{p.stored:,}/{p.documents:,}"))
        rows.append(
            BarRow(
                "indexed",
                p.indexed,
                p.documents,
                f"{p.indexed:,}/{p.documents:,}",
                _rate(self.indexed_rate.per_second(), "docs"),
            )
        )
        total = self.chunk_total()
        if total is not None and total[0] > 0:
            chunks, exact = total
            eta = self.eta_seconds()
            rows.append(
                BarRow(
                    "embedded",
                    p.chunks_embedded,
                    chunks,
                    f"{p.chunks_embedded:,}/{'' if exact else '~'}{chunks:,} chunks",
                    _rate(self.chunk_rate.per_second(), "chunks"),
                    f"ETA {'-:--:--' if eta is None else _clock_time(eta)}",
                )
            )
        return rows

    def _reading_row(self) -> BarRow:
        r = self.reading
        if r is None or r.files is None:
            return BarRow("reading", 0, None, "listing files…")
        return BarRow("reading", r.files_read, r.files, f"{r.files_read:,}/{r.files:,} files")


def _rate(per_second: float | None, unit: str) -> str:
    return "" if per_second is None else f"{per_second:,.1f} {unit}/s"


def _clock_time(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class IngestBar:
    """`IngestView` drawn by rich on stderr, one task per row, shown at once (the reading row
    first) and only on a terminal unless `console` is given; `quiet` draws nothing. Called with
    each `IngestProgress` event."""

    def __init__(
        self, quiet: bool, *, console: Any = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        console = console or Console(stderr=True)
        self.view = IngestView(clock=clock)
        self.progress = Progress(
            TextColumn("{task.description:<9}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[eta]}"),
            TimeElapsedColumn(),
            console=console,
            disable=quiet or not console.is_terminal,
            transient=False,
            get_time=clock,
        )
        self._tasks: dict[str, Any] = {}
        self._draw()

    @property
    def watching(self) -> IngestBar | None:
        """This bar as a `progress` callback when it is drawn, else None: an ingest nobody
        watches embeds each batch in one call (see `HybridIndex.upsert`)."""
        return None if self.progress.disable else self

    def __enter__(self) -> IngestBar:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def __call__(self, p: IngestProgress) -> None:
        self.view.update(p)
        self._draw()

    def _draw(self) -> None:
        for row in self.view.rows():
            task = self._tasks.get(row.name)
            if task is None:
                task = self._tasks[row.name] = self.progress.add_task(
                    row.name, total=row.total, count=row.count, rate=row.rate, eta=row.eta
                )
            self.progress.update(
                task, total=row.total, completed=row.completed, count=row.count, rate=row.rate, eta=row.eta
            )
