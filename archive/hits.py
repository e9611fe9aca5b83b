"""Search hydration: the hits an index answered, read back as the caller, with every access check.

The index filters by tenant, clearance and owner, but its payloads are copies: one written
before a record was retracted or superseded, by an older indexer, or simply wrong, could name
something the caller may not read. So each hit is read again here, as the caller would read
it through the archive's other reads:

- an archived original's page (archive/rules/original_pages.py) as its note is, from the
  result's archiving on, and only for a principal who may recover the original (the agent
  role: `read_result`'s rule); its original hash-verified as a whole and the page cut as the
  indexer cut it (the point's hash names the page's text, so a page cut otherwise is dropped);
  its hit also names the lines and bytes of the original it quotes, which `recover` takes;
- in the caller's tenant only (every statement is scoped by it), with the reader role;
- clearance at least the record's sensitivity (an evidence version's, an archived result's, a
  summary's; memory counts as `records.MEMORY_SENSITIVITY`);
- the one access rule of every read (`Principal.may_read`): a principal without the agent role
  sees evidence without an owner or of its own, notes of sessions about itself, its own facts,
  and summaries only when every source is one it could read so;
- answering at `as_of`, or now (archive/rules/in_force.py): an archived result's note and a summary
  from the moment they were written;
- an evidence version is served only when its stored bytes hash to its recorded sha256 and that
  sha256 is the one the index holds (a corrupt original is reported by fsck, never shown).

A hit failing any check reads as None, and search drops it (counted in `dropped`), so one bad
or stale hit never hides the others. The reads are batched: a constant number of statements
per call (one per kind present; summaries three more, for their sources' owners), however many
hits there are, since hydration runs on every search.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol, cast

from sqlalchemy import Connection, Integer, Select, String, bindparam, column, select, tuple_, values

from .rules.checks import aware
from .rules.clock import utcnow
from .rules.errors import IntegrityFailure, InvalidInput
from .rules.in_force import (
    evidence_answers_at,
    evidence_answers_now,
    in_force,
    memory_answers_at,
)
from .rules.metadata import metadata_of
from .rules.original_pages import page_first_line, page_of_version, page_span
from .rules.principal import Principal, Role
from .rules.records import MEMORY_SENSITIVITY, ORIGINAL_KIND
from .rules.refs import (
    EVIDENCE_REF_PREFIX,
    SUMMARY_PREFIX,
    MemoryIndexId,
    ResultIndexId,
    parse_index_id,
)
from .rules.tool_results import parse_result_id
from .storage import schema as t
from .storage.blobs import read_blob, sha256_hex, verified
from .storage.outbox import originals_pending
from .storage.rows import archived_notes, fact_from_row, summary_from_row
from .storage.statements import PreparedSelect, prepared_select
from .storage.store import ArchiveStore


class PointsToHit(Protocol):
    """What hydration reads of a hit the index answered: which version of what, the span of
    its text, and the content hash the index holds (evidence versions; empty for the other
    kinds). The one way a hit comes in: the index's own `Hit` is one (the archive does not
    import the index, so it names the fields, not the type), and so is the facade's cached
    `Pointer`; each is passed as it is, never copied into a type of the archive's."""

    @property
    def evidence_id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def content_sha256(self) -> str: ...


class HydratedHit(NamedTuple):
    """A hit as the caller may see it, read back from the archive: the exact, verified text of
    its span (`snippet`), where it is (`locator`) and what it is (`label`). It holds only what
    the archive knows; what the index knew (scores, ranks) stays with the hit it came from.
    A hit in an archived original also names the original's lines (from 1, both included) and
    bytes ([start, end)) that the snippet is: `recover(..., lines=...)` brings them back."""

    snippet: str
    locator: str
    label: str = "evidence"
    lines: tuple[int, int] | None = None
    byte_range: tuple[int, int] | None = None
    # An evidence version's metadata (EvidenceRecord.metadata), as the caller kept it with the
    # version hit; None for every other kind and for a version kept without.
    metadata: dict[str, Any] | None = None


# What a pointer names, as dict keys: tuples hash and compare in C, and each search builds and
# looks up one per hit. The last field tells the kinds apart, since equal tuples are equal keys.
class _Evidence(NamedTuple):
    evidence_id: str
    version: int
    tag: str = "evidence"


class _Note(NamedTuple):
    session_id: str
    result_no: int
    tag: str = "note"


class _Page(NamedTuple):
    session_id: str
    result_no: int
    page: int
    tag: str = "page"


class _Fact(NamedTuple):
    owner: str
    key: str
    version: int
    tag: str = "fact"


class _Summary(NamedTuple):
    summary_id: str
    tag: str = "summary"


_Target = _Evidence | _Note | _Page | _Fact | _Summary


class _Readable(NamedTuple):
    """A target's whole text, readable by the caller; `content_sha256` is checked against the
    pointer's when set (evidence)."""

    text: str
    locator: str
    label: str
    content_sha256: str | None = None
    # Where the text starts in its original (byte offset, line from 1): an archived original's page.
    origin: tuple[int, int] | None = None
    metadata_json: str | None = None  # an evidence version's, parsed per hit (`_cut`)


def read_hits(
    store: ArchiveStore,
    principal: Principal,
    pointers: Sequence[PointsToHit],
    as_of: datetime | None,
    corrupt: list[tuple[str, IntegrityFailure]] | None = None,
) -> list[HydratedHit | None]:
    """Each pointer's text as `principal` may read it at `as_of` (None: now), in order; None
    for a pointer the caller may not read, or that names nothing current (see the module
    docstring). Forbidden without the reader role; InvalidInput for a naive `as_of`.
    An original failing its hash is never served: it is dropped, and (target, error) appended
    to `corrupt` for the caller to audit."""
    principal.require(Role.READER, "reading search hits")
    at = aware("as_of", as_of)
    if not pointers:
        return []
    if all(p.kind not in _OTHER_KINDS for p in pointers):
        # Nearly every search names evidence only: its versions are read and cut straight from
        # their rows, without a target, a set per kind and a `_Readable` per hit (`_cut_evidence`).
        found = _read_evidence(store, principal, {(p.evidence_id, p.version) for p in pointers}, at, corrupt)
        return [_cut_evidence(p, found.get((p.evidence_id, p.version))) for p in pointers]
    targets = [_target(p) for p in pointers]
    wanted = [x for x in targets if x is not None]
    readable: dict[_Target, _Readable] = {}
    tenant = principal.tenant_id
    # One pass sorts the targets by kind (the tag is each tuple's last field): nearly every
    # search names evidence only.
    by_kind: dict[str, set[Any]] = {
        "evidence": set(),
        "note": set(),
        "page": set(),
        "fact": set(),
        "summary": set(),
    }
    for x in wanted:
        by_kind[x.tag].add(x)
    evidence: set[_Evidence] = by_kind["evidence"]
    notes: set[_Note] = by_kind["note"]
    pages: set[_Page] = by_kind["page"]
    facts: set[_Fact] = by_kind["fact"]
    summaries: set[_Summary] = by_kind["summary"]
    if evidence:  # one prepared statement, outside a transaction
        versions = _read_evidence(
            store, principal, {(x.evidence_id, x.version) for x in evidence}, at, corrupt
        )
        for (evidence_id, version), (text, row) in versions.items():
            readable[_Evidence(evidence_id, version)] = _Readable(
                text, row.locator, "evidence", row.blob_sha256, None, row.metadata_json
            )
    if notes or pages or facts or summaries:
        with store.read() as conn:
            if notes:
                readable.update(_read_notes(conn, tenant, principal, notes, at))
            if pages:
                readable.update(_read_pages(conn, tenant, principal, pages, at, corrupt))
            if facts:
                readable.update(_read_facts(conn, tenant, principal, facts, at))
            if summaries:
                readable.update(_read_summaries(conn, tenant, principal, summaries, at))
    return [_cut(p, None if x is None else readable.get(x)) for p, x in zip(pointers, targets, strict=True)]


_OTHER_KINDS = frozenset({"tool_result", ORIGINAL_KIND, "memory", "summary"})


def _target(p: PointsToHit) -> _Target | None:
    """What a pointer names: the kind and the id's shape decide (refs.parse_index_id); an
    evidence record is anything else. None for a result id no result could have."""
    if p.kind not in _OTHER_KINDS:
        return _Evidence(p.evidence_id, p.version)  # nearly every hit; no id to parse
    named = parse_index_id(p.evidence_id)
    if p.kind in ("tool_result", ORIGINAL_KIND) and isinstance(named, ResultIndexId):
        try:
            result_no = parse_result_id(named.result_id)
        except InvalidInput:
            return None
        page = page_of_version(p.version)
        if (page is None) != (p.kind == "tool_result"):
            return None  # a note is version 1, a page any later one
        return (
            _Note(named.session_id, result_no) if page is None else _Page(named.session_id, result_no, page)
        )
    if p.kind == "memory" and isinstance(named, MemoryIndexId):
        return _Fact(named.owner, named.key, p.version)
    if p.kind == "summary" and p.evidence_id.startswith(SUMMARY_PREFIX):
        return _Summary(p.evidence_id)
    return _Evidence(p.evidence_id, p.version)


def _cut(p: PointsToHit, found: _Readable | None) -> HydratedHit | None:
    if found is None or (found.content_sha256 is not None and found.content_sha256 != p.content_sha256):
        return None
    snippet = found.text[p.start : p.end]
    if found.origin is None:
        if found.metadata_json is not None:
            return HydratedHit(snippet, found.locator, found.label, metadata=metadata_of(found.metadata_json))
        return HydratedHit(snippet, found.locator, found.label)
    byte_at, line_at = found.origin
    start = byte_at + len(found.text[: p.start].encode("utf-8"))
    end = start + len(snippet.encode("utf-8"))
    first = line_at + found.text.count("\n", 0, p.start)
    last = first + snippet.count("\n", 0, max(len(snippet) - 1, 0))
    return HydratedHit(snippet, found.locator, found.label, (first, last), (start, end))


def _cut_evidence(p: PointsToHit, found: _Version | None) -> HydratedHit | None:
    """`_cut` of an evidence version read by `_read_evidence`: dropped unless its recorded
    sha256 (which its stored bytes hashed to) is the one the index holds."""
    if found is None:
        return None
    text, row = found
    if row.blob_sha256 != p.content_sha256:
        return None
    if row.metadata_json is not None:
        return HydratedHit(
            text[p.start : p.end], row.locator, "evidence", metadata=metadata_of(row.metadata_json)
        )
    return HydratedHit(text[p.start : p.end], row.locator, "evidence")


class _EvidenceRow(NamedTuple):
    """An evidence version as a search answering now reads it: only the columns the checks and
    the text need, no record built per hit. The validity bounds come last; a search answering
    now reads no transaction-time column, so it parses no timestamp it would not look at."""

    evidence_id: str
    version: int
    locator: str
    metadata_json: str | None
    blob_sha256: str
    sensitivity: int
    owner: str | None
    content: bytes | None  # None: the blob is missing (outer join), which `verified` refuses
    status: str
    valid_from: datetime | None
    valid_until: datetime | None


class _EvidenceRowAsOf(NamedTuple):
    """`_EvidenceRow` and the transaction-time columns, read by a search `as_of` a moment
    (in_force.EvidenceTimes)."""

    evidence_id: str
    version: int
    locator: str
    metadata_json: str | None
    blob_sha256: str
    sensitivity: int
    owner: str | None
    content: bytes | None
    status: str
    valid_from: datetime | None
    valid_until: datetime | None
    recorded_at: datetime
    ended_at: datetime | None


# An evidence version the caller may read: its verified text and its row.
_Version = tuple[str, _EvidenceRow | _EvidenceRowAsOf]

_EVIDENCE_COLUMNS = (
    t.evidence.c.evidence_id,
    t.evidence.c.version,
    t.evidence.c.locator,
    t.evidence.c.metadata_json,
    t.evidence.c.blob_sha256,
    t.evidence.c.sensitivity,
    t.evidence.c.owner,
    t.blobs.c.content,
    t.evidence.c.status,
    t.evidence.c.valid_from,
    t.evidence.c.valid_until,
)
_AS_OF_COLUMNS = (t.evidence.c.recorded_at, t.evidence.c.ended_at)


def _evidence_statement(slots: int, *, as_of: bool, dialect: str) -> Select[Any]:
    """The read of up to `slots` evidence versions. Sizes are exact up to 16, powers of two above
    (`_slots`), so a few statements serve every search, each rendered once per dialect (`_prepared`);
    plain parameters (`e0`, `v0`, ...) need no per-call rendering as an expanding IN does.
    Each version is named by its whole primary key, in the form each database plans best:

    - SQLite: a VALUES list of the versions joined to the evidence, so SQLite walks the list
      and looks each version up, then its blob. (With a row-value IN it built two temporary
      indexes per search, one for the ids and one for the pairs, and took a third longer;
      an OR of the pairs scanned the tenant's evidence by ix_evidence_blob.)
    - PostgreSQL: the ids and the pairs as IN lists. Without statistics (a new or small
      tenant, before ANALYZE) it planned the VALUES join as a scan of the tenant's evidence
      and blobs, four times slower.

    Only the columns the checks and the text need are read; no record is built per hit."""
    ids = [bindparam(f"e{i}", type_=String) for i in range(slots)]
    versions = [bindparam(f"v{i}", type_=Integer) for i in range(slots)]
    columns = _EVIDENCE_COLUMNS + _AS_OF_COLUMNS if as_of else _EVIDENCE_COLUMNS
    blob = t.blobs.c
    with_blob = (blob.tenant_id == t.evidence.c.tenant_id) & (blob.sha256 == t.evidence.c.blob_sha256)
    in_tenant = t.evidence.c.tenant_id == bindparam("tenant")
    if dialect != "sqlite":
        return (
            select(*columns)
            .select_from(t.evidence.outerjoin(t.blobs, with_blob))
            .where(
                in_tenant,
                t.evidence.c.evidence_id.in_(ids),
                tuple_(t.evidence.c.evidence_id, t.evidence.c.version).in_(
                    [tuple_(e, v) for e, v in zip(ids, versions, strict=True)]
                ),
            )
        )
    wanted = (
        values(column("evidence_id", String), column("version", Integer), name="wanted")
        .data(list(zip(ids, versions, strict=True)))
        .cte("wanted")
    )
    return select(*columns).select_from(
        wanted.join(
            t.evidence,
            in_tenant
            & (t.evidence.c.evidence_id == wanted.c.evidence_id)
            & (t.evidence.c.version == wanted.c.version),
        ).outerjoin(t.blobs, with_blob)
    )


def _prepared(store: ArchiveStore, slots: int, *, as_of: bool) -> PreparedSelect:
    """The evidence read for `slots`, rendered once per kind of database, not per store."""
    dialect = store.engine.dialect
    return prepared_select(
        f"hits.evidence/{slots}/{'as_of' if as_of else 'now'}",
        lambda: _evidence_statement(slots, as_of=as_of, dialect=dialect.name),
        dialect,
        row=_EvidenceRowAsOf if as_of else _EvidenceRow,
    )


# Up to this many versions a statement names exactly as many: a search's usual ten hits are not
# padded to 16 slots, whose six empty lookups cost SQLite a tenth of the statement. Above it,
# powers of two keep the statements few (every size is one in SQLite's statement cache).
_EXACT_SLOTS = 16


def _slots(n: int) -> int:
    if n <= _EXACT_SLOTS:
        return max(n, 1)
    return 1 << (n - 1).bit_length()


@functools.cache
def _slot_names(slots: int) -> tuple[tuple[str, str], ...]:
    """The statement's parameter names for `slots` versions: (`e0`, `v0`), (`e1`, `v1`), ..."""
    return tuple((f"e{i}", f"v{i}") for i in range(slots))


def _read_evidence(
    store: ArchiveStore,
    principal: Principal,
    wanted: set[tuple[str, int]],
    at: datetime | None,
    corrupt: list[tuple[str, IntegrityFailure]] | None,
) -> dict[tuple[str, int], _Version]:
    """The versions `wanted` ((evidence id, version) pairs) the caller may read at `at`, whose
    stored bytes hash to their recorded sha256: their text and row, by (evidence id, version)."""
    keys = sorted(wanted)
    out: dict[tuple[str, int], _Version] = {}
    slots = _slots(len(keys))
    # Unused slots name no version: no evidence id is empty (refs.check_evidence_id), and an
    # IN list's duplicate would match no row twice either.
    padded = keys + [("", 0)] * (slots - len(keys))
    params: dict[str, Any] = {"tenant": principal.tenant_id}
    for (id_name, version_name), (evidence_id, version) in zip(_slot_names(slots), padded, strict=True):
        params[id_name] = evidence_id
        params[version_name] = version
    # Rows of `_EvidenceRowAsOf` when `at` is set, else of `_EvidenceRow` (`_prepared`).
    rows = cast(
        "list[_EvidenceRow | _EvidenceRowAsOf]",
        store.select(_prepared(store, slots, as_of=at is not None), params),
    )
    now = utcnow()  # one moment for every hit of the search
    for row in rows:
        if not principal.may_read(row.sensitivity, row.owner):
            continue
        if at is None:
            if not evidence_answers_now(row.status, row.valid_from, row.valid_until, now):
                continue
        elif not isinstance(row, _EvidenceRowAsOf) or not evidence_answers_at(row, at):
            continue
        try:
            text = verified(row.blob_sha256, row.content).decode("utf-8")
        except IntegrityFailure as e:
            if corrupt is not None:  # never served; audited by the caller, reported by fsck
                corrupt.append((f"evidence:{row.evidence_id}@{row.version}", e))
            continue
        except UnicodeDecodeError:
            continue  # a binary original is not searchable text: no index entry names it rightly
        out[row.evidence_id, row.version] = (text, row)
    return out


def _read_notes(
    conn: Connection, tenant: str, principal: Principal, wanted: set[_Note], at: datetime | None
) -> dict[_Target, _Readable]:
    out: dict[_Target, _Readable] = {}
    # The system's unchecked read of notes, checked here for the caller.
    for note in archived_notes(conn, tenant, [(x.session_id, x.result_no) for x in wanted]):
        if not principal.may_read(note.sensitivity, note.owner):
            continue
        if at is not None and not in_force(note.archived_at, None, at):
            continue  # the note exists from its archiving on
        target = _Note(note.session_id, parse_result_id(note.result_id))
        out[target] = _Readable(note.note, f"{note.session_id}/{note.result_id}", "archived result note")
    return out


def _read_pages(
    conn: Connection,
    tenant: str,
    principal: Principal,
    wanted: set[_Page],
    at: datetime | None,
    corrupt: list[tuple[str, IntegrityFailure]] | None,
) -> dict[_Target, _Readable]:
    """Pages of archived originals, readable as their notes are by a principal who may recover
    them (agent role); each original is read once and verified as a whole."""
    if not principal.may_read_originals():
        return {}
    by_result: dict[tuple[str, int], list[int]] = {}
    for x in wanted:
        by_result.setdefault((x.session_id, x.result_no), []).append(x.page)
    out: dict[_Target, _Readable] = {}
    for note in archived_notes(conn, tenant, list(by_result)):
        if note.copy or not principal.may_read(note.sensitivity, note.owner):
            continue
        if at is not None and not in_force(note.archived_at, None, at):
            continue
        result_no = parse_result_id(note.result_id)
        locator = f"{note.session_id}/{note.result_id}"
        try:
            content = read_blob(conn, tenant, note.content_sha256)
        except IntegrityFailure as e:
            if corrupt is not None:
                corrupt.append((f"result:{locator}", e))
            continue
        for page in by_result[(note.session_id, result_no)]:
            start, end = page_span(content, page)
            try:
                text = content[start:end].decode("utf-8")
            except UnicodeDecodeError:
                continue  # a binary original has no indexed pages: the point is stale
            origin = (start, page_first_line(content, start))
            out[_Page(note.session_id, result_no, page)] = _Readable(
                text, locator, "archived original", sha256_hex(content[start:end]), origin
            )
    return out


def pending_originals(store: ArchiveStore, principal: Principal) -> int:
    """How many archived originals the caller may read are not yet wholly searchable (pages
    still in the outbox): a search tells its caller, since their text is not found meanwhile."""
    principal.require(Role.READER, "searching")
    if not principal.may_read_originals():
        return 0  # it would not find them indexed either: originals are the agents'
    tenant = principal.tenant_id
    with store.read() as conn:
        refs = originals_pending(conn, tenant)
        if not refs:
            return 0
        keys = [
            (named.session_id, parse_result_id(named.result_id)) for named in map(ResultIndexId.of_ref, refs)
        ]
        return sum(
            1
            for note in archived_notes(conn, tenant, keys)
            if principal.may_read(note.sensitivity, note.owner)
        )


def _read_facts(
    conn: Connection, tenant: str, principal: Principal, wanted: set[_Fact], at: datetime | None
) -> dict[_Target, _Readable]:
    rows = conn.execute(
        select(t.memory_facts).where(
            t.memory_facts.c.tenant_id == tenant,
            tuple_(t.memory_facts.c.owner, t.memory_facts.c.key, t.memory_facts.c.version).in_(
                sorted((x.owner, x.key, x.version) for x in wanted)
            ),
        )
    )
    out: dict[_Target, _Readable] = {}
    for row in rows:
        fact = fact_from_row(row)
        if not principal.may_read(MEMORY_SENSITIVITY, fact.owner):
            continue
        if not memory_answers_at(fact, row.ended_at, at):
            continue
        out[_Fact(fact.owner, fact.key, fact.version)] = _Readable(
            f"{fact.key}: {fact.value}", f"{fact.owner}/{fact.key}", f"memory ({fact.provenance})"
        )
    return out


def _read_summaries(
    conn: Connection, tenant: str, principal: Principal, wanted: set[_Summary], at: datetime | None
) -> dict[_Target, _Readable]:
    ids = sorted(x.summary_id for x in wanted)
    rows = list(
        conn.execute(
            select(t.summaries).where(t.summaries.c.tenant_id == tenant, t.summaries.c.summary_id.in_(ids))
        )
    )
    if not rows:
        return {}
    sources: dict[str, list[str]] = {}
    for source in conn.execute(
        select(t.summary_sources.c.summary_id, t.summary_sources.c.source_ref).where(
            t.summary_sources.c.tenant_id == tenant, t.summary_sources.c.summary_id.in_(ids)
        )
    ):
        sources.setdefault(source.summary_id, []).append(source.source_ref)
    owners = _source_owners(conn, tenant, [ref for refs in sources.values() for ref in refs])
    out: dict[_Target, _Readable] = {}
    for row in rows:
        summary = summary_from_row(row, sorted(sources.get(row.summary_id, [])))
        # A summary repeats its sources: it is the caller's to read only if every source is.
        whose = [owner for ref in summary.derived_from for owner in owners.get(ref, ())]
        if not principal.may_read(summary.sensitivity, None) or not all(
            principal.may_read(summary.sensitivity, owner) for owner in whose
        ):
            continue
        if at is not None and not in_force(summary.created_at, None, at):
            continue  # a summary answers from its creation on
        out[_Summary(summary.summary_id)] = _Readable(summary.text, summary.trace_ref or "", summary.label)
    return out


def _source_owners(conn: Connection, tenant: str, refs: Sequence[str]) -> dict[str, set[str]]:
    """The owners each source ref's data belongs to, as sources.source_owner reads them (every
    version of an evidence record; a result's session), in one statement per kind of source."""
    evidence_ids = {
        ref.removeprefix(EVIDENCE_REF_PREFIX) for ref in refs if ref.startswith(EVIDENCE_REF_PREFIX)
    }
    results = {ref: named for ref in refs if isinstance(named := parse_index_id(ref), ResultIndexId)}
    by_evidence: dict[str, set[str]] = {}
    if evidence_ids:
        for row in conn.execute(
            select(t.evidence.c.evidence_id, t.evidence.c.owner).where(
                t.evidence.c.tenant_id == tenant,
                t.evidence.c.evidence_id.in_(sorted(evidence_ids)),
                t.evidence.c.owner.is_not(None),
            )
        ):
            by_evidence.setdefault(row.evidence_id, set()).add(row.owner)
    by_session: dict[str, str] = {}
    if results:
        session_ids = sorted({named.session_id for named in results.values()})
        for row in conn.execute(
            select(t.sessions.c.session_id, t.sessions.c.owner).where(
                t.sessions.c.tenant_id == tenant, t.sessions.c.session_id.in_(session_ids)
            )
        ):
            by_session[row.session_id] = row.owner
    owners: dict[str, set[str]] = {}
    for ref in refs:
        if ref.startswith(EVIDENCE_REF_PREFIX):
            owners[ref] = by_evidence.get(ref.removeprefix(EVIDENCE_REF_PREFIX), set())
        elif ref in results and results[ref].session_id in by_session:
            owners[ref] = {by_session[results[ref].session_id]}
    return owners
