"""Domain values as JSON-ready data, for every surface that prints or returns them (CLI, MCP)."""

from __future__ import annotations

import base64
from dataclasses import fields, is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from mnemo_sea.archive import Sensitivity


def json_ready(value: Any) -> Any:
    """Dataclasses as objects, datetimes ISO-8601, clearances by name, other enums by value.

    Bytes become None: originals travel through their own fields (text or base64), never by
    accident inside a metadata object.
    """
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_ready(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Sensitivity):
        return value.name.lower()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_ready(v) for v in value]
    if isinstance(value, bytes):
        return None
    return value


def content_fields(content: bytes) -> dict[str, str | None]:
    """An original as every surface returns it: `content`, its text when it is valid UTF-8, or
    else `content_base64`, its bytes in base64 (the other one None)."""
    try:
        return {"content": content.decode("utf-8"), "content_base64": None}
    except UnicodeDecodeError:
        return {"content": None, "content_base64": base64.b64encode(content).decode("ascii")}
