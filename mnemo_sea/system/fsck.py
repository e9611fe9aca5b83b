"""fsck: compare the index and caches with the archive, report drift, optionally repair it.

The archive is the source of truth, so every repair is derived from it: orphan points are
deleted, missing or stale points are re-indexed from the archived original, and pending
outbox rows are applied. What cannot be repaired from the archive is reported only: an
original failing its hash, a broken audit chain.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from mnemo_sea.archive import IntegrityFailure
from mnemo_sea.archive.rules.original_pages import page_count, page_version
from mnemo_sea.archive.rules.refs import result_index_id
from mnemo_sea.retrieval import EvidenceDocument, InvalidDocument
from mnemo_sea.retrieval.filters import FilterSpec, tenant_filter
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.projection.index_documents import (
    evidence_document,
    memory_document,
    note_document,
    page_documents,
    summary_document,
)


@dataclass(frozen=True)
class Problem:
    # orphan_point | missing_point | stale_point | pending_outbox | blob_hash | audit_chain | unindexable
    kind: str
    tenant_id: str
    ref: str
    detail: str
    repairable: bool

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass(frozen=True)
class FsckReport:
    problems: tuple[Problem, ...]
    repaired: int = 0
    checked: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "repaired": self.repaired,
            "checked": self.checked,
            "problems": [p.to_dict() for p in self.problems],
        }


def _expected(
    mnemo: Mnemo, tenant: str
) -> tuple[dict[tuple[str, int], EvidenceDocument], set[tuple[str, int]], dict[tuple[str, int], str]]:
    """Every document the index should hold for `tenant`, built from the archive; the versions
    whose original fails its hash (reported as blob problems; their points are left); and the
    versions the index refuses, with why (a label stored before the archive refused what the
    index does: reported, not repairable from the archive)."""
    docs: list[EvidenceDocument] = []
    corrupt: set[tuple[str, int]] = set()
    refused: dict[tuple[str, int], str] = {}
    with mnemo.archive.internal_reads() as reads:
        for evidence_id, version, _status, _sha in reads.searchable_evidence(tenant):
            try:
                found = reads.evidence_version(tenant, evidence_id, version)
            except IntegrityFailure:
                corrupt.add((evidence_id, version))
                continue
            if found is not None:
                try:
                    doc = evidence_document(tenant, *found)
                except InvalidDocument as e:
                    refused[(evidence_id, version)] = str(e)
                    continue
                if doc is not None:
                    docs.append(doc)
        for session_id, rid in reads.archived_results(tenant):
            note = reads.archived_note(tenant, session_id, rid)
            if note is None:
                continue
            docs.append(note_document(tenant, note))
            try:
                original = reads.archived_original(tenant, session_id, rid)
            except IntegrityFailure:
                # Reported as a blob problem; the pages indexed before are left as they are.
                indexed_as = result_index_id(session_id, rid)
                corrupt.update((indexed_as, page_version(p)) for p in range(page_count(note.size)))
                continue
            if original is not None:
                docs += page_documents(tenant, *original)
        for fact, ended_at in reads.searchable_memory(tenant):
            memory_doc = memory_document(tenant, fact, ended_at)
            if memory_doc is not None:
                docs.append(memory_doc)
        for summary_id in reads.summary_ids(tenant):
            found_summary = reads.summary(tenant, summary_id)
            if found_summary is not None:
                owner = reads.source_owner(tenant, found_summary.derived_from)
                docs.append(summary_document(tenant, found_summary, owner))
    return {(d.evidence_id, d.version): d for d in docs}, corrupt, refused


# What must agree between a point and the archive: everything a filter or a hydration reads
# (an index built before notes, memory and summaries carried their start of validity has
# valid_from at the beginning of time, and one built before originals' pages had a kind of
# their own has pages of kind tool_result: stale points, re-indexed by --repair).
Fields = tuple[str, str, str, str | None, int, float, float]


def _fields(doc: EvidenceDocument) -> Fields:
    return (
        doc.kind,
        doc.status,
        doc.content_sha256,
        doc.owner,
        doc.sensitivity,
        doc.valid_from_epoch,
        doc.valid_until_epoch,
    )


def _indexed(mnemo: Mnemo, tenant: str) -> dict[tuple[str, int], set[Fields]]:
    """(evidence id, version) -> the distinct field sets of the tenant's points."""
    spec = tenant_filter(tenant)
    out: dict[tuple[str, int], set[Fields]] = defaultdict(set)
    for p in mnemo.index.points_matching(spec):
        out[(p.evidence_id, p.version)].add(
            (p.kind, p.status, p.content_sha256, p.owner, p.sensitivity, p.valid_from, p.valid_until)
        )
    return out


def _index_tenants(mnemo: Mnemo) -> set[str]:
    """Tenants that have points, including any the archive no longer knows (their points are orphans)."""
    return {p.tenant_id for p in mnemo.index.points_matching(FilterSpec(()))}


def run_fsck(mnemo: Mnemo, *, repair: bool = False, tenant_id: str | None = None) -> FsckReport:
    """Check (and with `repair`, fix from the archive) every tenant's index, the outbox, blobs and
    audit, or with `tenant_id` only that tenant's (what a tenant's admin may see)."""
    problems: list[Problem] = []
    repaired = 0
    if repair:
        # Rows set aside after their last failure are tried again: their cause may be gone (a
        # release that indexes what an older one refused); one still failing is set aside again.
        mnemo.indexer.retry_set_aside(tenant_id)  # a tenant's repair touches no other's rows
        repaired += mnemo.sync().applied
    with mnemo.archive.internal_reads() as reads:
        pending = reads.pending_count(tenant_id)
        everyone = tenant_id is None
        tenants = sorted(set(reads.tenants()) | _index_tenants(mnemo)) if everyone else [str(tenant_id)]
        blobs = list(reads.blob_problems(tenant_id))
        chains = [reads.audit_chain(tenant) for tenant in tenants]
    if pending:
        where = tenant_id or "*"
        problems.append(Problem("pending_outbox", where, "outbox", f"{pending} rows not yet applied", True))
    problems += [Problem("blob_hash", tenant, sha, detail, False) for tenant, sha, detail in blobs]
    problems += [
        Problem("audit_chain", report.tenant_id, "audit", "; ".join(report.problems), False)
        for report in chains
        if not report.ok
    ]
    checked = {"tenants": len(tenants), "documents": 0, "indexed": 0}
    for tenant in tenants:
        repaired_before = repaired
        expected, corrupt, refused = _expected(mnemo, tenant)
        problems += [
            Problem("unindexable", tenant, f"{key[0]}@{key[1]}", why, False)
            for key, why in sorted(refused.items())
        ]
        indexed = _indexed(mnemo, tenant)
        checked["documents"] += len(expected)
        checked["indexed"] += len(indexed)
        for key in sorted(set(indexed) - set(expected) - corrupt - set(refused)):
            problems.append(
                Problem("orphan_point", tenant, f"{key[0]}@{key[1]}", "no such current record", True)
            )
            if repair:
                mnemo.index.delete(tenant, key[0], key[1])
                repaired += 1
        for key, doc in sorted(expected.items()):
            have = indexed.get(key)
            want = {_fields(doc)}
            if have == want:
                continue
            kind = "missing_point" if not have else "stale_point"
            detail = "not indexed" if not have else f"index has {sorted(have)}, archive says {sorted(want)}"
            problems.append(Problem(kind, tenant, f"{key[0]}@{key[1]}", detail, True))
            if repair:
                if have:
                    mnemo.index.delete(tenant, key[0], key[1])
                mnemo.index.upsert([doc])
                repaired += 1
        if repaired > repaired_before:
            # Cached searches hold the pointers the drifted index answered: a repaired point
            # (a superseded fact put back, a corrected validity) must show in them too.
            mnemo.cache.bump_generation(tenant)
    if repair:
        mnemo.index.flush()
        after = run_fsck(mnemo, repair=False, tenant_id=tenant_id)
        return FsckReport(after.problems, repaired, after.checked)
    return FsckReport(tuple(problems), repaired, checked)
