"""Deletion receipts and audit anchors as JSON files: what `delete`, `memory forget` and
`audit anchor` write (`--receipt-out`) and `verify-deleted` / `audit verify --anchor` read. Their
JSON both ways is mnemo_sea.system.receipt_json's (a document that is not one: InvalidInput, exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from mnemo_sea.cli.output import CliError
from mnemo_sea.system.json_text import parse_json


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
