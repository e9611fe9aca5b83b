"""Rows read into the records they hold, by column name: each table's converter and the reads of
stored versions, shared by the feature that writes a table, hit hydration and the system's
readers (internal_reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, Select, bindparam, select, tuple_

from ..rules.in_force import expired
from ..rules.metadata import metadata_of
from ..rules.principal import Sensitivity
from ..rules.records import EvidenceRecord, MemoryFact, Summary
from ..rules.tool_results import result_id
from . import schema as t


def to_record(row: Row[Any]) -> EvidenceRecord:
    return EvidenceRecord(
        evidence_id=row.evidence_id,
        version=row.version,
        kind=row.kind,
        source=row.source,
        scope=row.scope,
        locator=row.locator,
        statement=row.statement,
        media_type=row.media_type,
        content_sha256=row.blob_sha256,
        observed_at=row.observed_at,
        valid_from=row.valid_from,
        valid_until=row.valid_until,
        sensitivity=Sensitivity(row.sensitivity),
        provenance=row.provenance,
        owner=row.owner,
        session_id=row.session_id,
        status=row.status,
        recorded_at=row.recorded_at,
        ended_at=row.ended_at,
        metadata=metadata_of(row.metadata_json),
    )


def version_row(conn: Connection, tenant_id: str, evidence_id: str, version: int) -> Row[Any] | None:
    """One stored version's row, or None."""
    return conn.execute(
        select(t.evidence).where(
            t.evidence.c.tenant_id == tenant_id,
            t.evidence.c.evidence_id == evidence_id,
            t.evidence.c.version == version,
        )
    ).first()


def versions_with_content(tenant_id: str, keys: Sequence[tuple[str, int]]) -> Select[Any]:
    """The rows of these (evidence id, version) pairs with each original's stored bytes beside
    them (`content`, None when the blob row is missing): one statement for a batched read."""
    return (
        select(t.evidence, t.blobs.c.content)
        .select_from(
            t.evidence.outerjoin(
                t.blobs,
                (t.blobs.c.tenant_id == t.evidence.c.tenant_id)
                & (t.blobs.c.sha256 == t.evidence.c.blob_sha256),
            )
        )
        .where(
            t.evidence.c.tenant_id == tenant_id,
            tuple_(t.evidence.c.evidence_id, t.evidence.c.version).in_(list(keys)),
        )
    )


def fact_from_row(row: Row[Any], now: datetime | None = None) -> MemoryFact:
    """The fact a row holds. With `now` (what callers are shown), an active version past its
    expiry reads `expired` until the purge deletes it; without, the stored status (what the
    indexer and fsck work from, which judge expiry themselves)."""
    lapsed = now is not None and row.status == "active" and expired(row.expires_at, now)
    return MemoryFact(
        owner=row.owner,
        key=row.key,
        value=row.value,
        version=row.version,
        provenance=row.provenance,
        status="expired" if lapsed else row.status,
        created_at=row.created_at,
        expires_at=row.expires_at,
        derived_from=row.derived_from,
    )


def summary_from_row(row: Row[Any], refs: list[str]) -> Summary:
    return Summary(
        row.summary_id, row.text, tuple(refs), row.trace_ref, row.created_at, Sensitivity(row.sensitivity)
    )


@dataclass(frozen=True)
class ArchivedNote:
    """An archived tool result as the index sees it: its note, its call, and what its original
    is (the original's pages are indexed too, archive/rules/original_pages.py)."""

    session_id: str
    result_id: str
    tool_name: str
    note: str
    sensitivity: int
    owner: str
    content_sha256: str
    archived_at: datetime  # when the note was written: `as_of` searches find it from then on
    arguments_json: str = "{}"
    size: int = 0  # the original's bytes
    # A recovered copy: its original is its source's, indexed (once) when the source is archived.
    copy: bool = False


def archived_notes(
    conn: Connection, tenant_id: str, results: Iterable[tuple[str, int]]
) -> list[ArchivedNote]:
    """The notes of these archived results, by (session id, result number), in one statement;
    results not archived, or of sessions deleted since, are absent."""
    keys = sorted(set(results))
    if not keys:
        return []
    rows = conn.execute(_ARCHIVED_NOTES, {"tenant_id": tenant_id, "keys": keys})
    return [
        ArchivedNote(
            row.session_id,
            result_id(row.result_no),
            row.tool_name,
            row.note,
            row.sensitivity,
            row.owner,
            row.blob_sha256,
            row.archived_at,
            row.arguments_json,
            int(row.size),
            row.recovered_from_no is not None,
        )
        for row in rows
    ]


# Built once: the indexer reads a result's note for every pass of its original's pages, and
# building this join per call cost SQLAlchemy more than SQLite spends running it.
_ARCHIVED_NOTES = (
    select(
        t.tool_results.c.session_id,
        t.tool_results.c.result_no,
        t.tool_results.c.tool_name,
        t.tool_results.c.sensitivity,
        t.tool_results.c.blob_sha256,
        t.tool_results.c.arguments_json,
        t.tool_results.c.size,
        t.tool_results.c.recovered_from_no,
        t.archive_entries.c.note,
        t.archive_entries.c.archived_at,
        t.sessions.c.owner,
    )
    .select_from(
        t.tool_results.join(
            t.archive_entries,
            (t.archive_entries.c.tenant_id == t.tool_results.c.tenant_id)
            & (t.archive_entries.c.session_id == t.tool_results.c.session_id)
            & (t.archive_entries.c.result_no == t.tool_results.c.result_no),
        ).join(
            t.sessions,
            (t.sessions.c.tenant_id == t.tool_results.c.tenant_id)
            & (t.sessions.c.session_id == t.tool_results.c.session_id),
        )
    )
    .where(
        t.tool_results.c.tenant_id == bindparam("tenant_id"),
        tuple_(t.tool_results.c.session_id, t.tool_results.c.result_no).in_(
            bindparam("keys", expanding=True)
        ),
        t.sessions.c.deleted_at.is_(None),
    )
)
