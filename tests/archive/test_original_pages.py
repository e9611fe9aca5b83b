"""Pages of an original: they cover it exactly, in order, hold whole lines where a line starts in
their window, never split a character, and their number follows from the size alone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_sea.archive.rules import original_pages
from mnemo_sea.archive.rules.original_pages import (
    PAGE_BYTES,
    page_count,
    page_first_line,
    page_of_version,
    page_span,
    page_version,
)

# Lines of every length in any script; some are repeated far past a page (drawn short, repeated:
# drawing 30,000 characters one by one is more than hypothesis allows an example).
_LINE = st.tuples(
    st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=40),
    st.sampled_from([1, 1, 1, 50, PAGE_BYTES // 4]),
)


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(_LINE, max_size=300), trailing_newline=st.booleans())
def test_pages_cover_the_original_in_order_at_line_starts_or_character_boundaries(
    lines: list[tuple[str, int]], trailing_newline: bool
) -> None:
    text = "\n".join(piece * times for piece, times in lines) + ("\n" if trailing_newline and lines else "")
    content = text.encode("utf-8")
    spans = [page_span(content, p) for p in range(page_count(len(content)))]
    at = 0
    for p, (start, end) in enumerate(spans):
        assert start == at and end >= start
        at = end
        content[start:end].decode("utf-8")  # never splits a character
        window = content[max(p * PAGE_BYTES - 1, 0) : (p + 1) * PAGE_BYTES - 1]
        if p > 0 and b"\n" in window:
            assert content[start - 1 : start] == b"\n"  # a line starts where a page does
        assert end - start <= 2 * PAGE_BYTES + 3
        assert page_first_line(content, start) == content[:start].count(b"\n") + 1
    assert at == len(content)


def test_the_number_of_pages_and_their_versions() -> None:
    assert [page_count(n) for n in (0, 1, PAGE_BYTES, PAGE_BYTES + 1)] == [0, 1, 1, 2]
    assert page_of_version(original_pages.NOTE_VERSION) is None
    assert [page_of_version(page_version(p)) for p in range(3)] == [0, 1, 2]
    assert page_span(b"abc", 5) == (3, 3)  # past the end: empty


def test_one_long_line_is_cut_at_character_boundaries() -> None:
    content = ("汉" * PAGE_BYTES).encode("utf-8")  # 3 bytes a character, no newline
    for p in range(page_count(len(content))):
        start, end = page_span(content, p)
        assert start % 3 == 0 and end % 3 == 0 and end > start
