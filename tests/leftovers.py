"""Where deleted content could survive: a scan of every column of every table (the schema
reflected from the database itself, so a table the code forgot is scanned too) and of files."""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlalchemy import Engine, MetaData, select


def new_marker() -> str:
    # Lower case letters and digits only: JSON, the tokenizer and every backend keep it verbatim.
    return f"zqx{uuid.uuid4().hex[:16]}"


def scan_database(engine: Engine, marker: str) -> list[str]:
    """Every `table.column` whose value anywhere contains `marker` (text, JSON or bytes)."""
    meta = MetaData()
    meta.reflect(bind=engine)
    needle = marker.encode()
    found: set[str] = set()
    with engine.connect() as conn:
        for table in meta.sorted_tables:
            for row in conn.execute(select(table)):
                for column, value in zip(table.columns, row, strict=True):
                    raw = bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
                    if needle in raw:
                        found.add(f"{table.name}.{column.name}")
    return sorted(found)


def files_holding(folder: Path, needle: str | bytes) -> list[str]:
    """The files under `folder` whose raw bytes contain `needle`."""
    raw = needle.encode() if isinstance(needle, str) else needle
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and raw in p.read_bytes()
    )
