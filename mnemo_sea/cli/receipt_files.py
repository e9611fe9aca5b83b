"""Deletion receipts and audit anchors as JSON files: what `delete`, `memory forget` and
`audit anchor` write (`--receipt-out`) and `verify-deleted` / `audit verify --anchor` read.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from mnemo_sea.archive import (
    AuditAnchor,
    DeletionReceipt,
)
from mnemo_sea.cli.output import CliError
from mnemo_sea.system.json_ready import json_ready
from mnemo_sea.system.json_text import parse_json


def receipt_to_dict(receipt: DeletionReceipt) -> dict[str, Any]:
    data: dict[str, Any] = json_ready(receipt)
    return data


def receipt_from_dict(data: Any) -> DeletionReceipt:
    """The receipt `delete ... --json` printed (or `--receipt-out` wrote); CliError if it is not one."""
    try:
        return DeletionReceipt(
            tenant_id=str(data["tenant_id"]),
            target=str(data["target"]),
            deleted_at=datetime.fromisoformat(data["deleted_at"]),
            evidence_versions=tuple((str(e), int(v)) for e, v in data.get("evidence_versions", ())),
            tool_results=tuple(str(x) for x in data.get("tool_results", ())),
            sessions=tuple(str(x) for x in data.get("sessions", ())),
            memory_facts=tuple((str(o), str(k), int(v)) for o, k, v in data.get("memory_facts", ())),
            summaries=tuple(str(x) for x in data.get("summaries", ())),
            task_states=tuple((str(x), int(v)) for x, v in data.get("task_states", ())),
            blobs=tuple(str(x) for x in data.get("blobs", ())),
            content_sha256=tuple(str(x) for x in data.get("content_sha256", ())),
            outbox_ids=tuple(int(x) for x in data.get("outbox_ids", ())),
            audit_seq=int(data.get("audit_seq", 0)),
            counts={str(k): int(v) for k, v in data.get("counts", {}).items()},
            audit_hash=str(data.get("audit_hash", "")),
            key_id=str(data.get("key_id", "")),
            signature=str(data.get("signature", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CliError(f"not a deletion receipt ({type(e).__name__}: {e})") from None


def anchor_to_dict(anchor: AuditAnchor) -> dict[str, Any]:
    data: dict[str, Any] = json_ready(anchor)
    return data


def anchor_from_dict(data: Any) -> AuditAnchor | DeletionReceipt:
    """What `audit anchor --out` wrote, or a deletion receipt (it anchors the chain of its time)."""
    if isinstance(data, dict) and "target" in data:
        return receipt_from_dict(data)
    try:
        return AuditAnchor(
            tenant_id=str(data["tenant_id"]),
            seq=int(data["seq"]),
            hash=str(data["hash"]),
            at=datetime.fromisoformat(data["at"]),
            key_id=str(data.get("key_id", "")),
            signature=str(data.get("signature", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CliError(f"not an audit anchor ({type(e).__name__}: {e})") from None


def read_json(path: Path) -> Any:
    """The JSON a file the user named holds. CliError when missing or not JSON; JsonTooDeep
    (exit 2, like every input error) when nested deeper than the one limit of json_text."""
    try:
        return parse_json(path.read_text(encoding="utf-8"), str(path))
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CliError(f"{path}: not JSON ({e})") from None


ReceiptOut = Annotated[
    Path | None, typer.Option(help="also write the receipt (JSON) here, for verify-deleted")
]


def keep_receipt(data: dict[str, Any], receipt_out: Path | None) -> str:
    """Write the receipt to `--receipt-out` when given; what human output says of where it is."""
    if receipt_out is None:
        return "(use --receipt-out FILE or --json to keep it)"
    receipt_out.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return str(receipt_out)
