"""Reads for the system's own components (the indexer, fsck), never on behalf of a principal.

`InternalReads` holds a connection; its reads take a tenant and skip access checks: the composition
root calls them to turn outbox rows into index writes and to compare the index with the
archive. Nothing here answers a caller's request: search hydrates its hits through the
access-checked `Archive.read_hits` (hits.py) instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from sqlalchemy import Connection, select

from .rules.records import EvidenceRecord, MemoryFact, Summary
from .rules.tool_results import parse_result_id, result_id
from .storage import outbox, sources
from .storage import schema as t
from .storage.audit import AuditReport, verify_chain
from .storage.blobs import read_blob, sha256_hex, verified
from .storage.rows import (
    ArchivedNote,
    archived_notes,
    fact_from_row,
    summary_from_row,
    to_record,
    version_row,
    versions_with_content,
)

_CHUNK = 400  # (evidence id, version) pairs per statement, under every backend's parameter limit


class InternalReads:
    """The reads of one read transaction (`Archive.internal_reads()`, or the indexer's own
    connection), for the system's components: no principal, no access check."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def evidence_version(
        self, tenant_id: str, evidence_id: str, version: int
    ) -> tuple[EvidenceRecord, bytes] | None:
        row = version_row(self.conn, tenant_id, evidence_id, version)
        if row is None:
            return None
        return to_record(row), read_blob(self.conn, tenant_id, row.blob_sha256)

    def evidence_versions(
        self, tenant_id: str, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[EvidenceRecord, bytes]]:
        """`evidence_version` of many (evidence id, version) pairs, the originals read in the same
        statement and hash-verified (IntegrityFailure for the first that fails); missing ones absent."""
        found: dict[tuple[str, int], tuple[EvidenceRecord, bytes]] = {}
        for start in range(0, len(keys), _CHUNK):
            rows = self.conn.execute(versions_with_content(tenant_id, keys[start : start + _CHUNK]))
            for row in rows:
                found[(row.evidence_id, row.version)] = (
                    to_record(row),
                    verified(row.blob_sha256, row.content),
                )
        return found

    def archived_note(self, tenant_id: str, session_id: str, rid: str) -> ArchivedNote | None:
        found = archived_notes(self.conn, tenant_id, [(session_id, parse_result_id(rid))])
        return found[0] if found else None

    def archived_original(
        self, tenant_id: str, session_id: str, rid: str
    ) -> tuple[ArchivedNote, bytes] | None:
        """An archived result's note with its original, hash-verified (IntegrityFailure when it
        fails); None when the result is not archived (or gone)."""
        note = self.archived_note(tenant_id, session_id, rid)
        if note is None:
            return None
        return note, self.original(tenant_id, note.content_sha256)

    def original(self, tenant_id: str, digest: str) -> bytes:
        """The original stored under `digest`, hash-verified (IntegrityFailure when it fails or
        is missing)."""
        return read_blob(self.conn, tenant_id, digest)

    def memory_version(
        self, tenant_id: str, owner: str, key: str, version: int
    ) -> tuple[MemoryFact, datetime | None] | None:
        """One version of a fact with the time it stopped being current (None while it is)."""
        row = self.conn.execute(
            select(t.memory_facts).where(
                t.memory_facts.c.tenant_id == tenant_id,
                t.memory_facts.c.owner == owner,
                t.memory_facts.c.key == key,
                t.memory_facts.c.version == version,
            )
        ).first()
        return None if row is None else (fact_from_row(row), row.ended_at)

    def summary(self, tenant_id: str, summary_id: str) -> Summary | None:
        row = self.conn.execute(
            select(t.summaries).where(
                t.summaries.c.tenant_id == tenant_id, t.summaries.c.summary_id == summary_id
            )
        ).first()
        if row is None:
            return None
        refs = [
            r.source_ref
            for r in self.conn.execute(
                select(t.summary_sources.c.source_ref).where(
                    t.summary_sources.c.tenant_id == tenant_id, t.summary_sources.c.summary_id == summary_id
                )
            )
        ]
        return summary_from_row(row, sorted(refs))

    def tenants(self) -> list[str]:
        found: set[str] = set()
        for table in (t.evidence, t.sessions, t.memory_facts, t.summaries):
            found.update(r[0] for r in self.conn.execute(select(table.c.tenant_id).distinct()))
        return sorted(found)

    def searchable_evidence(self, tenant_id: str) -> Iterator[tuple[str, int, str, str]]:
        """(evidence_id, version, status, content sha256) of every version the index should hold."""
        for row in self.conn.execute(
            select(
                t.evidence.c.evidence_id, t.evidence.c.version, t.evidence.c.status, t.evidence.c.blob_sha256
            )
            .where(t.evidence.c.tenant_id == tenant_id, t.evidence.c.status.in_(("active", "superseded")))
            .order_by(t.evidence.c.evidence_id, t.evidence.c.version)
        ):
            yield row.evidence_id, row.version, row.status, row.blob_sha256

    def archived_results(self, tenant_id: str) -> Iterator[tuple[str, str]]:
        """(session_id, result id) of every archived result whose note the index should hold."""
        for row in self.conn.execute(
            select(t.archive_entries.c.session_id, t.archive_entries.c.result_no)
            .where(t.archive_entries.c.tenant_id == tenant_id)
            .order_by(t.archive_entries.c.session_id, t.archive_entries.c.result_no)
        ):
            yield row.session_id, result_id(row.result_no)

    def active_memory(self, tenant_id: str) -> Iterator[MemoryFact]:
        for row in self.conn.execute(
            select(t.memory_facts).where(
                t.memory_facts.c.tenant_id == tenant_id, t.memory_facts.c.status == "active"
            )
        ):
            yield fact_from_row(row)

    def searchable_memory(self, tenant_id: str) -> Iterator[tuple[MemoryFact, datetime | None]]:
        """Every fact version the index should hold (current and superseded, for `as_of` searches),
        with the time it stopped being current."""
        for row in self.conn.execute(
            select(t.memory_facts)
            .where(
                t.memory_facts.c.tenant_id == tenant_id,
                t.memory_facts.c.status.in_(("active", "superseded")),
            )
            .order_by(t.memory_facts.c.owner, t.memory_facts.c.key, t.memory_facts.c.version)
        ):
            yield fact_from_row(row), row.ended_at

    def summary_ids(self, tenant_id: str) -> list[str]:
        return [
            r[0]
            for r in self.conn.execute(
                select(t.summaries.c.summary_id).where(t.summaries.c.tenant_id == tenant_id)
            )
        ]

    def blob_problems(self, tenant_id: str | None = None) -> Iterator[tuple[str, str, str]]:
        """(tenant, sha256, problem) for every stored original (of one tenant) that fails its hash."""
        stmt = select(t.blobs.c.tenant_id, t.blobs.c.sha256, t.blobs.c.content)
        if tenant_id is not None:
            stmt = stmt.where(t.blobs.c.tenant_id == tenant_id)
        for row in self.conn.execute(stmt):
            actual = sha256_hex(bytes(row.content))
            if actual != row.sha256:
                yield row.tenant_id, row.sha256, f"stored bytes hash to {actual}"

    def pending_count(self, tenant_id: str | None = None) -> int:
        """Outbox rows still to apply (of one tenant when given)."""
        return outbox.pending_count(self.conn, tenant_id)

    def audit_chain(self, tenant_id: str) -> AuditReport:
        """The tenant's audit chain, verified link by link (see audit.verify_chain)."""
        return verify_chain(self.conn, tenant_id)

    def source_owner(self, tenant_id: str, refs: Sequence[str]) -> str | None:
        """Whose data a derived record repeats (see sources.source_owner)."""
        return sources.source_owner(self.conn, tenant_id, refs)
