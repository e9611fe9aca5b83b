"""The time axis an evidence record's page draws: bars where their moments fall, in the plot,
never inverted; the moment asked where it falls; a record of one instant still drawn."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from mnemo_sea.archive import EvidenceRecord, Sensitivity
from mnemo_sea.console.time_axis import PLOT, change_points, lay_out

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _version(
    n: int, recorded: datetime, ended: datetime | None, status: str = "superseded"
) -> EvidenceRecord:
    return EvidenceRecord(
        "kb/x",
        n,
        "knowledge",
        "doc",
        "default",
        "",
        None,
        "text/plain",
        "0" * 64,
        recorded,
        None,
        None,
        Sensitivity.INTERNAL,
        "document",
        None,
        None,
        status,  # type: ignore[arg-type]
        recorded,
        ended,
    )


def test_bars_fall_where_their_moments_do_and_the_moment_asked_is_marked() -> None:
    v1 = _version(1, T0, T0 + timedelta(days=2))
    v2 = replace(
        _version(2, T0 + timedelta(days=2), None, "active"),
        valid_from=T0 - timedelta(days=1),
        valid_until=T0 + timedelta(days=9),
    )
    now = T0 + timedelta(days=4)
    axis = lay_out([v1, v2], now, T0 + timedelta(days=1), in_force=1)
    first, second = axis.bars
    assert axis.plot_left <= first.x < second.x < axis.now_x <= axis.plot_right
    assert first.x + first.width == pytest.approx(second.x)  # v1 ended as v2 was recorded
    assert second.x + second.width == pytest.approx(axis.now_x)  # current: drawn to now
    assert second.still_current and not first.still_current
    assert first.in_force and not second.in_force
    assert first.valid is None and second.valid is not None and second.valid[0] < first.x
    assert axis.marker_x is not None and first.x < axis.marker_x < second.x
    assert axis.marker_label == "as of 2026-03-02 12:00:00.000 UTC"
    assert [t.x for t in axis.ticks] == sorted(t.x for t in axis.ticks) and len(axis.ticks) == 6
    assert change_points([v1, v2]) == [
        T0 - timedelta(days=1),
        T0,
        T0 + timedelta(days=2),
        T0 + timedelta(days=9),
    ]


def test_a_record_of_one_instant_is_still_drawn() -> None:
    only = _version(1, T0, None, "active")
    axis = lay_out([only], T0, None, None)
    (bar,) = axis.bars
    assert bar.width >= 2 and axis.plot_left <= bar.x <= axis.plot_left + PLOT
    assert axis.marker_x is None and axis.marker_label == ""


EARLIEST, LATEST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize(("valid_from", "valid_until"), [(None, LATEST), (EARLIEST, None)])
def test_a_valid_time_bounded_at_the_calendars_end_is_drawn_inside_the_plot(
    valid_from: datetime | None, valid_until: datetime | None
) -> None:
    """A valid time bounded at the calendar's first or last moment (a common 'never'), or a moment
    asked there, leaves no room for the margin: the axis stops at the calendar's end."""
    v = replace(_version(1, T0, None, "active"), valid_from=valid_from, valid_until=valid_until)
    for as_of in (None, LATEST, EARLIEST):
        axis = lay_out([v], T0 + timedelta(days=1), as_of, None)
        (bar,) = axis.bars
        assert bar.valid is not None and axis.plot_left <= bar.valid[0] <= axis.plot_right
        assert axis.plot_left <= bar.x <= axis.plot_right
