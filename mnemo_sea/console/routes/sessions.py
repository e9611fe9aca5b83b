"""Sessions: the list, one session as a timeline of its results, a result with its exact
original, and the context the assembler would build for the session now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, Response

from mnemo_sea.archive import Principal, ToolResult, render_live, render_stub
from mnemo_sea.console.pages import PAGE_SIZE, Window, as_text, download, render
from mnemo_sea.console.routes.common import Offset, Viewer, mnemo_of, page_router
from mnemo_sea.system.mnemo import Mnemo

router = page_router()
# The budget a session's context page starts with, and the largest it accepts.
DEFAULT_BUDGET = 16_000
MAX_BUDGET = 2_000_000


@dataclass(frozen=True)
class TimelineRow:
    """One result as the timeline shows it: what it is now and what it costs in view."""

    result: ToolResult
    status: str  # live | archived | recovered (whole) | recovered excerpt
    in_view: str  # the envelope or stub the model would read; "" when not readable here
    tokens: int | None  # of `in_view`; None when the principal may not read the content


def _status(result: ToolResult) -> str:
    if result.state == "archived":
        return "archived"
    if result.recovered_from is not None:
        return "recovered excerpt" if result.excerpt is not None else "recovered"
    return "live"


def _row(mnemo: Mnemo, principal: Principal, result: ToolResult, content: bytes | None) -> TimelineRow:
    """`content`: what a live result shows, as the page's one read returned it (None when the
    principal may not read it)."""
    status = _status(result)
    if result.state == "archived":
        stub = render_stub(result)
        return TimelineRow(result, status, stub, mnemo.token_counter.count(stub))
    if content is None:  # above the principal's clearance
        return TimelineRow(result, status, "", None)
    envelope = render_live(result, content)
    return TimelineRow(result, status, envelope, mnemo.token_counter.count(envelope))


@router.get("/", response_class=HTMLResponse)
@router.get("/sessions", response_class=HTMLResponse)
def sessions(request: Request, principal: Viewer, offset: Offset = 0) -> HTMLResponse:
    found = mnemo_of(request).list_sessions(principal, limit=PAGE_SIZE + 1, offset=offset)
    items, window = Window.of(found, offset)
    return render(request, "sessions.html", principal, sessions=items, window=window)


@router.get("/sessions/{session_id}", response_class=HTMLResponse)
def session(request: Request, session_id: str, principal: Viewer, offset: Offset = 0) -> HTMLResponse:
    mnemo = mnemo_of(request)
    info = mnemo.session_info(principal, session_id)
    # The page's results and the originals of its live ones in one read: one transaction, not
    # one `get_result` per row (each original still hash-verified).
    found = mnemo.archive.list_results_with_content(principal, session_id, offset=offset, limit=PAGE_SIZE + 1)
    items, window = Window.of(found, offset)
    rows = [_row(mnemo, principal, r, content) for r, content in items]
    last_page = max(info.results - 1, 0) // PAGE_SIZE * PAGE_SIZE
    return render(
        request,
        "session.html",
        principal,
        info=info,
        rows=rows,
        window=window,
        last_page=last_page,
        tokens_shown=sum(r.tokens or 0 for r in rows),
        tokenizer=mnemo.token_counter.name,
    )


@router.get("/sessions/{session_id}/results/{result_id}", response_class=HTMLResponse)
def result(request: Request, session_id: str, result_id: str, principal: Viewer) -> HTMLResponse:
    """One result: its record, and its original as exact text (a download when not UTF-8)."""
    mnemo = mnemo_of(request)
    record, content = mnemo.get_result(principal, session_id, result_id, with_content=True)
    return render(
        request,
        "result.html",
        principal,
        result=record,
        status=_status(record),
        text=None if content is None else as_text(content),
        shown_bytes=len(content or b""),
        stub=render_stub(record) if record.state == "archived" else None,
    )


@router.get("/sessions/{session_id}/results/{result_id}/original")
def original(request: Request, session_id: str, result_id: str, principal: Viewer) -> Response:
    """What the result shows, byte for byte (hash-verified by the archive), as a download."""
    record, content = mnemo_of(request).get_result(principal, session_id, result_id, with_content=True)
    return download(content, f"{session_id}-{result_id}", record.media_type, record.content_sha256)


@router.get("/sessions/{session_id}/context", response_class=HTMLResponse)
def context(
    request: Request,
    session_id: str,
    principal: Viewer,
    budget: Annotated[int, Query(ge=1, le=MAX_BUDGET)] = DEFAULT_BUDGET,
    query: Annotated[str | None, Query(max_length=2_000)] = None,
    left_offset: Offset = 0,
    candidates_offset: Offset = 0,
) -> HTMLResponse:
    """The context the assembler would build now: kept segments, what was left out and why, and
    the live results worth archiving, the two lists a page at a time (a long session leaves out
    thousands). Reads only."""
    mnemo = mnemo_of(request)
    assembled = mnemo.context(principal, session_id, budget_tokens=budget, query=query or None)
    left, left_window = Window.of(
        list(assembled.left_out[left_offset : left_offset + PAGE_SIZE + 1]), left_offset, param="left_offset"
    )
    candidates, candidates_window = Window.of(
        list(assembled.candidates[candidates_offset : candidates_offset + PAGE_SIZE + 1]),
        candidates_offset,
        param="candidates_offset",
    )
    return render(
        request,
        "context.html",
        principal,
        session_id=session_id,
        assembled=assembled,
        budget=budget,
        query=query or "",
        left=left,
        left_window=left_window,
        candidates=candidates,
        candidates_window=candidates_window,
    )
