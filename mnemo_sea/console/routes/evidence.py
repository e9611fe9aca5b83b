"""Evidence: the tenant's records, one record's versions on a time axis with the one in force at a
chosen moment, and one version with its exact original.

Ids go in a query parameter, not the path: an evidence id may hold `/`, `#`, `.`, `:` and `@`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, Response

from mnemo_sea.archive import EvidenceRecord, NotFound, Principal, limits
from mnemo_sea.console.pages import PAGE_SIZE, Window, as_text, download, render
from mnemo_sea.console.routes.common import MOMENT_CHARS, Offset, Viewer, mnemo_of, moment, page_router
from mnemo_sea.console.time_axis import change_points, lay_out
from mnemo_sea.system.mnemo import Mnemo

router = page_router()
EvidenceId = Annotated[str, Query(alias="id", min_length=1, max_length=limits.EVIDENCE_ID_CHARS)]
Version = Annotated[int, Query(ge=1, le=2**31 - 1)]
AsOf = Annotated[str | None, Query(max_length=MOMENT_CHARS)]
# The form's field shows a moment to the second (a datetime-local field's own precision).
FIELD_FORMAT = "%Y-%m-%dT%H:%M:%S"


@router.get("/evidence", response_class=HTMLResponse)
def records(request: Request, principal: Viewer, offset: Offset = 0) -> HTMLResponse:
    """The records the viewer may read, by id, each with its newest version."""
    found = mnemo_of(request).list_evidence(principal, limit=PAGE_SIZE + 1, offset=offset)
    items, window = Window.of(found, offset)
    return render(request, "evidence_list.html", principal, records=items, window=window)


@router.get("/evidence/item", response_class=HTMLResponse)
def record(request: Request, principal: Viewer, evidence_id: EvidenceId, as_of: AsOf = None) -> HTMLResponse:
    """Every version of a record on a time axis and in a table; with `as_of`, the version the
    archive answers with at that moment (its own `get_evidence(as_of=...)`), or none."""
    when = moment("as_of", as_of)
    mnemo = mnemo_of(request)
    versions = mnemo.evidence_history(principal, evidence_id)  # NotFound: never here, or another tenant's
    in_force = _in_force(mnemo, principal, evidence_id, when) if when is not None else None
    points = change_points(versions)
    # A version recorded (or ended) by a node whose clock runs ahead of this one's has all the same.
    now = max(datetime.now(UTC), *(t for v in versions for t in (v.recorded_at, v.ended_at) if t is not None))
    labels = [p.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC" for p in points]
    position = max((i for i, p in enumerate(points) if when is not None and p <= when), default=0)
    return render(
        request,
        "evidence_item.html",
        principal,
        evidence_id=evidence_id,
        versions=versions,
        newest=versions[-1],
        as_of=when,
        as_of_field="" if when is None else when.strftime(FIELD_FORMAT),
        in_force=in_force,
        axis=lay_out(versions, now, when, None if in_force is None else in_force.version),
        points_json=json.dumps([p.isoformat() for p in points]),
        labels_json=json.dumps(labels),
        point_labels=labels,
        position=position,
    )


def _in_force(mnemo: Mnemo, principal: Principal, evidence_id: str, when: datetime) -> EvidenceRecord | None:
    """The version the archive answered with at `when`, by its own rule (in force and valid
    then: archive/rules/in_force.py), not one the console works out again."""
    try:
        found, _ = mnemo.get_evidence(principal, evidence_id, as_of=when)
    except NotFound:  # the record exists (its history was read): nothing of it answers then
        return None
    return found


@router.get("/evidence/version", response_class=HTMLResponse)
def version(request: Request, principal: Viewer, evidence_id: EvidenceId, version: Version) -> HTMLResponse:
    """One version: its record, and its original as exact text (a download when not UTF-8)."""
    found, content = mnemo_of(request).get_evidence(
        principal, evidence_id, version=version, with_content=True
    )
    return render(
        request,
        "evidence_version.html",
        principal,
        record=found,
        text=as_text(content),
        size=len(content or b""),
    )


@router.get("/evidence/version/original")
def original(request: Request, principal: Viewer, evidence_id: EvidenceId, version: Version) -> Response:
    """A version's original, byte for byte (hash-verified by the archive), as a download."""
    found, content = mnemo_of(request).get_evidence(
        principal, evidence_id, version=version, with_content=True
    )
    return download(content, f"evidence-v{found.version}", found.media_type, found.content_sha256)
