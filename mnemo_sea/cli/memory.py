"""`memory remember|current|history|forget|purge-expired`: user memory facts with supersede chains."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.archive import (
    DeletionReceipt,
    parse_provenance,
)
from mnemo_sea.cli.output import EXIT_NOT_FOUND, CliError, JsonOpt, emit
from mnemo_sea.cli.receipt_files import ReceiptOut, keep_receipt
from mnemo_sea.cli.target import (
    IdempotencyKeyOpt,
    Target,
    add_command,
    add_group,
    open_archive,
    open_mnemo,
)
from mnemo_sea.system.json_ready import json_ready
from mnemo_sea.system.receipt_json import receipt_to_dict


def memory_remember(
    target: Target,
    owner: Annotated[str, typer.Argument(help="whose fact")],
    key: Annotated[str, typer.Argument(help="e.g. preferred_name")],
    value: Annotated[str, typer.Argument(help="the value")],
    provenance: Annotated[
        str, typer.Option(help="user_claim | user_correction | document | tool_fact | model_inference")
    ],
    ttl_seconds: Annotated[float | None, typer.Option(help="forget after this many seconds")] = None,
    derived_from: Annotated[
        str | None,
        typer.Option(help="the source it came from: evidence:<id> or result:<session>/<rN> (must exist)"),
    ] = None,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember (owner, key) = value; a new value supersedes the old one, which stays in history.

    A value never supersedes a current one of higher provenance (user_correction > user_claim >
    document, tool_fact > model_inference): that is a conflict (exit 5) naming the current fact.
    """
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        outcome = mnemo.remember(
            principal,
            owner,
            key,
            value,
            parse_provenance(provenance),
            ttl_seconds=ttl_seconds,
            derived_from=derived_from,
            idempotency_key=idempotency_key,
        )
    emit(json_ready(outcome), as_json)


def memory_current(
    target: Target,
    owner: Annotated[str, typer.Argument(help="whose fact")],
    key: Annotated[str, typer.Argument(help="which fact")],
    as_json: JsonOpt = False,
) -> None:
    """The current value of (owner, key); exit 3 when there is none."""
    principal = target.principal()
    with open_archive(target) as archive:
        fact = archive.current(principal, owner, key)
    if fact is None:
        raise CliError(f"no current value for {owner}/{key}", EXIT_NOT_FOUND)
    emit(json_ready(fact), as_json)


def memory_history(
    target: Target,
    owner: Annotated[str, typer.Argument(help="whose fact")],
    key: Annotated[str, typer.Argument(help="which fact")],
    as_json: JsonOpt = False,
) -> None:
    """Every version of (owner, key), oldest first, with provenance and status (active,
    superseded, or expired until the purge deletes it)."""
    principal = target.principal()
    with open_archive(target) as archive:
        facts = archive.memory_history(principal, owner, key)
    emit({"owner": owner, "key": key, "versions": json_ready(facts)}, as_json)


def _memory_receipt(receipt: DeletionReceipt, receipt_out: Path | None, as_json: bool) -> None:
    data = receipt_to_dict(receipt)
    kept = keep_receipt(data, receipt_out)
    if as_json:
        emit(data, as_json=True)
        return
    versions = [f"{o}/{k}@{v}" for o, k, v in receipt.memory_facts]
    emit({"deleted": receipt.target, "versions": versions, "receipt": kept}, as_json=False)


def memory_forget(
    target: Target,
    owner: Annotated[str, typer.Argument(help="whose fact")],
    key: Annotated[str, typer.Argument(help="which fact")],
    receipt_out: ReceiptOut = None,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Forget (owner, key): delete every version, its index points and cached searches (audited,
    with a receipt for verify-deleted); exit 3 when there is no such fact."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        receipt = mnemo.forget(principal, owner, key, idempotency_key=idempotency_key)
    _memory_receipt(receipt, receipt_out, as_json)


def memory_purge_expired(target: Target, receipt_out: ReceiptOut = None, as_json: JsonOpt = False) -> None:
    """Delete the tenant's expired memory facts now, with their index points (admin). Server
    mode's worker does this every MNEMO_TTL_PURGE_SECONDS; the embedded default has no worker."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        receipt = mnemo.purge_expired(principal)
    data = None if receipt is None else receipt_to_dict(receipt)
    kept = "none" if data is None else keep_receipt(data, receipt_out)
    purged = 0 if receipt is None else len(receipt.memory_facts)
    if as_json:  # the shape of POST /v1/memory/purge-expired
        emit({"purged": purged, "receipt": data}, as_json=True)
        return
    versions = [] if receipt is None else [f"{o}/{k}@{v}" for o, k, v in receipt.memory_facts]
    emit({"purged": purged, "versions": versions, "receipt": kept}, as_json=False)


def register(app: typer.Typer) -> None:
    memory = add_group(app, "memory", "User memory facts with supersede chains.")
    add_command(memory, "remember", memory_remember)
    add_command(memory, "current", memory_current)
    add_command(memory, "history", memory_history)
    add_command(memory, "forget", memory_forget)
    add_command(memory, "purge-expired", memory_purge_expired)
