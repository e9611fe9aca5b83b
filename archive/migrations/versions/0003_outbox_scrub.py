"""outbox: find a target's rows by index; done rows keep no payload

Deletion empties the outbox rows about what it deletes, found by (tenant, entity, ref): the
index keeps that from scanning a table that only grows. Done rows were kept with their
payloads (archived notes, evidence sources), which outlived the deletion of their targets;
nothing reads a done row's payload, so they are emptied here as `mark_done` now does.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_outbox_target", "outbox", ["tenant_id", "entity", "entity_ref"], unique=False)
    outbox = sa.table(
        "outbox",
        sa.column("payload_json", sa.Text()),
        sa.column("last_error", sa.Text()),
        sa.column("done_at", sa.DateTime()),
    )
    op.execute(
        outbox.update().where(outbox.c.done_at.is_not(None)).values(payload_json="{}", last_error=None)
    )


def downgrade() -> None:
    # Emptied payloads cannot come back (they were done, so nothing needs them).
    op.drop_index("ix_outbox_target", table_name="outbox")
