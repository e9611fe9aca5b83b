"""Pages of an archived original: the units in which its text is indexed, and found again.

When a result is archived, its note is indexed at once, and its original, in pages, behind the
write (mnemo_sea/system/projection/indexer.py): a 2 MB log is about a thousand chunks, which an
agent's `archive` call must not wait for, nor the writes behind it, so one outbox row indexes
one page. Under the result's index id (`result:<session>/<rN>`) the note is version
`NOTE_VERSION` and page p is version `page_version(p)`: a deletion of the result removes every
version, so pages go wherever the note goes.

A page is a pure function of the original's bytes and its number, so the indexer, the search
hydrating a hit and fsck all cut the same bytes without storing where pages start: page p
covers the bytes from its start up to the next page's start, where page p starts at the first
line start within [p * PAGE_BYTES, (p + 1) * PAGE_BYTES) (a page holds whole lines), or, when
no line starts there (one very long line), at p * PAGE_BYTES moved forward off a UTF-8
continuation byte. So a page never splits a character, holds at most two windows' bytes, may be
empty (a line spanning the whole window; skipped), and an original of n bytes has
`page_count(n)` pages whatever its content: the archive enqueues them knowing only the size.
"""

from __future__ import annotations

# Bytes per page: 32 KiB is about 16 chunks of the index's 2,000 characters, a fraction of a
# second of the real model, which is how long a page holds the indexer against other writes.
PAGE_BYTES = 32 * 1024
# Versions of a result's index id: its note, then its original's pages.
NOTE_VERSION = 1
FIRST_PAGE_VERSION = 2


def page_ref(result_ref: str, page: int) -> str:
    """The outbox's name for page `page` of result `<session>/<rN>`: `<session>/<rN>#<page>`. The
    page is part of the name, not of a payload: a replay re-reads its target by name alone."""
    return f"{result_ref}#{page}"


def parse_page_ref(ref: str) -> tuple[str, int]:
    """(`<session>/<rN>`, page) of a page's name (a session id holds no `#`)."""
    result_ref, _, page = ref.rpartition("#")
    return result_ref, int(page)


def page_count(size: int) -> int:
    """How many pages an original of `size` bytes has (some may turn out empty)."""
    return -(-size // PAGE_BYTES)


def page_version(page: int) -> int:
    return FIRST_PAGE_VERSION + page


def page_of_version(version: int) -> int | None:
    """The page an index version of a result names; None for its note."""
    return None if version < FIRST_PAGE_VERSION else version - FIRST_PAGE_VERSION


def _page_start(content: bytes, page: int) -> int:
    if page <= 0:
        return 0
    window = page * PAGE_BYTES
    if window >= len(content):
        return len(content)
    newline = content.find(b"\n", window - 1, window - 1 + PAGE_BYTES)
    if newline >= 0:
        return newline + 1  # the first line starting in the window (at `window` if one ends before)
    at = window
    while at < len(content) and (content[at] & 0xC0) == 0x80:
        at += 1
    return at


def page_span(content: bytes, page: int) -> tuple[int, int]:
    """Bytes [start, end) of page `page` of `content` (empty when start == end)."""
    if not 0 <= page < page_count(len(content)):
        return len(content), len(content)
    return _page_start(content, page), _page_start(content, page + 1)


def page_first_line(content: bytes, start: int) -> int:
    """The line (from 1) at which a page starting at byte `start` begins."""
    return content.count(b"\n", 0, start) + 1
