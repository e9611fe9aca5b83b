"""Parameters shared by several endpoints."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Query

from mnemo_sea.archive import limits
from mnemo_sea.system import receipt_json

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=limits.IDEMPOTENCY_KEY_CHARS,
        description="repeat a write safely: the same key and body return the first answer; "
        "the same key with another body is a 409",
    ),
]
Offset = Annotated[int, Query(ge=0, le=1_000_000, description="items to skip")]
Limit = Annotated[int, Query(ge=1, le=500, description="items per page")]
# The largest integer SQL stores (BIGINT, SQLite INTEGER): a larger one fails in the driver.
MAX_SQL_INT = receipt_json.MAX_SQL_INT
