"""What a tool call returns: JSON-ready payloads, and every failure as one error shape.

A success carries its payload twice, as `structuredContent` and as JSON text for clients that
read only text. A failure is a tool result with `isError` and the JSON object
`{"error": code, "category": ..., "message": ..., **detail}` (a rejected archive batch lists each
target's status under `targets`), never a protocol error or a traceback: the model reads it and
fixes its call. `error` is the error's stable code and `category` its kind as the one error
table, mnemo_sea.system.outcomes.ANSWERS, names it for MCP (`invalid_input`, `not_found`,
`unavailable`: worth a retry later, ...). This is the one place exceptions become answers.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError

from mnemo_sea.errors import Category, MnemoError
from mnemo_sea.system.json_ready import json_ready
from mnemo_sea.system.outcomes import UNEXPECTED_CODE, mcp_category, outcome_of

log = logging.getLogger("mnemo_sea.mcp")


def json_object(value: object) -> dict[str, Any]:
    """`json_ready` for a value that becomes a JSON object (a dataclass or a mapping)."""
    out = json_ready(value)
    if not isinstance(out, dict):
        raise TypeError(f"{type(value).__name__} is not an object")
    return out


def _answer(payload: dict[str, Any], *, is_error: bool) -> CallToolResult:
    text = json.dumps(payload, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=payload, is_error=is_error
    )


def success(payload: dict[str, Any]) -> CallToolResult:
    return _answer(payload, is_error=False)


def failure(
    code: str, message: str, *, category: Category = Category.INVALID_INPUT, **detail: Any
) -> CallToolResult:
    """An error result; `category` defaults to the caller's mistake (a bad call, an unknown tool)."""
    return _answer(
        {"error": code, "category": mcp_category(category), "message": message, **json_ready(detail)},
        is_error=True,
    )


def _validation_problems(e: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(str(part) for part in err["loc"]) or "arguments", "problem": err["msg"]}
        for err in e.errors()
    ]


def from_exception(exc: Exception, tool: str) -> CallToolResult:
    """The error result for anything a tool call raised; unexpected errors are logged, not shown."""
    if isinstance(exc, MnemoError):
        outcome = outcome_of(exc)
        detail = exc.to_dict()
        detail.pop("code", None)
        detail.pop("message", None)
        return failure(outcome.code, exc.message, category=outcome.category, **detail)
    if isinstance(exc, ValidationError):
        problems = _validation_problems(exc)
        shown = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
        return failure("invalid_input", f"invalid arguments for {tool}: {shown}", problems=problems)
    log.exception("tool %s failed unexpectedly", tool)
    return failure(
        UNEXPECTED_CODE,
        f"{tool} failed unexpectedly; the server log has the details",
        category=Category.INTERNAL,
    )
