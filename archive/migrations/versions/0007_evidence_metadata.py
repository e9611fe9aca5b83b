"""evidence: `metadata_json`, the JSON object a caller keeps with a version

A caller may keep a JSON object with each version of an evidence record (a LangChain
Document's metadata, say): its canonical JSON text, read back as `EvidenceRecord.metadata`
and on search hits. NULL for a version stored without one, including every row already present.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("evidence") as batch_op:
        batch_op.add_column(sa.Column("metadata_json", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evidence") as batch_op:
        batch_op.drop_column("metadata_json")
