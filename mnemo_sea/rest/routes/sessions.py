"""Sessions: record tool results, read the live view, archive a batch, recover an original (or an excerpt),
assemble the working context under a token budget, and read and write the task state."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from mnemo_sea.archive import (
    MAX_VERSION,
    ArchiveReceipt,
    ArchiveResultsOp,
    ExcerptSpan,
    SessionInfo,
    TaskState,
    ToolResult,
    UpdateTaskStateOp,
)
from mnemo_sea.rest.auth import Caller, System
from mnemo_sea.rest.models import (
    ContextIn,
    ContextOut,
    CurationOut,
    LiveViewOut,
    Page,
    RecallOut,
    RecordIn,
    RecoveredOut,
    ResultOut,
    page,
    read_ahead_page,
)
from mnemo_sea.rest.problems import responses
from mnemo_sea.rest.routes.common import IdempotencyKey, Limit, Offset
from mnemo_sea.rest.threads import PooledRoute
from mnemo_sea.system.json_ready import content_fields
from mnemo_sea.system.operations import CurateOp, RecallOp

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], route_class=PooledRoute)


@router.get("", response_model=Page[SessionInfo], responses=responses(403))
def list_sessions(
    principal: Caller, mnemo: System, offset: Offset = 0, limit: Limit = 50
) -> Page[SessionInfo]:
    """The tenant's sessions, oldest first, with their result counts (live and archived); a
    reader's key lists only the sessions about itself."""
    found = mnemo.list_sessions(principal, limit=limit + 1, offset=offset)
    return read_ahead_page(found, offset, limit)


@router.get("/{session_id}", response_model=SessionInfo, responses=responses(403, 404))
def session_info(session_id: str, principal: Caller, mnemo: System) -> SessionInfo:
    """One session with its result counts (live and archived), as the listing shows it."""
    return mnemo.session_info(principal, session_id)


@router.post(
    "/{session_id}/results",
    status_code=status.HTTP_201_CREATED,
    response_model=ToolResult,
    responses=responses(403, 404, 409, 413),
)
def record_result(
    session_id: str, body: RecordIn, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> ToolResult:
    """Record a tool result in a session (created on first use); it gets the next id (r1, r2, ...)."""
    return mnemo.record(
        principal,
        session_id,
        content=body.payload(),
        **body.as_kwargs(exclude={"content", "content_base64"}),
        idempotency_key=idempotency_key,
    )


@router.get("/{session_id}/results", response_model=Page[ToolResult], responses=responses(403, 404))
def list_results(
    session_id: str, principal: Caller, mnemo: System, offset: Offset = 0, limit: Limit = 50
) -> Page[ToolResult]:
    """The session's results in order, live and archived (with their notes), without content."""
    found = mnemo.list_results(principal, session_id, offset=offset, limit=limit + 1)
    return read_ahead_page(found, offset, limit)


@router.get("/{session_id}/results/{result_id}", response_model=ResultOut, responses=responses(403, 404, 500))
def get_result(
    session_id: str,
    result_id: str,
    principal: Caller,
    mnemo: System,
    content: Annotated[bool, Query(description="include what it shows, hash-verified")] = False,
) -> ResultOut:
    """One result, changing nothing (POST …/recover is what appends a copy): its record and, with
    `content`, its original (an excerpt copy's excerpt); an archived original needs the agent role."""
    result, body = mnemo.get_result(principal, session_id, result_id, with_content=content)
    return ResultOut(result=result, **({} if body is None else content_fields(body)))


@router.get("/{session_id}/live", response_model=LiveViewOut, responses=responses(403, 404))
def live_view(session_id: str, principal: Caller, mnemo: System) -> LiveViewOut:
    """The working context: live results in envelopes, archived ones as in-place stubs."""
    return LiveViewOut.of(mnemo.live_view(principal, session_id))


@router.post("/{session_id}/archive", response_model=ArchiveReceipt, responses=responses(403, 404, 409, 413))
def archive_results(
    session_id: str,
    body: ArchiveResultsOp,
    principal: Caller,
    mnemo: System,
    idempotency_key: IdempotencyKey = None,
) -> ArchiveReceipt:
    """Archive results all or nothing, each replaced by its note. A 422 (409 when every problem
    is an already-archived target) lists each target's status; nothing changed."""
    return mnemo.archive_results(principal, session_id, **body.as_kwargs(), idempotency_key=idempotency_key)


@router.post(
    "/{session_id}/results/{result_id}/recover",
    response_model=RecoveredOut,
    responses=responses(403, 404, 409, 413),
)
def recover(
    session_id: str,
    result_id: str,
    principal: Caller,
    mnemo: System,
    idempotency_key: IdempotencyKey = None,
    body: ExcerptSpan | None = None,
) -> RecoveredOut:
    """The exact original, hash-verified, appended to the session labelled historical (with a
    staleness warning for prices, stock and the like). A body with one span (`lines`,
    `byte_range` or `match`) brings back only that part, checked against the whole original's
    hash; a 422 `invalid_span` names the original's size in lines and bytes when it cannot."""
    span = {} if body is None else body.as_kwargs()
    return RecoveredOut.of(
        mnemo.recover(principal, session_id, result_id, **span, idempotency_key=idempotency_key)
    )


@router.post("/{session_id}/curate", response_model=CurationOut, responses=responses(403, 404, 409, 413))
def curate(
    session_id: str,
    principal: Caller,
    mnemo: System,
    idempotency_key: IdempotencyKey = None,
    body: CurateOp | None = None,
) -> CurationOut:
    """Set aside what the session no longer needs in view (the automatic policy: large results
    newer ones followed, the oldest past the budget; never protected classes), each with an
    automatic note; with `need`, first bring back only the excerpt that holds it."""
    fields = {} if body is None else body.as_kwargs()
    return CurationOut.of(mnemo.curate(principal, session_id, **fields, idempotency_key=idempotency_key))


@router.post("/{session_id}/recall", response_model=RecallOut, responses=responses(403, 404, 409, 413))
def recall(
    session_id: str, body: RecallOp, principal: Caller, mnemo: System, idempotency_key: IdempotencyKey = None
) -> RecallOut:
    """Find the line of the session's results that holds a need phrased as `query`, and bring back
    only its excerpt (`recovered`); `in_view` when a live result holds it; `ambiguous` when lines
    far apart hold it alike, too many to bring back; `not_found` with every result checked, never
    a guess."""
    return RecallOut.of(
        mnemo.recall(principal, session_id, **body.as_kwargs(), idempotency_key=idempotency_key)
    )


@router.post("/{session_id}/context", response_model=ContextOut, responses=responses(403, 404, 413))
def context(session_id: str, body: ContextIn, principal: Caller, mnemo: System) -> ContextOut:
    """The working context of this turn under `budget_tokens`, with its accounting: each kept
    segment (pinned ones are never cut), totals per component, what was left out and why, and
    live results worth archiving. Reads only: nothing is archived. A 422 `context_over_budget`
    names the sizes when the pinned segments alone exceed the budget."""
    assembled = mnemo.context(principal, session_id, **body.as_kwargs(exclude={"with_text"}))
    return ContextOut.of(assembled, with_text=body.with_text)


TaskStateVersion = Annotated[
    int | None, Query(ge=1, le=MAX_VERSION, description="this version (default: the current one)")
]


@router.get("/{session_id}/task-state", response_model=TaskState | None, responses=responses(403, 404))
def task_state(
    session_id: str, principal: Caller, mnemo: System, version: TaskStateVersion = None
) -> TaskState | None:
    """The session's current task state, or `?version=N`. `null` (200) when the session has no
    task state yet; 404 for a missing session, or a version it does not have."""
    return mnemo.task_state(principal, session_id, version=version)


@router.post(
    "/{session_id}/task-state",
    status_code=status.HTTP_201_CREATED,
    response_model=TaskState,
    responses=responses(403, 404, 409, 413),
)
def update_task_state(
    session_id: str,
    body: UpdateTaskStateOp,
    principal: Caller,
    mnemo: System,
    idempotency_key: IdempotencyKey = None,
) -> TaskState:
    """Write the next version of the task state (the session is created on first use), validated
    whole against the current one: a constraint or open item left out needs a release reason,
    or a confirmed fact that settles it with evidence. A 422 `task_state_rejected` lists every
    problem (nothing stored); a 409 names the `current_version` when `expected_version` is stale."""
    return mnemo.update_task_state(principal, session_id, **body.as_kwargs(), idempotency_key=idempotency_key)


@router.get("/{session_id}/task-state/history", response_model=Page[TaskState], responses=responses(403, 404))
def task_state_history(
    session_id: str, principal: Caller, mnemo: System, offset: Offset = 0, limit: Limit = 50
) -> Page[TaskState]:
    """Every version of the task state, oldest first (versions above your clearance left out)."""
    return page(mnemo.task_state_history(principal, session_id), offset, limit)
