"""Deletions (admins only): the tenant's deletion events from the audit chain with what each
removed, and a form that takes a deletion receipt (pasted or uploaded) and verifies it live, as
REST's verify-deleted does: its signature, its audit event, each removed item, the outbox and the
files' erasure. Verifying reads; a receipt the archive did not issue is audited by the archive as
the failed integrity check it is, on every surface alike."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import File, Form, Query, Request, UploadFile
from fastapi.responses import HTMLResponse

from mnemo_sea.archive import AuditEvent, DeletionReceipt, InvalidInput, NotFound, Principal, ReceiptInvalid
from mnemo_sea.console.limits import MAX_BODY_BYTES
from mnemo_sea.console.pages import render
from mnemo_sea.console.receipt_findings import refused, verified
from mnemo_sea.console.routes.audit import AuditFilters, find_events
from mnemo_sea.console.routes.common import BeforeSeq, Viewer, mnemo_of, page_router
from mnemo_sea.system.json_text import parse_json
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.receipt_json import MAX_SQL_INT, receipt_from_dict

# A pasted receipt is a form field: up to the console's body cap, not Starlette's 1 MiB default.
router = page_router(form_limits={"max_part_size": MAX_BODY_BYTES, "max_files": 1, "max_fields": 8})
Seq = Annotated[int | None, Query(ge=1, le=MAX_SQL_INT)]


def _deletion(mnemo: Mnemo, principal: Principal, seq: int | None) -> AuditEvent | None:
    """The tenant's deletion event `seq`; NotFound when the chain holds no deletion by that seq."""
    if seq is None:
        return None
    found = mnemo.archive.find_audit_events(principal, action="delete", before_seq=seq + 1, limit=1)
    if not found or found[0].seq != seq:
        raise NotFound("deletion", f"audit event {seq}")
    return found[0]


@router.get("/deletions", response_class=HTMLResponse)
def deletions(request: Request, principal: Viewer, before: BeforeSeq = None) -> HTMLResponse:
    events, older = find_events(mnemo_of(request), principal, AuditFilters(), before, action="delete")
    return render(
        request, "deletions.html", principal, events=events, before=before, older=older, deletion=None
    )


@router.get("/deletions/verify", response_class=HTMLResponse)
def verify_form(request: Request, principal: Viewer, seq: Seq = None) -> HTMLResponse:
    """The receipt form, about one deletion event when `seq` names it."""
    deletion = _deletion(mnemo_of(request), principal, seq)
    return render(request, "receipt_form.html", principal, deletion=deletion)


def _receipt_text(pasted: str, upload: UploadFile | None) -> str:
    """The receipt the form sent: pasted or uploaded, one of the two."""
    uploaded = b""
    if upload is not None and upload.filename:
        uploaded = upload.file.read(MAX_BODY_BYTES + 1)
    if pasted.strip() and uploaded:
        raise InvalidInput("receipt", "paste a receipt or choose its file, not both")
    if uploaded:
        try:
            return uploaded.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidInput("receipt", "the file is not UTF-8 text, as a receipt's JSON is") from None
    if not pasted.strip():
        raise InvalidInput("receipt", "paste a deletion receipt's JSON or choose its file")
    return pasted


def _receipt(text: str) -> DeletionReceipt:
    try:
        data = parse_json(text, "receipt")
    except json.JSONDecodeError as e:
        raise InvalidInput("receipt", f"not JSON ({e})") from None
    return receipt_from_dict(data)


@router.post("/deletions/verify", response_class=HTMLResponse)
def verify(
    request: Request,
    principal: Viewer,
    receipt: Annotated[str, Form(max_length=MAX_BODY_BYTES)] = "",
    receipt_file: Annotated[UploadFile | None, File()] = None,
    seq: Annotated[int | None, Form(ge=1, le=MAX_SQL_INT)] = None,
) -> HTMLResponse:
    """Verify the receipt live; a receipt that does not check out answers 422 with the check
    that failed, one of another tenant 404 exactly as one naming a tenant that never existed."""
    mnemo = mnemo_of(request)
    deletion = _deletion(mnemo, principal, seq)
    parsed = _receipt(_receipt_text(receipt, receipt_file))
    try:
        verification = verified(mnemo.verify_deleted(principal, parsed))
    except ReceiptInvalid as e:
        verification = refused(parsed, e)
    return render(
        request,
        "deletion_verified.html",
        principal,
        422 if verification.status == "refused" else 200,
        verification=verification,
        deletion=deletion,
    )
