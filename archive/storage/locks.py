"""Locks that make writers of one version chain (an evidence id, a memory key) take turns: what
evidence, memory, task state and deletion all take before they read a chain to extend it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, text


def lock_chain(conn: Connection, *key: str) -> None:
    """Make writers of one version chain (an evidence id, a memory key) take turns until commit.

    SQLite needs nothing here: `store.write()` already holds the database write lock. On
    PostgreSQL row locks are not enough: a chain with no rows yet has nothing to lock, and a
    writer that waited on a row lock re-reads only the rows it locked, never the version the
    other writer just added, so both would number their new version alike (a raw unique
    violation). A transaction-scoped advisory lock on the chain's key serialises them, and
    every statement after it sees the newest committed version.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": "\x1f".join(key)}
        )


def lock_chains(conn: Connection, kind: str, tenant_id: str, ids: Sequence[str]) -> None:
    """`lock_chain` for many chains in one statement, in the order given (sorted by the caller,
    so two batches sharing ids take their locks in the same order and never deadlock)."""
    if conn.dialect.name == "postgresql" and ids:
        conn.execute(
            text(
                "SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest(CAST(:keys AS text[])) AS k"
            ),
            {"keys": ["\x1f".join((kind, tenant_id, i)) for i in ids]},
        )
