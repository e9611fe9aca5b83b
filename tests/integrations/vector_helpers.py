"""What the vector store tests share: a fresh tenant's principals and the rows it has, read raw."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Table, func, select

from mnemo_sea.archive import Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.system.mnemo import Mnemo


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def admin(tenant_id: str | None = None) -> Principal:
    """An administrator (admin implies agent and reader): it may add, search and delete."""
    return Principal(tenant_id or tenant(), "admin-1", frozenset({Role.ADMIN}), Sensitivity.RESTRICTED)


def agent(tenant_id: str) -> Principal:
    """An agent of the tenant: it may add and search, not delete."""
    return Principal(tenant_id, "agent-1", frozenset({Role.AGENT}), Sensitivity.INTERNAL)


def rows(mnemo: Mnemo, table: Table, tenant_id: str, **where: Any) -> int:
    """Rows of `table` in the tenant (where column == value), read from the table itself."""
    stmt = select(func.count()).select_from(table).where(table.c.tenant_id == tenant_id)
    for column, value in where.items():
        stmt = stmt.where(table.c[column] == value)
    with mnemo.archive.store.read() as conn:
        return int(conn.execute(stmt).scalar_one())


def evidence_rows(mnemo: Mnemo, tenant_id: str, **where: Any) -> int:
    return rows(mnemo, t.evidence, tenant_id, **where)


def blob_rows(mnemo: Mnemo, tenant_id: str) -> int:
    return rows(mnemo, t.blobs, tenant_id)
