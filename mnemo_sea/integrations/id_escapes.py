"""How an adapter writes a framework's names (a LangGraph namespace label, a LlamaIndex node id)
into the archive's identifiers, reversibly: `IdEscape`.

A character of the kept set stays; any other becomes the escape mark and the two hex digits of
each of its UTF-8 bytes (`a b` is `a.20b` with mark `.`). The mark itself is never kept, so
decoding is unambiguous. A text is an adapter's name only if it decodes and encodes back to
itself: a malformed escape, bytes that are not UTF-8 or another spelling (`.2F` for `.2f`) decode
to None, so an id written by other means is never mistaken for one.

Nothing here imports a framework.
"""

from __future__ import annotations

import string
from dataclasses import dataclass


@dataclass(frozen=True)
class IdEscape:
    """One escaping: `kept` the characters that stay, `mark` the escape character (not kept),
    `upper` whether the hex digits are written A-F (else a-f)."""

    kept: frozenset[str]
    mark: str
    upper: bool = False

    def encode(self, text: str) -> str:
        """`text` escaped; UnicodeEncodeError (a ValueError) for a lone surrogate, which has no
        UTF-8 bytes."""
        digits = "{:02X}" if self.upper else "{:02x}"
        return "".join(
            c if c in self.kept else "".join(self.mark + digits.format(b) for b in c.encode()) for c in text
        )

    def decode(self, text: str) -> str | None:
        """The text `encode` made `text` of; None when `encode` could not have written it."""
        raw = bytearray()
        i = 0
        while i < len(text):
            if text[i] == self.mark:
                pair = text[i + 1 : i + 3]
                if len(pair) != 2 or not all(d in string.hexdigits for d in pair):
                    return None
                raw.append(int(pair, 16))
                i += 3
            else:
                try:
                    raw += text[i].encode()
                except UnicodeEncodeError:
                    return None
                i += 1
        try:
            decoded = raw.decode()
        except UnicodeDecodeError:
            return None
        return decoded if self.encode(decoded) == text else None


__all__ = ["IdEscape"]
