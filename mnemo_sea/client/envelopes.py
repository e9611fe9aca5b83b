"""A live view checked envelope by envelope: what the agent reads is what its records say.

The live view is the text an agent puts before its model, so an altered one is the answer that
matters most (a tool output rewritten into instructions). Each item's `rendered` is made again
here, the archive's way (mnemo_sea.archive.rules.tool_results), from the item's own result:

- an archived result: its stub, exactly (call, note, how to recover);
- a result above the reader's clearance (served without its hash): the withheld stub, exactly;
- a live result: the envelope of the one content that hashes to the result's `content_sha256`
  (the text between the envelope's lines, unescaped), or, for a binary or non-UTF-8 original,
  the line that names its size and hash.

A result that a later one of the same call replaced is rendered with the item's `superseded_by`.
What it cannot check: a staleness warning (the server's policy and clock decide it; only its
place and form are checked), a result altered with its hash and envelope alike,
and an excerpt's bytes (the whole original they were cut from is not sent: only their size).
"""

from __future__ import annotations

import hashlib

from mnemo_sea.archive import LiveItem, ToolResult, escape_text, render_live, render_stub, render_withheld

# Stands for the body while the rest of an envelope is rendered: no envelope holds a NUL.
_BODY = "\x00body\x00"
_NOT_UTF8 = b"\xff"


def _unescaped(text: str) -> str:
    """escape_text undone (&amp; last, so an escaped `&lt;` stays `&lt;`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _warnings(rendered: str) -> list[str | None]:
    """The staleness warnings an envelope may carry: none, or the text of its warning line."""
    found: list[str | None] = [None]
    for line in rendered.split("\n")[1:3]:
        if line.startswith("[warning: ") and line.endswith("]"):
            found.append(_unescaped(line[len("[warning: ") : -1]))
    return found


def _live_matches(result: ToolResult, rendered: str, superseded_by: str | None) -> bool:
    for warning in _warnings(rendered):
        if rendered == render_live(result, _NOT_UTF8, warning, superseded_by):
            return True  # the binary line: no content is shown, the size and hash are the record's
        head, _, tail = render_live(result, _BODY.encode("utf-8"), warning, superseded_by).partition(_BODY)
        if not (rendered.startswith(head) and rendered.endswith(tail)) or len(rendered) < len(head) + len(
            tail
        ):
            continue
        shown = rendered[len(head) : len(rendered) - len(tail)]
        content = _unescaped(shown)
        if escape_text(content) == shown and _is_its_content(result, content.encode("utf-8")):
            return True
    return False


def _is_its_content(result: ToolResult, content: bytes) -> bool:
    """Whether `content` is what the result shows: its original, by hash; an excerpt's copy shows
    part of an original that is not sent, so only the excerpt's size can be held against it."""
    if result.excerpt is not None:
        return len(content) == result.excerpt.size
    return hashlib.sha256(content).hexdigest() == result.content_sha256


def shows_its_record(item: LiveItem) -> bool:
    """Whether `item.rendered` is what the archive renders for `item.result` (see the module)."""
    result = item.result
    if item.rendered == render_withheld(result) and result.content_sha256 == "":
        return True
    if result.state == "archived":
        return item.rendered == render_stub(result, item.superseded_by)
    return _live_matches(result, item.rendered, item.superseded_by)


__all__ = ["shows_its_record"]
