"""Portable INSERT ... ON CONFLICT statements (SQLite and PostgreSQL) shared by the archive's modules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Insert, Table
from sqlalchemy.dialects import postgresql, sqlite

from .statements import prepared_insert


def dialect_insert(dialect_name: str, table: Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT of `table` that can take ON CONFLICT, in the form of `dialect_name`'s database."""
    if dialect_name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def insert_ignore(conn: Connection, table: Table, values: dict[str, Any], keys: list[str]) -> bool:
    """INSERT that does nothing when the key exists; returns whether a row was inserted."""
    stmt = (
        dialect_insert(conn.dialect.name, table).values(**values).on_conflict_do_nothing(index_elements=keys)
    )
    return conn.execute(stmt).rowcount == 1


def insert_or_touch(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    keys: list[str],
    touch: str,
) -> None:
    """INSERT each row (its values in `columns`' order; distinct keys), or lock the existing row
    by a no-op update of `touch`.

    On PostgreSQL the update takes the row lock, so a concurrent delete of that row either
    waits for us or has already happened (then the insert goes through). Many rows go as one
    execution of the statement, rendered once (archive/storage/statements.py: an executemany, or
    on SQLite a few multi-row statements).
    """
    if not rows:
        return

    def statement() -> Insert:
        ins = dialect_insert(conn.dialect.name, table)
        stmt: Insert = ins.on_conflict_do_update(
            index_elements=keys, set_={touch: getattr(ins.excluded, touch)}
        )
        return stmt

    name = f"insert_or_touch {table.name} {','.join(keys)} {touch} {','.join(columns)}"
    prepared_insert(name, statement, columns, conn.dialect).execute_values(conn, rows)
