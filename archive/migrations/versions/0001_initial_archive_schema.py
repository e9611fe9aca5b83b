"""initial archive schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 13:38:55.599056
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "audit_events",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=1024), nullable=False),
        sa.Column("detail_json", sa.Text(), nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "seq", name=op.f("pk_audit_events")),
    )
    op.create_table(
        "audit_heads",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_audit_heads")),
    )
    op.create_table(
        "blobs",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("media_type", sa.String(length=255), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "sha256", name=op.f("pk_blobs")),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("operation", sa.String(length=64), nullable=False),
        sa.Column("request_sha256", sa.String(length=64), nullable=False),
        sa.Column("response_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_table(
        "memory_facts",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("provenance", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("derived_from", sa.String(length=512), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "owner", "key", "version", name=op.f("pk_memory_facts")),
    )
    with op.batch_alter_table("memory_facts", schema=None) as batch_op:
        batch_op.create_index("ix_memory_facts_derived", ["tenant_id", "derived_from"], unique=False)

    op.create_table(
        "outbox",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("op", sa.String(length=32), nullable=False),
        sa.Column("entity", sa.String(length=32), nullable=False),
        sa.Column("entity_ref", sa.String(length=1024), nullable=False),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("done_at", sa.DateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index("ix_outbox_pending", ["done_at", "id"], unique=False)

    op.create_table(
        "sessions",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("next_result_no", sa.Integer(), nullable=False),
        sa.Column("deleted_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", name=op.f("pk_sessions")),
    )
    op.create_table(
        "summaries",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("summary_id", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("trace_ref", sa.String(length=1024), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("sensitivity", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "summary_id", name=op.f("pk_summaries")),
    )
    op.create_table(
        "evidence",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("evidence_id", sa.String(length=256), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("source", sa.String(length=1024), nullable=False),
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("locator", sa.String(length=1024), nullable=False),
        sa.Column("statement", sa.Text(), nullable=True),
        sa.Column("blob_sha256", sa.String(length=64), nullable=False),
        sa.Column("media_type", sa.String(length=255), nullable=False),
        sa.Column("observed_at", sa.DateTime(), nullable=False),
        sa.Column("valid_from", sa.DateTime(), nullable=True),
        sa.Column("valid_until", sa.DateTime(), nullable=True),
        sa.Column("sensitivity", sa.Integer(), nullable=False),
        sa.Column("provenance", sa.String(length=32), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=True),
        sa.Column("session_id", sa.String(length=128), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.Column("recorded_by", sa.String(length=128), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id", "blob_sha256"],
            ["blobs.tenant_id", "blobs.sha256"],
            name=op.f("fk_evidence_tenant_id_blobs"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "evidence_id", "version", name=op.f("pk_evidence")),
    )
    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.create_index("ix_evidence_blob", ["tenant_id", "blob_sha256"], unique=False)
        batch_op.create_index("ix_evidence_owner", ["tenant_id", "owner"], unique=False)

    op.create_table(
        "summary_sources",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("summary_id", sa.String(length=64), nullable=False),
        sa.Column("source_ref", sa.String(length=512), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "summary_id"],
            ["summaries.tenant_id", "summaries.summary_id"],
            name=op.f("fk_summary_sources_tenant_id_summaries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "summary_id", "source_ref", name=op.f("pk_summary_sources")),
    )
    with op.batch_alter_table("summary_sources", schema=None) as batch_op:
        batch_op.create_index("ix_summary_sources_ref", ["tenant_id", "source_ref"], unique=False)

    op.create_table(
        "tool_results",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("result_no", sa.Integer(), nullable=False),
        sa.Column("tool_name", sa.String(length=255), nullable=False),
        sa.Column("arguments_json", sa.Text(), nullable=False),
        sa.Column("blob_sha256", sa.String(length=64), nullable=False),
        sa.Column("media_type", sa.String(length=255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("observed_at", sa.DateTime(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.Column("recorded_by", sa.String(length=128), nullable=False),
        sa.Column("sensitivity", sa.Integer(), nullable=False),
        sa.Column("policy_class", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("recovered_from_no", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id", "blob_sha256"],
            ["blobs.tenant_id", "blobs.sha256"],
            name=op.f("fk_tool_results_tenant_id_blobs"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["sessions.tenant_id", "sessions.session_id"],
            name=op.f("fk_tool_results_tenant_id_sessions"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", "result_no", name=op.f("pk_tool_results")),
    )
    with op.batch_alter_table("tool_results", schema=None) as batch_op:
        batch_op.create_index("ix_tool_results_blob", ["tenant_id", "blob_sha256"], unique=False)

    op.create_table(
        "archive_entries",
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("result_no", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("archived_at", sa.DateTime(), nullable=False),
        sa.Column("archived_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id", "result_no"],
            ["tool_results.tenant_id", "tool_results.session_id", "tool_results.result_no"],
            name=op.f("fk_archive_entries_tenant_id_tool_results"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", "result_no", name=op.f("pk_archive_entries")),
    )


def downgrade() -> None:

    op.drop_table("archive_entries")
    with op.batch_alter_table("tool_results", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_results_blob")

    op.drop_table("tool_results")
    with op.batch_alter_table("summary_sources", schema=None) as batch_op:
        batch_op.drop_index("ix_summary_sources_ref")

    op.drop_table("summary_sources")
    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.drop_index("ix_evidence_owner")
        batch_op.drop_index("ix_evidence_blob")

    op.drop_table("evidence")
    op.drop_table("summaries")
    op.drop_table("sessions")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_pending")

    op.drop_table("outbox")
    with op.batch_alter_table("memory_facts", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_facts_derived")

    op.drop_table("memory_facts")
    op.drop_table("idempotency_keys")
    op.drop_table("blobs")
    op.drop_table("audit_heads")
    op.drop_table("audit_events")
