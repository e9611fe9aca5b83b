"""The index's documents, built from what the archive holds: one per evidence version, archived
result's note and page of its original, memory fact version and summary. The indexer writes
them; fsck builds them again to compare with what the index holds.
"""

from __future__ import annotations

from datetime import datetime

from mnemo_sea.archive import EvidenceRecord, MemoryFact, Summary
from mnemo_sea.archive.rules.original_pages import NOTE_VERSION, page_count, page_span, page_version
from mnemo_sea.archive.rules.records import MEMORY_SENSITIVITY, ORIGINAL_KIND
from mnemo_sea.archive.rules.refs import memory_index_id, result_index_id
from mnemo_sea.archive.storage.rows import ArchivedNote
from mnemo_sea.retrieval import EvidenceDocument
from mnemo_sea.retrieval.evidence import MAX_HEADING_CHARS
from mnemo_sea.retrieval.fields import epoch_window


def _text(content: bytes) -> str | None:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None  # a binary original is kept and recoverable, but not searchable


def evidence_document(
    tenant: str, record: EvidenceRecord, content: bytes, *, made_here: bool = False
) -> EvidenceDocument | None:
    """The index's view of one version, or None when it cannot be searched (binary original).

    `as_of` searches follow the archive's reading (`get_evidence(as_of=T)`): a version answers
    at T only if it was recorded by T, not yet superseded at T, and valid at T. So the indexed
    validity starts no earlier than `recorded_at` and ends no later than `ended_at`.

    `made_here`: the version is one an archive write of this process validated and made moments
    ago (`EvidenceBatch.made`), so its fields are not checked again (`EvidenceDocument.prechecked`:
    the archive's rules for them are the index's or stricter, see tests/system/
    test_prechecked_documents.py). A version read back from storage is always checked: an
    archive written by an older release may hold a value today's index refuses (a control
    character in a source), which must fail its row, and fsck report it, not reach the index.
    """
    text = _text(content)
    if text is None:
        return None
    valid_from = (
        record.recorded_at if record.valid_from is None else max(record.valid_from, record.recorded_at)
    )
    valid_until = record.valid_until
    if record.status == "superseded" and record.ended_at is not None:
        valid_until = record.ended_at if valid_until is None else min(valid_until, record.ended_at)
    start, end = epoch_window(valid_from, valid_until)
    if end <= start:
        # Expired before it was recorded, or within a span the index cannot tell from nothing
        # (`epoch_window`): a window the archive takes, to the microsecond, would be refused.
        return None  # it answers at no moment
    build = EvidenceDocument.prechecked if made_here else EvidenceDocument
    return build(
        tenant,
        record.evidence_id,
        record.version,
        text,
        kind=record.kind,
        source=record.source,
        scope=record.scope,
        owner=record.owner,
        sensitivity=int(record.sensitivity),
        status=record.status,
        valid_from=valid_from,
        valid_until=valid_until,
        content_sha256=record.content_sha256,
    )


def call_heading(note: ArchivedNote) -> str:
    """What every chunk of an archived result is searched with: its tool and arguments (a path,
    a URL, a command), on one line, cut to the index's bound."""
    line = " ".join(f"{note.tool_name} {note.arguments_json}".split())
    return line[:MAX_HEADING_CHARS]


def note_document(tenant: str, note: ArchivedNote) -> EvidenceDocument:
    """An archived result's note, searchable `as_of` any time from its archiving on."""
    return _result_document(tenant, note, NOTE_VERSION, note.note, "tool_result")


def _result_document(tenant: str, note: ArchivedNote, version: int, text: str, kind: str) -> EvidenceDocument:
    """A version of an archived result's index id: its note, or a page of its original (a kind
    of its own, which a search leaves out for a principal who may not read originals)."""
    return EvidenceDocument(
        tenant_id=tenant,
        evidence_id=result_index_id(note.session_id, note.result_id),
        version=version,
        text=text,
        kind=kind,
        source=note.tool_name[:256],
        scope=f"session:{note.session_id}",
        # A reader finds notes of sessions about itself only, as with live_view.
        owner=note.owner,
        sensitivity=note.sensitivity,
        valid_from=note.archived_at,
        heading=call_heading(note),
    )


def page_document(tenant: str, note: ArchivedNote, content: bytes, page: int) -> EvidenceDocument | None:
    """Page `page` of an archived result's original (archive/rules/original_pages.py), searchable
    as its note is; None when it has no text to search (empty, blank or not UTF-8) or the result
    is a recovered copy (its source's original is indexed instead)."""
    if note.copy:
        return None
    start, end = page_span(content, page)
    try:
        text = content[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return None  # a binary original is kept and recoverable, but not searchable
    if not text.strip():
        return None
    return _result_document(tenant, note, page_version(page), text, ORIGINAL_KIND)


def page_documents(tenant: str, note: ArchivedNote, content: bytes) -> list[EvidenceDocument]:
    """Every page of the original that has text to search (fsck's view of what the index holds)."""
    pages = (page_document(tenant, note, content, p) for p in range(page_count(len(content))))
    return [doc for doc in pages if doc is not None]


def memory_document(tenant: str, fact: MemoryFact, ended_at: datetime | None) -> EvidenceDocument | None:
    """One version of a fact as the index sees it, or None when it answers at no moment.

    As `current(at=T)` reads memory: the version answers at T if it was written by T
    (`created_at`), not yet superseded at T (`ended_at`) and not expired at T (`expires_at`).
    A version past its TTL stays indexed as it was (active, valid until its expiry) until the
    purge deletes it: the time filter hides it now and still finds it `as_of` before then.
    """
    status = "superseded" if fact.status == "superseded" else "active"
    valid_until = fact.expires_at
    if ended_at is not None:
        valid_until = ended_at if valid_until is None else min(valid_until, ended_at)
    if valid_until is not None and valid_until <= fact.created_at:
        return None  # superseded or expired the instant it was written
    return EvidenceDocument(
        tenant_id=tenant,
        evidence_id=memory_index_id(fact.owner, fact.key),
        version=fact.version,
        text=f"{fact.key}: {fact.value}",
        kind="memory",
        source=fact.provenance,
        scope="memory",
        owner=fact.owner,
        sensitivity=int(MEMORY_SENSITIVITY),
        status=status,
        valid_from=fact.created_at,
        valid_until=valid_until,
    )


def summary_document(tenant: str, found: Summary, owner: str | None = None) -> EvidenceDocument:
    """A summary, searchable `as_of` any time from its creation on."""
    return EvidenceDocument(
        tenant_id=tenant,
        evidence_id=found.summary_id,
        version=1,
        text=found.text,
        kind="summary",
        source="summary",
        scope="summary",
        owner=owner,
        sensitivity=int(found.sensitivity),
        valid_from=found.created_at,
    )
