"""An evidence record's versions on a time axis, laid out for an inline SVG the server draws (no
script draws it): one lane per version, and in it two bars, one per time axis of the archive
(archive/rules/in_force.py):

- the thick bar, coloured by the version's status, is *transaction time*: from `recorded_at`
  until it stopped being the archive's current version (`ended_at`: superseded or retracted),
  or until now while it still is;
- the thin bar under it is *valid time*: `valid_from` to `valid_until`, the time its content
  holds in the world, drawn only when either bound is set (an open bound runs to the edge).

A version answers `as_of` t when both bars cover t, which is what the page's marker (the facade's
own `get_evidence(as_of=t)`) says; the vertical line is t. The change points (every moment one of
those bounds falls on) are what the page's slider steps through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from mnemo_sea.archive import EvidenceRecord

LEFT = 44  # the version labels' gutter
PLOT = 900  # the plotted width
RIGHT = 16
LANE = 32
TOP = 34  # room for the labels of now and of the moment asked
AXIS = 24  # the tick labels under the lanes
TICKS = 6
# Around the span drawn, so a bar that starts at its first moment is not glued to the edge.
MARGIN = 0.03
# The calendar's ends: a valid time may be bounded at either (9999-12-31 is a common "never"),
# and the margin around them must not step off it.
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Bar:
    """One version's lane."""

    version: int
    status: str
    y: float
    x: float  # transaction time
    width: float
    still_current: bool  # drawn to now: it has not ended
    valid: tuple[float, float] | None  # valid time (x, width), when bounded at all
    in_force: bool  # the version the page marks as answering at its moment
    title: str  # the tooltip: the bounds, in words


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class TimeAxis:
    width: int
    height: int
    plot_left: int
    plot_right: int
    lanes_bottom: float
    bars: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    now_x: float
    marker_x: float | None  # the moment asked (as_of), when one was
    marker_label: str


def change_points(versions: Sequence[EvidenceRecord]) -> list[datetime]:
    """Every moment at which what the record answers may change, in order, each once."""
    found: set[datetime] = set()
    for v in versions:
        found.update(t for t in (v.recorded_at, v.ended_at, v.valid_from, v.valid_until) if t is not None)
    return sorted(found)


def _label_format(span: timedelta) -> str:
    if span >= timedelta(days=2):
        return "%Y-%m-%d"
    if span >= timedelta(hours=2):
        return "%m-%d %H:%M"
    if span >= timedelta(seconds=20):
        return "%H:%M:%S"
    return "%H:%M:%S.%f"


def _label(moment: datetime, fmt: str) -> str:
    text = moment.strftime(fmt)
    return text[:-3] if fmt.endswith("%f") else text  # milliseconds, not microseconds


def lay_out(
    versions: Sequence[EvidenceRecord], now: datetime, as_of: datetime | None, in_force: int | None
) -> TimeAxis:
    """The axis of `versions` (oldest first) as it stands at `now`, with `as_of` marked and the
    version `in_force` then (None: none) highlighted."""
    moments = [*change_points(versions), now]
    if as_of is not None:
        moments.append(as_of)
    first, last = min(moments), max(moments)
    span = last - first
    if span <= timedelta(0):
        span = timedelta(seconds=1)
    pad = span * MARGIN
    start = first - min(pad, first - _EARLIEST)
    end = last + min(pad, _LATEST - last)
    total = (end - start).total_seconds()

    def x_of(moment: datetime) -> float:
        return round(LEFT + PLOT * (moment - start).total_seconds() / total, 2)

    bars = []
    for lane, v in enumerate(versions):
        y = TOP + lane * LANE
        x0, x1 = x_of(v.recorded_at), x_of(v.ended_at or now)
        valid = None
        if v.valid_from is not None or v.valid_until is not None:
            v0 = x_of(v.valid_from) if v.valid_from is not None else float(LEFT)
            v1 = x_of(v.valid_until) if v.valid_until is not None else float(LEFT + PLOT)
            valid = (v0, max(v1 - v0, 1.0))
        bars.append(
            Bar(
                version=v.version,
                status=v.status,
                y=y,
                x=x0,
                width=max(x1 - x0, 2.0),  # a version current for an instant still shows
                still_current=v.ended_at is None,
                valid=valid,
                in_force=v.version == in_force,
                title=_title(v),
            )
        )
    fmt = _label_format(end - start)
    ticks = tuple(
        Tick(x_of(moment), _label(moment, fmt))
        for moment in (start + (end - start) * (i + 0.5) / TICKS for i in range(TICKS))
    )
    lanes_bottom = TOP + len(versions) * LANE + 4
    return TimeAxis(
        width=LEFT + PLOT + RIGHT,
        height=int(lanes_bottom + AXIS),
        plot_left=LEFT,
        plot_right=LEFT + PLOT,
        lanes_bottom=lanes_bottom,
        bars=tuple(bars),
        ticks=ticks,
        now_x=x_of(now),
        marker_x=None if as_of is None else x_of(as_of),
        marker_label="" if as_of is None else f"as of {_label(as_of, '%Y-%m-%d %H:%M:%S.%f')} UTC",
    )


def _title(v: EvidenceRecord) -> str:
    when = "%Y-%m-%d %H:%M:%S"
    current = f"recorded {v.recorded_at.strftime(when)}, " + (
        f"{v.status} {v.ended_at.strftime(when)}" if v.ended_at is not None else "current now"
    )
    if v.valid_from is None and v.valid_until is None:
        return f"v{v.version} {v.status}: {current}; valid always"
    since = v.valid_from.strftime(when) if v.valid_from else "always"
    until = v.valid_until.strftime(when) if v.valid_until else "open"
    return f"v{v.version} {v.status}: {current}; valid {since} to {until}"
