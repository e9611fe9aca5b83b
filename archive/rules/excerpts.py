"""Excerpts: the part of an original that a span names, as a byte range and the lines it covers.

An agent that needs one figure of a 2 MB report should not put the report back into its prompt.
A span names the part it needs, in one of three ways:

- `lines=(first, last)`: lines `first` to `last`, counted from 1, both included;
- `byte_range=(start, end)`: bytes `start` (counted from 0) up to `end`, not included;
- `match="text"`: the line or lines holding the first occurrence of the text (exact, else
  ignoring case), with `around` lines before and after it.

A line ends after its newline; a last line without one still counts. The excerpt is always the
exact bytes of the original, cut at the range, never re-encoded; an excerpt of a text original
never splits a character. A span that the original cannot satisfy (outside it, inverted, empty,
a text it does not hold) is an `InvalidSpan` that names the original's size in lines and bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidInput, InvalidSpan

# Lines of context on each side of a match, unless the caller says otherwise.
DEFAULT_AROUND = 3
MAX_AROUND = 1_000


@dataclass(frozen=True)
class Excerpt:
    """Where an excerpt sits in its original: bytes [start, end) and lines first..last."""

    start: int
    end: int
    first_line: int
    last_line: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def of(self, content: bytes) -> bytes:
        """The excerpt's bytes, cut from the whole original."""
        return content[self.start : self.end]

    def describe(self) -> str:
        """`lines 12-14 (bytes 300-420)`: how an envelope and a locator name the excerpt."""
        lines = (
            f"line {self.first_line}"
            if self.first_line == self.last_line
            else f"lines {self.first_line}-{self.last_line}"
        )
        return f"{lines} (bytes {self.start}-{self.end})"


def line_count(content: bytes) -> int:
    """How many lines the original has: its newlines, plus a last line that has none."""
    if not content:
        return 0
    return content.count(b"\n") + (0 if content.endswith(b"\n") else 1)


def _line_start(content: bytes, line: int) -> int:
    """The offset where line `line` (from 1) starts; the lines before it are skipped by find,
    which runs in C: an original of 2 MB is not split into a list of its lines."""
    at = 0
    for _ in range(line - 1):
        at = content.index(b"\n", at) + 1
    return at


def _line_end(content: bytes, start: int) -> int:
    """The offset just after the line starting at `start` (after its newline, if it has one)."""
    newline = content.find(b"\n", start)
    return len(content) if newline < 0 else newline + 1


def _is_continuation(content: bytes, offset: int) -> bool:
    """Whether `offset` falls inside a UTF-8 character (on a continuation byte)."""
    return offset < len(content) and (content[offset] & 0xC0) == 0x80


@dataclass(frozen=True)
class _Original:
    content: bytes
    textual: bool
    result_id: str

    def refuse(self, span: str, problem: str) -> InvalidSpan:
        return InvalidSpan(span, problem, self.result_id, line_count(self.content), len(self.content))


def check_span(
    *,
    lines: object = None,
    byte_range: object = None,
    match: object = None,
    around: object = DEFAULT_AROUND,
) -> None:
    """The span's shape, before anything is read: at most one span, each a pair of whole numbers
    or a text, `around` in range. Raises InvalidInput naming the field. Whether the original can
    satisfy it is `resolve_span`'s question."""
    spans = (("lines", lines), ("byte_range", byte_range), ("match", match))
    given = [name for name, value in spans if value is not None]
    if len(given) > 1:
        raise InvalidInput(given[1], f"give one span, not {' and '.join(given)}")
    if isinstance(around, bool) or not isinstance(around, int) or not 0 <= around <= MAX_AROUND:
        raise InvalidInput("around", f"must be a whole number from 0 to {MAX_AROUND}, got {around!r}")
    for name, value in spans[:2]:
        if value is not None and not _is_pair(value):
            raise InvalidInput(name, f"must be two whole numbers [first, last], got {value!r}")
    if match is not None and (not isinstance(match, str) or not match.strip()):
        raise InvalidInput("match", "must be non-empty text to look for")


def _is_pair(value: object) -> bool:
    return (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    )


def resolve_span(
    content: bytes,
    *,
    result_id: str,
    textual: bool,
    lines: tuple[int, int] | None = None,
    byte_range: tuple[int, int] | None = None,
    match: str | None = None,
    around: int = DEFAULT_AROUND,
) -> Excerpt | None:
    """The excerpt of `content` that the one span given names; None when no span is given (the
    whole original). Raises InvalidInput for a malformed span (check_span) and InvalidSpan for
    one the original cannot satisfy. `textual`: the original is text, so a byte range must not
    split a character."""
    check_span(lines=lines, byte_range=byte_range, match=match, around=around)
    original = _Original(content, textual, result_id)
    if lines is not None:
        return _lines(original, (int(lines[0]), int(lines[1])))
    if byte_range is not None:
        return _bytes(original, (int(byte_range[0]), int(byte_range[1])))
    if match is not None:
        return _match(original, match, around)
    return None


def _lines(original: _Original, value: tuple[int, int]) -> Excerpt:
    first, last = value
    content = original.content
    if first > last:
        raise original.refuse("lines", f"{first}-{last} is inverted: the first line comes after the last")
    outside = original.refuse("lines", f"{first}-{last} is outside the original (lines are counted from 1)")
    if first < 1:
        raise outside
    # Walk to the lines rather than count them all: the original's size is only needed to refuse.
    try:
        start = _line_start(content, first)
    except ValueError:
        raise outside from None
    end = start
    for _ in range(last - first + 1):
        if end >= len(content):
            raise outside
        end = _line_end(content, end)
    return Excerpt(start, end, first, last)


def _bytes(original: _Original, value: tuple[int, int]) -> Excerpt:
    start, end = value
    size = len(original.content)
    if start > end:
        raise original.refuse("byte_range", f"{start}-{end} is inverted: the start comes after the end")
    if start == end:
        raise original.refuse("byte_range", f"{start}-{end} is empty: the end is not included")
    if start < 0 or end > size:
        raise original.refuse(
            "byte_range", f"{start}-{end} is outside the original (bytes are counted from 0)"
        )
    if original.textual:
        for offset in (start, end):
            if _is_continuation(original.content, offset):
                raise original.refuse(
                    "byte_range", f"byte {offset} falls inside a UTF-8 character; cut at a character boundary"
                )
    return _covering(original.content, start, end)


def _covering(content: bytes, start: int, end: int) -> Excerpt:
    """Bytes [start, end) with the lines they touch (newlines counted in C)."""
    first = content.count(b"\n", 0, start) + 1
    return Excerpt(start, end, first, first + content.count(b"\n", start, end - 1))


def _match(original: _Original, text: str, around: int) -> Excerpt:
    content = original.content
    needle = text.encode("utf-8", "surrogatepass")
    at = content.find(needle)
    length = len(needle)
    if at < 0:
        # Ignoring case, on the decoded text; offsets map back to the exact bytes.
        try:
            decoded = content.decode("utf-8") if original.textual else ""
        except UnicodeDecodeError:
            decoded = ""  # offsets in a repaired text would not map back to the bytes
        found = re.search(re.escape(text), decoded, re.IGNORECASE) if decoded else None
        if found is None:
            raise original.refuse("match", f"the original does not hold {text[:80]!r}")
        at = len(decoded[: found.start()].encode("utf-8"))
        length = len(found.group(0).encode("utf-8"))
    hit = _covering(content, at, at + length)
    # Widen to whole lines, then `around` more on each side, stopping at the original's edges.
    start = content.rfind(b"\n", 0, at) + 1
    first = hit.first_line
    while first > 1 and first > hit.first_line - around:
        start = content.rfind(b"\n", 0, start - 1) + 1
        first -= 1
    end = _line_end(content, at + length - 1)
    last = hit.last_line
    while end < len(content) and last < hit.last_line + around:
        end = _line_end(content, end)
        last += 1
    return Excerpt(start, end, first, last)
