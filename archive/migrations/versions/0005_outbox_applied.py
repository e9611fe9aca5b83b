"""outbox: `applied_at`, rows applied to the embedded index but not yet flushed

The embedded index (Qdrant Edge) is flushed by group commit (mnemo_sea/system/projection/indexer.py): a row
applied to the index is marked `applied_at` and emptied of its payload at once, and marked done
only once the index was flushed, which clears `applied_at` again. A row with `applied_at` but no
`done_at` is not done: reopening the folder clears `applied_at` and applies it again (after a
crash the index may not hold it). Rows already present need no value (NULL).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch_op:
        batch_op.add_column(sa.Column("applied_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch_op:
        batch_op.drop_column("applied_at")
