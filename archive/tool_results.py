"""A session's tool result as recorded, and its ids (`r1`, `r2`, ...).

Apart from the other domain types (records) because the envelopes render it and records renders
through the envelopes: this module depends on neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from .errors import InvalidInput
from .principal import Sensitivity

ResultState = Literal["live", "archived"]

_RESULT_ID = re.compile(r"^r([1-9][0-9]{0,8})$")


def parse_result_id(value: object) -> int:
    """`r17` -> 17. Raises InvalidInput for anything that is not an id the archive could issue."""
    if not isinstance(value, str):
        raise InvalidInput("result_id", f"must be a string like 'r3', got {type(value).__name__}")
    m = _RESULT_ID.fullmatch(value)
    if m is None:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InvalidInput("result_id", f"{shown!r} is malformed: result ids look like r1, r2, ...")
    return int(m.group(1))


def result_id(number: int) -> str:
    return f"r{number}"


@dataclass(frozen=True)
class ToolResult:
    """One tool result in a session, as recorded. The original bytes live in the blob store."""

    session_id: str
    result_id: str
    tool_name: str
    arguments: dict[str, Any]
    media_type: str
    size: int
    content_sha256: str
    observed_at: datetime
    recorded_at: datetime
    sensitivity: Sensitivity
    policy_class: str
    state: ResultState
    note: str | None = None
    recovered_from: str | None = None
