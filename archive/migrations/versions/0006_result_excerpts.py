"""tool_results: `excerpt_*`, the part of the original an excerpt recovery appended

A recovery may bring back part of an original (`recover` with lines, a byte range or a match).
The appended copy points at the whole original's blob, as a whole copy does, and these columns
say which bytes [excerpt_start, excerpt_end) and lines it shows. NULL for every other result,
including every row already present.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("excerpt_start", "excerpt_end", "excerpt_first_line", "excerpt_last_line")


def upgrade() -> None:
    with op.batch_alter_table("tool_results") as batch_op:
        for name in _COLUMNS:
            batch_op.add_column(sa.Column(name, sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_results") as batch_op:
        for name in reversed(_COLUMNS):
            batch_op.drop_column(name)
