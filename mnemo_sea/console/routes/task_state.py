"""A session's task state: its versions side by side (newest on the right), each with what it
holds, where its confirmed facts' evidence is, and what it changed against the version before;
then the writes the archive refused that its audit chain recorded (admins only)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from mnemo_sea.archive import AuditEvent, Principal, Role, TaskState
from mnemo_sea.console.links import cited_link
from mnemo_sea.console.pages import Window, base_of, render
from mnemo_sea.console.routes.common import OptionalOffset, Viewer, mnemo_of, page_router
from mnemo_sea.console.task_state_changes import LISTS, history_changes
from mnemo_sea.system.mnemo import Mnemo

router = page_router()
# Versions side by side on one page: four columns fit the page's width and stay readable.
VERSIONS_PER_PAGE = 4
# The refused writes a page lists, newest first.
REFUSALS_SHOWN = 50
# The archive's name of a task state write in a denied event's detail (archive/api.py `_guard`).
WRITE_ACTION = "update_task_state"
# Denied events read at a time while looking for the writes among them.
_READ = 200


@dataclass(frozen=True)
class Refusal:
    """A write of the session's task state the archive refused and audited: who, when, and
    what the chain recorded of why (the fields citing evidence above the writer's clearance, or
    the reason a role or clearance was missing)."""

    event: AuditEvent
    attempted: str
    problems: tuple[str, ...]


def _refusal(event: AuditEvent) -> Refusal:
    detail: dict[str, Any] = event.detail
    problems: list[str] = []
    if detail.get("fields"):
        problems += [f"{field}: cites evidence above the writer's clearance" for field in detail["fields"]]
    if detail.get("reason"):
        problems.append(str(detail["reason"]))
    return Refusal(event, str(detail.get("action", "")), tuple(problems))


def _refusals(mnemo: Mnemo, principal: Principal, session_id: str) -> tuple[list[Refusal], bool] | None:
    """The session's audited refused writes, newest first, and whether more are in the chain;
    None when the principal may not read the chain (asking would be a denied access, audited
    itself). The chain files a refused read of the task state under the same target (its
    `detail.action` names the call), so only the events of a write are kept."""
    if not principal.has(Role.ADMIN):
        return None
    writes: list[AuditEvent] = []
    before: int | None = None
    while len(writes) <= REFUSALS_SHOWN:
        found = mnemo.archive.find_audit_events(
            principal, action="denied", target=f"task_state:{session_id}", before_seq=before, limit=_READ
        )
        writes += [e for e in found if e.detail.get("action") == WRITE_ACTION]
        if len(found) < _READ:
            break
        before = found[-1].seq
    return [_refusal(e) for e in writes[:REFUSALS_SHOWN]], len(writes) > REFUSALS_SHOWN


def _hidden(history: list[TaskState]) -> list[int]:
    """The version numbers below the newest readable one that the reader may not read."""
    shown = {s.version for s in history}
    return [v for v in range(1, max(shown, default=0)) if v not in shown]


@router.get("/sessions/{session_id}/task-state", response_class=HTMLResponse)
def task_state(
    request: Request, session_id: str, principal: Viewer, offset: OptionalOffset = None
) -> HTMLResponse:
    mnemo = mnemo_of(request)
    history = mnemo.task_state_history(principal, session_id)
    # The newest versions first: a page opens on the state the agent works from now.
    start = max(len(history) - VERSIONS_PER_PAGE, 0) if offset is None else offset
    versions, window = Window.of(history[start : start + VERSIONS_PER_PAGE + 1], start, VERSIONS_PER_PAGE)
    refusals = _refusals(mnemo, principal, session_id)
    return render(
        request,
        "task_state.html",
        principal,
        session_id=session_id,
        versions=versions,
        total=len(history),
        hidden=_hidden(history),
        # The newest version the reader may read is superseded: the ones after it are not theirs.
        newer_hidden=bool(history) and history[-1].status == "superseded",
        newest=history[-1].version if history else None,
        changes=history_changes(history),
        lists=LISTS,
        labels=dict(LISTS),
        cited=partial(cited_link, base_of(request)),
        window=window,
        refusals=None if refusals is None else refusals[0],
        more_refusals=refusals is not None and refusals[1],
    )
