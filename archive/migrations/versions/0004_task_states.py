"""task states: a structured, versioned task state per session, and the refs it cites

`task_states` holds one row per version of a session's task state (the body as JSON; the
previous current version gets `superseded_at`, nothing is overwritten); `task_state_refs` the
normalised ref each confirmed fact cites, so a deletion finds every version that repeats
deleted evidence.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task_states",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("sensitivity", sa.Integer(), nullable=False),
        sa.Column("superseded_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["sessions.tenant_id", "sessions.session_id"],
            name=op.f("fk_task_states_tenant_id_sessions"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", "version", name=op.f("pk_task_states")),
    )
    op.create_table(
        "task_state_refs",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("ref", sa.String(length=512), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id", "version"],
            ["task_states.tenant_id", "task_states.session_id", "task_states.version"],
            name=op.f("fk_task_state_refs_tenant_id_task_states"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", "version", "ref", name=op.f("pk_task_state_refs")),
    )
    op.create_index("ix_task_state_refs_ref", "task_state_refs", ["tenant_id", "ref"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_task_state_refs_ref", table_name="task_state_refs")
    op.drop_table("task_state_refs")
    op.drop_table("task_states")
