"""API key rows: written here so that each creation and revocation is audited in the same
transaction as the row (the composition root's `mnemo_sea.archive.api_keys` mints and checks keys)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, select, update

from . import schema as t
from .audit import append_event
from .clock import utcnow
from .errors import NotFound, StateConflict
from .store import ArchiveStore


def _detail(row: Any) -> dict[str, Any]:
    # Who the key acts as, never its secret hash.
    return {
        "subject": row["subject"],
        "roles": row["roles"],
        "clearance": row["clearance"],
        "name": row["name"],
    }


def insert_key(store: ArchiveStore, values: dict[str, Any], *, actor: str) -> None:
    """Store a key row (already validated) and audit it in the key's tenant."""
    with store.write() as conn:
        conn.execute(t.api_keys.insert().values(**values))
        append_event(
            conn, values["tenant_id"], actor, "api_key_create", f"api_key:{values['key_id']}", _detail(values)
        )


def revoke_key(store: ArchiveStore, key_id: str, *, actor: str) -> tuple[Row[Any], datetime]:
    """Revoke a key row and audit it; returns the row as it was and the revocation time.

    Raises NotFound for an unknown id, StateConflict if it is already revoked.
    """
    with store.write() as conn:
        row = conn.execute(select(t.api_keys).where(t.api_keys.c.key_id == key_id)).first()
        if row is None:
            raise NotFound("api key", key_id)
        if row.revoked_at is not None:
            raise StateConflict(f"api key {key_id!r} is already revoked", key_id=key_id)
        now = utcnow()
        conn.execute(update(t.api_keys).where(t.api_keys.c.key_id == key_id).values(revoked_at=now))
        append_event(conn, row.tenant_id, actor, "api_key_revoke", f"api_key:{key_id}", _detail(row._mapping))
    return row, now
