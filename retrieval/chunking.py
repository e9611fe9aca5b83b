"""Split long bodies into chunks whose spans point into the original text.

Contract of `split_into_chunks(text, policy)`:
- every chunk satisfies `chunk.text == text[chunk.start:chunk.end]` (hydration quotes by span);
- chunks are in order, numbered 0..n-1, never empty and never start or end in whitespace;
- a text that fits the budget is one chunk; a text of only whitespace has no chunks;
- consecutive chunks overlap by about `overlap_chars`, so a sentence cut at a boundary is
  still whole in one of them; cuts prefer a paragraph break, then a sentence end, then a space.

The budget is in characters, except that a Han character (or CJK punctuation mark) costs
`han_char_cost` units: the dense model spends one word piece on it against about one per four
characters of English. The default of 2,000 is a measured compromise (eval/README.md): BM25
ranks best on whole documents, all-MiniLM-L6-v2 reads only the first 256 word pieces (about
1,000 characters) of a chunk, and 2,000 gave the best hybrid on SciFact of 1,000, 2,000 and
unchunked.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from itertools import accumulate

from .evidence import Chunk

# Han ideographs plus CJK punctuation and full-width forms: one model token each.
_HAN = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ebef]")
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"[.!?;:][\"')\]\u201d\u2019]*\s|[\u3002\uff01\uff1f\uff1b\n]")
_SPACE = re.compile(r"\s")


@dataclass(frozen=True)
class ChunkingPolicy:
    max_chars: int = 2000
    overlap_chars: int = 100
    han_char_cost: int = 4

    def __post_init__(self) -> None:
        if self.max_chars < 16:
            raise ValueError(f"max_chars must be >= 16, got {self.max_chars}")
        if not 0 <= self.overlap_chars <= self.max_chars // 2:
            raise ValueError(f"overlap_chars must be in [0, max_chars/2], got {self.overlap_chars}")
        if self.han_char_cost < 1:
            raise ValueError(f"han_char_cost must be >= 1, got {self.han_char_cost}")


def split_into_chunks(text: str, policy: ChunkingPolicy) -> tuple[Chunk, ...]:
    # An ASCII string (a flag of the string, no scan) holds no Han: the search costs ~1 us a
    # 250-character text (timeit), a share of ingesting a short document.
    han = not text.isascii() and _HAN.search(text) is not None
    if not han and len(text) <= policy.max_chars:
        # Fits whole at one unit a character: the one trimmed chunk `_split` would give, without
        # its prefix sums (a third of chunking a short text; tests/retrieval/test_chunking.py).
        chunks: list[Chunk] = []
        _append(chunks, text, _skip_space(text, 0), len(text))
        return tuple(chunks)
    return _split(text, policy, han)


def _split(text: str, policy: ChunkingPolicy, han: bool) -> tuple[Chunk, ...]:
    """The chunks of `text` (`han`: whether it holds a Han character), cut by the budget."""
    n = len(text)
    if han:
        costs = [policy.han_char_cost if _HAN.match(c) else 1 for c in text]
        prefix = [0, *accumulate(costs)]
    else:
        prefix = list(range(n + 1))
    chunks: list[Chunk] = []
    start = _skip_space(text, 0)
    while start < n:
        # The furthest end whose cost from `start` stays within the budget.
        limit = bisect.bisect_right(prefix, prefix[start] + policy.max_chars) - 1
        limit = max(limit, start + 1)
        end = n if limit >= n else _cut(text, start, limit, prefix, policy.max_chars)
        _append(chunks, text, start, end)
        if end >= n:
            break
        # Step back by the overlap, then forward to a word start, but always make progress.
        back = bisect.bisect_left(prefix, prefix[end] - policy.overlap_chars)
        nxt = _word_start(text, back, end)
        start = _skip_space(text, nxt if nxt > start else end)
    return tuple(chunks)


def _cut(text: str, start: int, limit: int, prefix: list[int], budget: int) -> int:
    """Where to end a chunk that cannot reach the end: the best boundary in its second half."""
    half = bisect.bisect_left(prefix, prefix[start] + budget // 2)
    window = text[half:limit]
    for pattern in (_PARAGRAPH, _SENTENCE, _SPACE):
        last = None
        for last in pattern.finditer(window):  # noqa: B007 - we want the last match
            pass
        if last is not None:
            return half + last.end()
    return limit  # one long word: cut it


def _word_start(text: str, pos: int, end: int) -> int:
    """The first word start at or after `pos` (before `end`), or `pos` if none."""
    if pos == 0 or text[pos - 1].isspace() or _HAN.match(text[pos]):
        return pos
    found = _SPACE.search(text, pos, end)
    return found.end() if found else pos


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _append(chunks: list[Chunk], text: str, start: int, end: int) -> None:
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        chunks.append(Chunk(index=len(chunks), start=start, end=end, text=text[start:end]))
