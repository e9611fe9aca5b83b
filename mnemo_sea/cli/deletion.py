"""`delete evidence|session|owner` (admin; each prints its receipt) and `verify-deleted`, the proof
that nothing of a deletion is left in the archive, the index or the outbox.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import EXIT_PROBLEMS, CliError, JsonOpt, emit
from mnemo_sea.cli.receipt_files import ReceiptOut, keep_receipt, read_json
from mnemo_sea.cli.target import IdempotencyKeyOpt, Target, add_command, add_group, open_mnemo
from mnemo_sea.system.receipt_json import receipt_from_dict, receipt_to_dict


def _deleted(
    target: Target,
    what: str,
    ident: str,
    receipt_out: Path | None,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        delete = {
            "evidence": mnemo.delete_evidence,
            "session": mnemo.delete_session,
            "owner": mnemo.delete_owner,
        }[what]
        receipt = delete(principal, ident, idempotency_key=idempotency_key)
    data = receipt_to_dict(receipt)
    kept = keep_receipt(data, receipt_out)
    if as_json:
        emit(data, as_json=True)
        return
    emit({"deleted": receipt.target, "counts": receipt.counts, "receipt": kept}, as_json=False)


def delete_evidence(
    target: Target,
    evidence_id: Annotated[str, typer.Argument(help="the record, every version")],
    receipt_out: ReceiptOut = None,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a record with its blobs, index points, derived summaries/memory and caches (admin)."""
    _deleted(target, "evidence", evidence_id, receipt_out, idempotency_key, as_json)


def delete_session(
    target: Target,
    session_id: Annotated[str, typer.Argument(help="the session")],
    receipt_out: ReceiptOut = None,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a session: its tool results, originals, notes and their index points (admin)."""
    _deleted(target, "session", session_id, receipt_out, idempotency_key, as_json)


def delete_owner(
    target: Target,
    owner: Annotated[str, typer.Argument(help="the user")],
    receipt_out: ReceiptOut = None,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete everything of one owner: memory, their records, sessions (admin)."""
    _deleted(target, "owner", owner, receipt_out, idempotency_key, as_json)


def verify_deleted(
    target: Target,
    receipt_file: Annotated[
        Path,
        typer.Argument(help="the receipt JSON of `delete ... --receipt-out FILE` (or its --json output)"),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Prove a deletion: nothing of it left in the archive (its write-ahead log included), the
    index or the outbox (exit 1 if any; `status: pending_reader` while a reader holds the log).

    The receipt must be one this deployment signed, whose audit event the chain still holds:
    an edited, foreign or unsigned receipt, or one the chain was rewound under, exits 2
    (`receipt_invalid`, as REST's 422)."""
    receipt = receipt_from_dict(read_json(receipt_file))
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        check = mnemo.verify_deleted(principal, receipt)
    emit(
        {
            "ok": check.ok,
            "status": check.status,
            "target": receipt.target,
            "archive_leftovers": list(check.archive_leftovers),
            "index_leftovers": list(check.index_leftovers),
            "pending_outbox": check.pending_outbox,
            "erasure": check.erasure,
            "erasure_detail": check.erasure_detail,
        },
        as_json,
    )
    if check.status == "pending_reader":
        raise CliError(
            f"deletion of {receipt.target} is pending on a reader: its bytes are still in the "
            "archive's write-ahead log (run verify-deleted again once that reader ends)",
            EXIT_PROBLEMS,
            reported=True,
        )
    if not check.ok:
        raise CliError(
            f"deletion of {receipt.target} is not complete (see the report)", EXIT_PROBLEMS, reported=True
        )


def register(app: typer.Typer) -> None:
    delete = add_group(app, "delete", "Deletion cascades (admin); each prints its receipt.")
    add_command(delete, "evidence", delete_evidence)
    add_command(delete, "session", delete_session)
    add_command(delete, "owner", delete_owner)
    add_command(app, "verify-deleted", verify_deleted)
