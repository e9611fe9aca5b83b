"""Recall's test of a result: whether it holds a need phrased as a query, and which lines."""

from __future__ import annotations

import pytest

from mnemo_sea.archive import InvalidInput
from mnemo_sea.curation.recall import HOLDS, TIED_SPAN_BYTES, WHOLE_CHARS, Holding, Need, holding_of, read

LONG = "\n".join(f"2026-12-01T10:{n // 60:02d}:{n % 60:02d}Z INFO request {n} served" for n in range(400))


def holding(text: str, description: str, need: Need, around: int) -> Holding | None:
    """What recall does with one result: read it for the need, then find where it holds it."""
    return holding_of(read(text, description, need), need, around)


def score(need: Need, text: str) -> float:
    return need.weight(need.found(text))


def with_line(at: int, line: str) -> str:
    lines = LONG.split("\n")
    lines.insert(at - 1, line)
    return "\n".join(lines)


def test_a_long_original_comes_back_as_the_window_that_carries_the_need() -> None:
    text = with_line(250, "2026-12-01T10:04:10Z ERROR payment gateway 502 for order O-7781")
    assert len(text) > WHOLE_CHARS
    found = holding(text, "logs.search", Need.of("gateway 502 O-7781"), around=2)
    assert found is not None and not found.whole
    assert (found.first_line, found.last_line) == (250, 254)  # from the line that holds it, 5 lines
    assert found.score == found.window_score == 1.0


def test_the_description_counts_for_the_result_not_for_a_window() -> None:
    """The topic is in the call's arguments, the figure on one line: the result holds the need,
    and the window is the line that carries the need's own terms."""
    text = with_line(90, "2026-12-01T10:01:29Z WARN p95 latency 812 ms")
    found = holding(text, 'metrics.query\n{"service": "checkout"}', Need.of("checkout p95 latency"), around=0)
    assert found is not None and (found.first_line, found.last_line) == (90, 90)
    assert found.score == 1.0 and found.window_score < 1.0


def test_a_short_original_comes_back_whole() -> None:
    text = "panel: cbc\nALT 112 U/L (high)\nnext check in two weeks"
    found = holding(text, "lab_results", Need.of("ALT 112"), around=0)
    assert found is not None and found.whole and (found.first_line, found.last_line) == (1, 3)


def test_below_the_bar_nothing_holds_the_need() -> None:
    text = with_line(10, "2026-12-01T10:00:09Z ERROR payment gateway timeout")
    need = Need.of("refund approved for order O-9911")
    assert holding(text, "logs.search", need, around=3) is None
    assert score(need, "order O-1042 refund pending") < HOLDS


def test_identifiers_and_chinese_words_count_where_the_text_holds_them() -> None:
    assert score(Need.of("billing.py line count"), "src/billing.py: 99 lines") >= HOLDS
    stock = Need.of("阿莫西林库存")
    assert set(stock.terms) == {"阿莫西林", "库存"}  # the longest words, not their parts
    assert score(stock, "阿莫西林 500mg 库存 3 盒") == 1.0
    assert score(stock, "处方依据：阿莫西林 12 mg/kg") == 0.5


@pytest.mark.parametrize("query", ["", "   ", "the of and", "!!!"])
def test_a_need_must_name_something_to_look_for(query: str) -> None:
    with pytest.raises(InvalidInput):
        Need.of(query)


def lines_of(count: int, extra: dict[int, str]) -> str:
    rows = [f"2026-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z INFO request {n} served" for n in range(count)]
    for at, line in extra.items():
        rows[at - 1] = line
    return "\n".join(rows)


def test_windows_far_apart_that_hold_the_need_alike_come_back_together() -> None:
    """Two lots of one drug, 250 lines apart: one window would be a guess between them."""
    text = lines_of(
        400,
        {
            50: "stock metronidazole 250mg lot L1 on hand 12",
            300: "stock metronidazole 250mg lot L2 on hand 40",
        },
    )
    found = holding(text, "pharmacy.stock", Need.of("metronidazole stock"), around=2)
    assert found is not None and found.tied == 2 and not found.ambiguous
    assert (found.first_line, found.last_line) == (50, 304)  # from the first window to the last


def test_equals_within_one_window_or_a_better_line_are_no_tie() -> None:
    near = lines_of(400, {50: "stock metronidazole lot L1", 52: "stock metronidazole lot L2"})
    found = holding(near, "pharmacy.stock", Need.of("metronidazole stock"), around=2)
    assert found is not None and found.tied == 1 and (found.first_line, found.last_line) == (50, 54)
    better = lines_of(400, {50: "stock metronidazole lot L1", 300: "stock metronidazole lot L2 expired"})
    found = holding(better, "pharmacy.stock", Need.of("metronidazole stock expired"), around=2)
    assert found is not None and found.tied == 1 and found.first_line == 300


def test_equals_spread_over_more_than_a_page_are_ambiguous() -> None:
    text = lines_of(3_000, {10: "stock metronidazole lot L1", 2_900: "stock metronidazole lot L2"})
    found = holding(text, "pharmacy.stock", Need.of("metronidazole stock"), around=2)
    assert found is not None and found.ambiguous and found.tied == 2
    assert len(text.encode()) > TIED_SPAN_BYTES
    assert (found.first_line, found.last_line) == (10, 2_904)
