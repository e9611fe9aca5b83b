"""Portable INSERT ... ON CONFLICT statements (SQLite and PostgreSQL) shared by the archive's modules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def insert_ignore(conn: Connection, table: Table, values: dict[str, Any], keys: list[str]) -> bool:
    """INSERT that does nothing when the key exists; returns whether a row was inserted."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)
    return conn.execute(stmt).rowcount == 1


def insert_or_touch(
    conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str], touch: str
) -> None:
    """INSERT each row (distinct keys), or lock the existing row by a no-op update of `touch`.

    On PostgreSQL the update takes the row lock, so a concurrent delete of that row either
    waits for us or has already happened (then the insert goes through). Many rows go as one
    executemany of the statement.
    """
    if not rows:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    ins = dialect.insert(table)
    stmt = ins.on_conflict_do_update(index_elements=keys, set_={touch: getattr(ins.excluded, touch)})
    conn.execute(stmt, list(rows))
