"""The archive's tables (SQLAlchemy Core). Alembic migrations in `migrations/` create them.

Every table carries `tenant_id` as the first key column: every query is scoped by the
caller's tenant, and composite foreign keys keep references inside one tenant.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from ..rules.checks import MEDIA_TYPE_COLUMN, TOOL_NAME_COLUMN

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


# SQLite's DATETIME storage format (sqlalchemy.dialects.sqlite.DATETIME's default), positional.
_SQLITE_TEXT = "%04d-%02d-%02d %02d:%02d:%02d.%06d"


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every backend (SQLite has no time zones; we store naive UTC)."""

    impl = DateTime
    cache_ok = True
    # No settings: every column of this type binds an object alike, so a prepared INSERT
    # (statements.py) binds a stamp that several columns of a row share once.
    bind_memo_shared = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the archive; use an aware datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        """On SQLite, an aware datetime becomes SQLite's text in one step. SQLAlchemy's chain
        (`process_bind_param`, then the dialect's DATETIME format through a dict) costs ~4 us a
        value, and a batch of 1,000 evidence versions binds two per row (~5 % of an ingest's
        archive write); this one ~1 us. Anything else (None, a naive time, a date) goes through
        the chain, so its errors stay the same; a dialect whose text differs from this one's
        (probed once) keeps the chain."""
        chained = super().bind_processor(dialect)
        if dialect.name != "sqlite" or chained is None:
            return chained

        def process(value: Any) -> Any:
            if type(value) is datetime and value.tzinfo is not None:
                if value.tzinfo is not UTC:
                    value = value.astimezone(UTC)
                return _SQLITE_TEXT % (
                    value.year,
                    value.month,
                    value.day,
                    value.hour,
                    value.minute,
                    value.second,
                    value.microsecond,
                )
            return chained(value)

        probe = datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=UTC)
        return process if process(probe) == chained(probe) else chained

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)


TENANT = 128
ID = 256

blobs = Table(
    "blobs",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("sha256", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("media_type", String(MEDIA_TYPE_COLUMN), nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

sessions = Table(
    "sessions",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("session_id", String(TENANT), primary_key=True),
    Column("owner", String(TENANT), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    # Result numbers are allocated from here under a row lock: monotonic, never reused.
    Column("next_result_no", Integer, nullable=False),
    # A deleted session keeps this tombstone (no owner, no content) so that its id, and the
    # result ids citations may still name, are never issued again.
    Column("deleted_at", UTCDateTime, nullable=True),
)

tool_results = Table(
    "tool_results",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("session_id", String(TENANT), primary_key=True),
    Column("result_no", Integer, primary_key=True),
    Column("tool_name", String(TOOL_NAME_COLUMN), nullable=False),
    Column("arguments_json", Text, nullable=False),
    Column("blob_sha256", String(64), nullable=False),
    Column("media_type", String(MEDIA_TYPE_COLUMN), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("observed_at", UTCDateTime, nullable=False),
    Column("recorded_at", UTCDateTime, nullable=False),
    Column("recorded_by", String(TENANT), nullable=False),
    Column("sensitivity", Integer, nullable=False),
    Column("policy_class", String(64), nullable=False),
    Column("state", String(16), nullable=False),  # live | archived
    Column("recovered_from_no", Integer, nullable=True),
    # An excerpt recovery's copy: the bytes [start, end) of the original it shows, and their lines.
    Column("excerpt_start", BigInteger, nullable=True),
    Column("excerpt_end", BigInteger, nullable=True),
    Column("excerpt_first_line", BigInteger, nullable=True),
    Column("excerpt_last_line", BigInteger, nullable=True),
    ForeignKeyConstraint(["tenant_id", "session_id"], ["sessions.tenant_id", "sessions.session_id"]),
    ForeignKeyConstraint(["tenant_id", "blob_sha256"], ["blobs.tenant_id", "blobs.sha256"]),
    Index("ix_tool_results_blob", "tenant_id", "blob_sha256"),
)

archive_entries = Table(
    "archive_entries",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("session_id", String(TENANT), primary_key=True),
    # One entry per result: the unique key is the last line of defence against two archivers.
    Column("result_no", Integer, primary_key=True),
    Column("note", Text, nullable=False),
    Column("batch_id", String(64), nullable=False),
    Column("archived_at", UTCDateTime, nullable=False),
    Column("archived_by", String(TENANT), nullable=False),
    ForeignKeyConstraint(
        ["tenant_id", "session_id", "result_no"],
        ["tool_results.tenant_id", "tool_results.session_id", "tool_results.result_no"],
    ),
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("operation", String(64), nullable=False),
    Column("request_sha256", String(64), nullable=False),
    Column("response_json", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

evidence = Table(
    "evidence",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("evidence_id", String(ID), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("source", String(1024), nullable=False),
    Column("scope", String(255), nullable=False),
    Column("locator", String(1024), nullable=False),
    Column("statement", Text, nullable=True),
    Column("blob_sha256", String(64), nullable=False),
    Column("media_type", String(MEDIA_TYPE_COLUMN), nullable=False),
    Column("observed_at", UTCDateTime, nullable=False),
    Column("valid_from", UTCDateTime, nullable=True),
    Column("valid_until", UTCDateTime, nullable=True),
    Column("sensitivity", Integer, nullable=False),
    Column("provenance", String(32), nullable=False),
    Column("owner", String(TENANT), nullable=True),
    Column("session_id", String(TENANT), nullable=True),
    Column("status", String(16), nullable=False),  # active | superseded | retracted
    Column("recorded_at", UTCDateTime, nullable=False),
    Column("recorded_by", String(TENANT), nullable=False),
    Column("ended_at", UTCDateTime, nullable=True),  # when it stopped being active
    # The caller's JSON object kept with the version, as canonical JSON text (rules/metadata.py,
    # metadata_json); NULL when it gave none.
    Column("metadata_json", Text, nullable=True),
    ForeignKeyConstraint(["tenant_id", "blob_sha256"], ["blobs.tenant_id", "blobs.sha256"]),
    Index("ix_evidence_blob", "tenant_id", "blob_sha256"),
    Index("ix_evidence_owner", "tenant_id", "owner"),
)

memory_facts = Table(
    "memory_facts",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("owner", String(TENANT), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("value", Text, nullable=False),
    Column("provenance", String(32), nullable=False),
    Column("status", String(16), nullable=False),  # active | superseded
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", String(TENANT), nullable=False),
    Column("expires_at", UTCDateTime, nullable=True),
    Column("ended_at", UTCDateTime, nullable=True),
    Column("derived_from", String(512), nullable=True),  # a SourceRef, for the deletion cascade
    Index("ix_memory_facts_derived", "tenant_id", "derived_from"),
)

summaries = Table(
    "summaries",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("summary_id", String(64), primary_key=True),
    Column("text", Text, nullable=False),
    Column("trace_ref", String(1024), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", String(TENANT), nullable=False),
    Column("sensitivity", Integer, nullable=False),
)

summary_sources = Table(
    "summary_sources",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("summary_id", String(64), primary_key=True),
    Column("source_ref", String(512), primary_key=True),
    ForeignKeyConstraint(
        ["tenant_id", "summary_id"], ["summaries.tenant_id", "summaries.summary_id"], ondelete="CASCADE"
    ),
    Index("ix_summary_sources_ref", "tenant_id", "source_ref"),
)

# A session's task state, one row per version (a new version never overwrites the previous
# one: the previous current gets `superseded_at`). The body is JSON (goal, confirmed facts with
# their evidence refs, open items, constraints, trace_ref, what this version released).
task_states = Table(
    "task_states",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("session_id", String(TENANT), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("body_json", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("created_by", String(TENANT), nullable=False),
    Column("sensitivity", Integer, nullable=False),
    Column("superseded_at", UTCDateTime, nullable=True),
    ForeignKeyConstraint(["tenant_id", "session_id"], ["sessions.tenant_id", "sessions.session_id"]),
)

# The normalised ref each confirmed fact of a version cites (`evidence:<id>`,
# `result:<session>/<rN>`, `memory:<owner>/<key>`): the deletion cascade finds by it the versions
# that repeat deleted evidence.
task_state_refs = Table(
    "task_state_refs",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("session_id", String(TENANT), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("ref", String(512), primary_key=True),
    ForeignKeyConstraint(
        ["tenant_id", "session_id", "version"],
        ["task_states.tenant_id", "task_states.session_id", "task_states.version"],
    ),
    Index("ix_task_state_refs_ref", "tenant_id", "ref"),
)

audit_events = Table(
    "audit_events",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("at", UTCDateTime, nullable=False),
    Column("actor", String(TENANT), nullable=False),
    Column("action", String(64), nullable=False),
    Column("target", String(1024), nullable=False),
    Column("detail_json", Text, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
)

# The chain head per tenant: appends lock it (one writer per tenant chain at a time), and
# it makes removal of the newest events detectable.
audit_heads = Table(
    "audit_heads",
    metadata,
    Column("tenant_id", String(TENANT), primary_key=True),
    Column("last_seq", BigInteger, nullable=False),
    Column("last_hash", String(64), nullable=False),
)

outbox = Table(
    "outbox",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("tenant_id", String(TENANT), nullable=False),
    Column("op", String(32), nullable=False),  # index_upsert | index_delete | cache_purge
    Column("entity", String(32), nullable=False),  # evidence | tool_result | memory | summary | tenant
    Column("entity_ref", String(1024), nullable=False),
    Column("payload_json", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("done_at", UTCDateTime, nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text, nullable=True),
    # Set only while a row is applied to the embedded index and awaits its group-commit flush
    # (mnemo_sea/system/projection/indexer.py); cleared when it is done.
    Column("applied_at", UTCDateTime, nullable=True),
    Index("ix_outbox_pending", "done_at", "id"),
    # A deletion finds (and empties) the rows about its targets by this.
    Index("ix_outbox_target", "tenant_id", "entity", "entity_ref"),
)

# API keys of the service surfaces. Only a hash of the secret is kept: a leaked table lets no one in.
api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", String(32), primary_key=True),
    Column("tenant_id", String(TENANT), nullable=False),
    Column("subject", String(TENANT), nullable=False),
    Column("roles", String(64), nullable=False),  # comma-separated Role values
    Column("clearance", Integer, nullable=False),
    Column("name", String(200), nullable=False),
    Column("secret_sha256", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime, nullable=True),
    Index("ix_api_keys_tenant_id", "tenant_id"),
)
