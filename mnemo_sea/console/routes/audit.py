"""The tenant's audit chain (admins only): its events filtered by kind, subject, target and time,
newest first; whether the chain verifies now (checked live on every view); and its current head,
signed, offered as a JSON file an operator keeps away from the database."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, Response

from mnemo_sea.archive import AuditAnchor, AuditEvent, AuditReport, Principal
from mnemo_sea.console.pages import PAGE_SIZE, render, security_headers
from mnemo_sea.console.routes.common import BeforeSeq, Viewer, mnemo_of, moment, page_router
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.receipt_json import anchor_to_dict

router = page_router()
Text = Annotated[str | None, Query(max_length=1024)]
# The kinds the archive writes, offered as suggestions; the field takes any kind.
KNOWN_KINDS = (
    "archive",
    "recover",
    "put_evidence",
    "retract",
    "delete",
    "task_state_reopen",
    "denied",
    "integrity_failure",
    "api_key_create",
    "api_key_revoke",
)


@dataclass(frozen=True)
class AuditFilters:
    """The filters of the audit page as its form sends them (an empty field: no filter)."""

    kind: str | None = None
    subject: str | None = None
    target: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def query(self) -> dict[str, str]:
        """The page's own parameters, for its pager's links."""
        values = {
            "kind": self.kind,
            "subject": self.subject,
            "target": self.target,
            "from": _shown(self.since),
            "to": _shown(self.until),
        }
        return {k: v for k, v in values.items() if v}


def _shown(when: datetime | None) -> str | None:
    """A time as the form's date-time field holds it (UTC, to the minute or second)."""
    if when is None:
        return None
    return when.strftime("%Y-%m-%dT%H:%M" if when.second == 0 else "%Y-%m-%dT%H:%M:%S")


def audit_filters(
    kind: str | None, subject: str | None, target: str | None, since: str | None, until: str | None
) -> AuditFilters:
    """The form's fields checked and read: blank is no filter, a time without a zone is UTC and
    one with a zone is turned to UTC (the form and the pager's links show it so)."""
    return AuditFilters(
        kind=(kind or "").strip() or None,
        subject=(subject or "").strip() or None,
        target=(target or "").strip() or None,
        since=moment("from", since),
        until=moment("to", until),
    )


def find_events(
    mnemo: Mnemo,
    principal: Principal,
    filters: AuditFilters,
    before: int | None,
    *,
    action: str | None = None,
) -> tuple[list[AuditEvent], int | None]:
    """One page of the events the filters match, newest first, and the seq the next page lists
    down from (None: this is the last page). `action` fixes the kind (the deletions page)."""
    found = mnemo.archive.find_audit_events(
        principal,
        action=action or filters.kind,
        actor=filters.subject,
        target_contains=filters.target,
        since=filters.since,
        until=filters.until,
        before_seq=before,
        limit=PAGE_SIZE + 1,
    )
    events = found[:PAGE_SIZE]
    return events, (events[-1].seq if len(found) > PAGE_SIZE else None)


def _anchor(mnemo: Mnemo, principal: Principal, report: AuditReport) -> AuditAnchor | None:
    """The chain's head, signed; None when the chain does not verify (the archive would refuse
    to vouch for it, and audit the refusal: the page only reads)."""
    return mnemo.archive.audit_anchor(principal) if report.ok else None


@router.get("/audit", response_class=HTMLResponse)
def audit(
    request: Request,
    principal: Viewer,
    kind: Text = None,
    subject: Text = None,
    target: Text = None,
    since: Annotated[str | None, Query(alias="from", max_length=40)] = None,
    until: Annotated[str | None, Query(alias="to", max_length=40)] = None,
    before: BeforeSeq = None,
) -> HTMLResponse:
    mnemo = mnemo_of(request)
    filters = audit_filters(kind, subject, target, since, until)
    events, older = find_events(mnemo, principal, filters, before)
    report = mnemo.archive.verify_audit(principal)
    return render(
        request,
        "audit.html",
        principal,
        events=events,
        filters=filters,
        query=filters.query(),
        before=before,
        older=older,
        report=report,
        anchor=_anchor(mnemo, principal, report),
        kinds=KNOWN_KINDS,
    )


@router.get("/audit/anchor.json")
def anchor_file(request: Request, principal: Viewer) -> Response:
    """The chain's head signed now, as the file `mnemo-sea audit anchor --out` writes: keep it
    away from this server and verify the chain against it later (`mnemo-sea audit verify
    --anchor FILE`). A broken chain is refused (IntegrityFailure), as the CLI refuses it."""
    anchor = mnemo_of(request).archive.audit_anchor(principal)
    body = json.dumps(anchor_to_dict(anchor), ensure_ascii=False, indent=2) + "\n"
    name = f"audit-anchor-{anchor.tenant_id}-{anchor.seq}.json"
    headers = {**security_headers(), "Content-Disposition": f'attachment; filename="{name}"'}
    return Response(body, media_type="application/json", headers=headers)
