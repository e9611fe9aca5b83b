"""Evidence records with versions: a new version supersedes, never overwrites.

Two time axes: `recorded_at`/`ended_at` say when a version was the archive's current one
(transaction time); `valid_from`/`valid_until` say when its content holds in the world
(valid time). `as_of=T` reads the version that was current at T and valid at T.
"""

from __future__ import annotations

import functools
import operator
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Row, Update, and_, bindparam, case, column, func, select, update, values

from ..rules import limits
from ..rules.checks import aware, check_label, content_bytes
from ..rules.clock import utcnow
from ..rules.errors import (
    InvalidBatch,
    InvalidInput,
    NotFound,
    RetractedContent,
    StateConflict,
    TargetStatus,
)
from ..rules.in_force import evidence_answers_at
from ..rules.metadata import metadata_json, metadata_of
from ..rules.operations import EvidenceInput
from ..rules.policy import check_list_limit, check_offset, check_prefix
from ..rules.principal import Principal, Role, Sensitivity, check_identifier
from ..rules.records import EVIDENCE_KINDS, EvidenceRecord, EvidenceStatus, parse_provenance
from ..rules.refs import DERIVED_ID_PREFIXES, check_evidence_id, version_ref
from ..storage import schema as t
from ..storage.audit import append_event
from ..storage.blobs import put_blobs, read_blob, sha256_hex
from ..storage.idempotency import KeyedRequest, keyed, previous_reply, save_reply
from ..storage.locks import lock_chain, lock_chains
from ..storage.outbox import OutboxRow, enqueue, enqueue_many, last_id
from ..storage.prefixes import starts_with
from ..storage.rows import to_record
from ..storage.statements import multi_row_parts, prepared_insert, prepared_update, rows_in_one_step
from ..storage.store import ArchiveStore

_TEXT_LIMITS = {"source": limits.SOURCE_CHARS, "scope": limits.SCOPE_CHARS, "locator": limits.LOCATOR_CHARS}
STATEMENT_LIMIT = limits.STATEMENT_CHARS


def _check_text(field: str, value: object, limit: int, *, required: bool) -> str:
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise InvalidInput(field, "must not be empty")
    if len(value) > limit:
        raise InvalidInput(field, f"is {len(value)} characters; the limit is {limit}")
    if "\x00" in value:
        raise InvalidInput(field, "must not contain NUL")
    return value


def _check_label(field: str, value: object, limit: int) -> str:
    """A source or scope: a required text that is also one of the index's labels (check_label)."""
    return check_label(field, _check_text(field, value, limit, required=True))


# Sensitivity by its value: an enum call costs ~0.6 us, one per version a batch makes.
_SENSITIVITY = {int(level): level for level in Sensitivity}


def _record_of(row: dict[str, Any], *, answer: bool = False) -> EvidenceRecord:
    """`to_record` of a row this process holds as a dict (times aware UTC, as a read returns
    them). `answer`: as the put that made the version current answered (active, not ended)."""
    return EvidenceRecord(
        evidence_id=row["evidence_id"],
        version=row["version"],
        kind=row["kind"],
        source=row["source"],
        scope=row["scope"],
        locator=row["locator"],
        statement=row["statement"],
        media_type=row["media_type"],
        content_sha256=row["blob_sha256"],
        observed_at=row["observed_at"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        sensitivity=_SENSITIVITY[row["sensitivity"]],
        provenance=row["provenance"],
        owner=row["owner"],
        session_id=row["session_id"],
        status="active" if answer else row["status"],
        recorded_at=row["recorded_at"],
        ended_at=None if answer else row["ended_at"],
        metadata=metadata_of(row["metadata_json"]),
    )


def _versions(conn: Connection, tenant_id: str, evidence_id: str, *, lock: bool = False) -> list[Row[Any]]:
    stmt = (
        select(t.evidence)
        .where(t.evidence.c.tenant_id == tenant_id, t.evidence.c.evidence_id == evidence_id)
        .order_by(t.evidence.c.version)
    )
    if lock:
        stmt = stmt.with_for_update()
    return list(conn.execute(stmt))


class _Prepared(NamedTuple):
    """An EvidenceInput after validation: everything the write needs, nothing left to check.
    A NamedTuple: one per item of a batch, built without a frozen dataclass's
    `object.__setattr__` per field."""

    evidence_id: str
    data: bytes
    media: str
    # The version's own fields (kind, source, ... metadata_json); `_write_batch` completes this
    # dict into the row of the version it makes (after `request()` was taken, if it was).
    fields: dict[str, Any]
    observed_at: datetime | None
    requested_id: str | None  # None when the id was generated
    # The content's sha256, computed once: the retraction check, the blob and an idempotency key
    # each need it.
    digest: str

    def request(self) -> dict[str, Any]:
        """What the caller asked for, for an idempotency key: a generated id is not part of it.
        Metadata is, when given (left out when not, so a key used before metadata existed still
        names the same request)."""
        asked = {
            **self.fields,
            "evidence_id": self.requested_id,
            "content_sha256": self.digest,
            "observed_at": self.observed_at,
        }
        if asked["metadata_json"] is None:
            del asked["metadata_json"]
        return asked


def _prepare(store: ArchiveStore, principal: Principal, item: EvidenceInput) -> _Prepared:
    # Only None asks for a generated id: an empty string is a caller bug, not a request for one.
    evidence_id = check_evidence_id(
        f"ev:{uuid.uuid4().hex}" if item.evidence_id is None else item.evidence_id
    )
    if evidence_id.startswith(DERIVED_ID_PREFIXES):
        raise InvalidInput(
            "evidence_id",
            f"{evidence_id!r}: ids starting with {', '.join(DERIVED_ID_PREFIXES)} name archived results, "
            "memory facts and summaries; choose another id",
        )
    source = _check_label("source", item.source, _TEXT_LIMITS["source"])
    scope = _check_label("scope", item.scope, _TEXT_LIMITS["scope"])
    locator = _check_text("locator", item.locator, _TEXT_LIMITS["locator"], required=False)
    statement = (
        None
        if item.statement is None
        else _check_text("statement", item.statement, STATEMENT_LIMIT, required=True)
    )
    data, media = content_bytes(item.body, item.media_type, store.policy.max_content_bytes)  # checks media
    if item.kind not in EVIDENCE_KINDS:
        raise InvalidInput("kind", f"{item.kind!r} is not one of {', '.join(EVIDENCE_KINDS)}")
    parse_provenance(item.provenance)
    level = Sensitivity.parse(item.sensitivity)
    principal.require_clearance(level, "storing evidence of this sensitivity")
    owner = check_identifier("owner", item.owner) if item.owner is not None else None
    principal.require_owner(owner, "storing evidence")
    session_id = check_identifier("session_id", item.session_id) if item.session_id is not None else None
    metadata = metadata_json(item.metadata)
    valid_from = aware("valid_from", item.valid_from)
    valid_until = aware("valid_until", item.valid_until)
    if valid_from and valid_until and valid_until <= valid_from:
        raise InvalidInput("valid_until", "must be later than valid_from")
    fields = {
        "kind": item.kind,
        "source": source,
        "scope": scope,
        "locator": locator,
        "statement": statement,
        "media_type": media,
        "valid_from": valid_from,
        "valid_until": valid_until,
        "sensitivity": int(level),
        "provenance": item.provenance,
        "owner": owner,
        "session_id": session_id,
        # Canonical JSON text: equal objects are equal here, so the same body with the same
        # metadata is the current version unchanged, and with other metadata a new version.
        "metadata_json": metadata,
    }
    return _Prepared(
        evidence_id,
        data,
        media,
        fields,
        aware("observed_at", item.observed_at),
        item.evidence_id,
        sha256_hex(data),
    )


_EVIDENCE_COLUMNS = tuple(c.key for c in t.evidence.columns)  # a new version's row gives every one
_CHUNK = 400  # evidence ids per statement, under every backend's bound-parameter limit


def _chains(conn: Connection, tenant_id: str, ids: Sequence[str]) -> dict[str, list[Row[Any]]]:
    """Every version of each chain in `ids` (an id without versions is absent), oldest first."""
    found: dict[str, list[Row[Any]]] = {}
    for start in range(0, len(ids), _CHUNK):
        for row in conn.execute(_CHAINS, {"tenant_id": tenant_id, "ids": ids[start : start + _CHUNK]}):
            found.setdefault(row.evidence_id, []).append(row)
    return found


def _chain_rows(conn: Connection, tenant_id: str, ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """`_chains` locked (on PostgreSQL; a SQLite write holds the file), as rows a write completes
    and changes (dicts of every column). On SQLite read in one step (`rows_in_one_step`): a write
    superseding many versions does not hand the interpreter's lock to another thread once a
    version read."""
    found: dict[str, list[dict[str, Any]]] = {}
    for start in range(0, len(ids), _CHUNK):
        wanted = {"tenant_id": tenant_id, "ids": ids[start : start + _CHUNK]}
        for stored in rows_in_one_step(conn, "evidence.locked_chains", lambda: _LOCKED_CHAINS, wanted):
            row = dict(zip(_EVIDENCE_COLUMNS, stored, strict=True))
            found.setdefault(row["evidence_id"], []).append(row)
    for versions in found.values():
        versions.sort(key=operator.itemgetter("version"))
    return found


# Built once: every write of evidence reads its chains (see storage/outbox.py's _claim_statement
# for what building a statement per call costs).
_CHAINS = (
    select(t.evidence)
    .where(
        t.evidence.c.tenant_id == bindparam("tenant_id"),
        t.evidence.c.evidence_id.in_(bindparam("ids", expanding=True)),
    )
    .order_by(t.evidence.c.evidence_id, t.evidence.c.version)
)
_LOCKED_CHAINS = _CHAINS.with_for_update()


# A committed write's versions by `version_ref`, each with its original (see `EvidenceBatch`).
MadeVersions = dict[str, tuple[EvidenceRecord, bytes]]


@dataclass(frozen=True)
class EvidenceBatch:
    """A committed evidence write: what each item answers, and every version the write made.

    `made` maps each version's `version_ref` (`<evidence_id>@<version>`, the ref its outbox row
    names) to the version as it stood when the write committed (one the same batch superseded
    again is superseded) and its original, whose sha256 the write computed itself: what the
    indexer of this process would otherwise read straight back from the archive. Keyed by the
    ref, the indexer finds a row's version without parsing the ref into a key (a tuple a row,
    which the garbage collector traces while a batch is indexed). It is handed out only once the
    transaction committed; a replayed idempotent call made nothing. The outbox rows of the
    write still say what the index must do.

    `last_outbox_id` is the highest outbox row id the write's transaction saw after its own rows
    (`outbox.last_id`): only a row at or below it can be this write's. A row above it that names
    one of these refs is a later write's (the record deleted, then stored again under the same
    id and version), and its version must be read back, not taken from `made`.
    """

    tenant_id: str
    records: list[EvidenceRecord]
    made: MadeVersions
    last_outbox_id: int


def _write_batch(
    conn: Connection, principal: Principal, prepared: Sequence[_Prepared], *, reactivate: bool = False
) -> EvidenceBatch:
    """Store `prepared` in order in one transaction, as one `put` after another would; returns
    what each item answers and the versions made (`EvidenceBatch`).

    The version chains are read once (locked), then worked out in memory item by item: an item
    supersedes the chain's active version, or is that version unchanged, and a later item of the
    batch sees what the earlier ones did. Then a few multi-row statements write it all: blobs,
    the superseded versions, the new versions (in their final state), and the outbox rows in the
    order the items would have written them, but one cache purge at the end for them all. Each
    record answers as the put that made (or found) it current, even if a later item of the batch
    superseded it. Nothing is read back: the rows are held as the database returns them (every
    time in UTC: `_prepare` converts them, as schema.UTCDateTime would), so the answers, the
    outbox payloads and `made` are what a read after the commit would give.
    """
    tenant = principal.tenant_id
    ids = sorted({p.evidence_id for p in prepared})
    lock_chains(conn, "evidence", tenant, ids)
    chains = _chain_rows(conn, tenant, ids)
    if not reactivate and any(r["status"] == "retracted" for rows in chains.values() for r in rows):
        # Checked on the locked chains, before anything is written: a retraction made since a
        # caller's own check (retracted_among) is honoured too. Only a chain holding a retracted
        # version can refuse an item (a batch of new records has none to look through).
        _refuse_retracted(
            [(p.evidence_id, p.digest) for p in prepared],
            {e: [(r["version"], r["status"], r["blob_sha256"]) for r in rows] for e, rows in chains.items()},
        )
    # The pairs as a generator: read once each, so no list of pairs is held for the batch.
    digests = put_blobs(conn, tenant, ((p.data, p.media) for p in prepared), [p.digest for p in prepared])
    # The row of the version each item answers with, and that version's ref when this batch made
    # it (None: a version stored before, answered unchanged).
    answers: list[dict[str, Any]] = []
    answer_refs: list[str | None] = []
    superseded: list[dict[str, Any]] = []  # versions stored before this batch that it supersedes
    # The versions made, their refs and originals, side by side, not a tuple per version.
    inserted: list[dict[str, Any]] = []
    refs: list[str] = []
    originals: list[bytes] = []
    # The newest version this batch made of each record: always its active one (an item that
    # supersedes it makes the next). A record the batch made no version of is looked up in
    # `chains`, so a new record costs no chain of its own.
    newest: dict[str, dict[str, Any]] = {}
    # The outbox rows in the order sequential puts write them. An upsert's payload is empty: the
    # indexer reads the version itself (or takes it from `EvidenceBatch.made`), and a copy of its
    # fields in JSON cost ~6 us a row for nothing (the drain emptied it unread).
    rows_out: list[OutboxRow] = []
    for p, digest in zip(prepared, digests, strict=True):
        # Stamped item by item, as sequential puts would be: a version superseded within the
        # batch was current from its own stamp until the next item's.
        now = utcnow()
        current = newest.get(p.evidence_id)
        current_ref = None  # set when `current` is a version this batch made
        if current is not None:
            current_ref = version_ref(p.evidence_id, current["version"])
            last_version = current["version"]
        else:
            chain = chains.get(p.evidence_id, ())
            current = next((v for v in chain if v["status"] == "active"), None)
            last_version = chain[-1]["version"] if chain else 0
        if current is not None:
            principal.require_owner(current["owner"], "superseding evidence")
            if current["blob_sha256"] == digest and all(current[k] == v for k, v in p.fields.items()):
                answers.append(current)
                answer_refs.append(current_ref)
                continue
            current["status"], current["ended_at"] = "superseded", now
            if current_ref is None:
                superseded.append(current)
            # Superseded versions stay in the index (status flipped) so `as_of` searches find them.
            rows_out.append(
                (
                    tenant,
                    "index_status",
                    "evidence",
                    current_ref or version_ref(p.evidence_id, current["version"]),
                    {
                        "evidence_id": p.evidence_id,
                        "version": current["version"],
                        "status": "superseded",
                        "content_sha256": current["blob_sha256"],
                    },
                )
            )
        ref = version_ref(p.evidence_id, last_version + 1)
        # The item's fields become its version's row, completed in place: one dict a version,
        # not a copy of them (an item is written once, and nothing reads its fields after this).
        row = p.fields
        row.update(
            tenant_id=tenant,
            evidence_id=p.evidence_id,
            version=last_version + 1,
            observed_at=p.observed_at or now,
            status="active",
            recorded_at=now,
            recorded_by=principal.subject,
            ended_at=None,
            blob_sha256=digest,
        )
        newest[p.evidence_id] = row
        inserted.append(row)
        refs.append(ref)
        originals.append(p.data)
        answers.append(row)
        answer_refs.append(ref)
        rows_out.append((tenant, "index_upsert", "evidence", ref, None))
    if inserted:
        # One purge of the tenant's cached searches, after every index row of the write: it only
        # has to follow them (a purge per version, as sequential puts write, would double the
        # rows a batch writes, claims and marks, for nothing the cache needs).
        rows_out.append((tenant, "cache_purge", "tenant", tenant, {"reason": "evidence changed"}))
    if superseded:
        _supersede(conn, tenant, superseded)
    insert = prepared_insert("evidence", t.evidence.insert, _EVIDENCE_COLUMNS, conn.dialect)
    insert.execute(conn, inserted)
    # Each version made, in its final state (the rows were updated in place as the batch went).
    versions = {
        ref: (_record_of(row), data) for row, ref, data in zip(inserted, refs, originals, strict=True)
    }
    enqueue_many(conn, rows_out)
    last_outbox_id = last_id(conn) if inserted else 0  # nothing made: nothing to hand over
    # A version still active answers as it is held in `versions`; others as they were made.
    records = [
        versions[ref][0] if ref is not None and row["status"] == "active" else _record_of(row, answer=True)
        for row, ref in zip(answers, answer_refs, strict=True)
    ]
    return EvidenceBatch(tenant, records, versions, last_outbox_id)


def _supersede(conn: Connection, tenant: str, versions: Sequence[dict[str, Any]]) -> None:
    """Mark `versions` (rows of the tenant's evidence stored before this write) superseded, each
    ended at its own `ended_at`. On SQLite a few statements of many rows each (powers of two),
    not an executemany: the driver lets the interpreter's lock go at every row's step, and with
    another thread running Python (the indexer's trail, a request beside it) each row waited out
    its switch interval (archive/storage/statements.py). PostgreSQL keeps its executemany."""
    if conn.dialect.name != "sqlite":
        conn.execute(
            update(t.evidence)
            .where(
                t.evidence.c.tenant_id == tenant,
                t.evidence.c.evidence_id == bindparam("b_evidence_id"),
                t.evidence.c.version == bindparam("b_version"),
            )
            .values(status="superseded", ended_at=bindparam("b_ended_at")),
            [
                {"b_evidence_id": v["evidence_id"], "b_version": v["version"], "b_ended_at": v["ended_at"]}
                for v in versions
            ],
        )
        return
    # Three parameters a version, and the tenant and the status besides.
    for part in multi_row_parts(conn, versions, 3, besides=2):
        k = len(part)
        params: dict[str, Any] = {"tenant": tenant, "status": "superseded"}
        for (id_name, version_name, end_name), row in zip(_ended_names(k), part, strict=True):
            params[id_name], params[version_name] = row["evidence_id"], row["version"]
            params[end_name] = row["ended_at"]
        build = functools.partial(_supersede_statement, k)
        prepared_update(f"evidence.supersede/{k}", build, conn.dialect).execute(conn, params)


@functools.cache
def _ended_names(k: int) -> tuple[tuple[str, str, str], ...]:
    """The parameter names of `_supersede_statement(k)`'s rows: (`e0`, `v0`, `t0`), ..."""
    return tuple((f"e{i}", f"v{i}", f"t{i}") for i in range(k))


def _supersede_statement(k: int) -> Update:
    """The UPDATE of k versions, each by its whole primary key with its own end: the rows as a
    VALUES list joined to the evidence (SQLite looks each up by the key: `UPDATE ... FROM`)."""
    ended = (
        values(
            column("evidence_id", t.evidence.c.evidence_id.type),
            column("version", t.evidence.c.version.type),
            column("ended_at", t.evidence.c.ended_at.type),
            name="ended",
        )
        .data(
            [
                (
                    bindparam(id_name, type_=t.evidence.c.evidence_id.type),
                    bindparam(version_name, type_=t.evidence.c.version.type),
                    bindparam(end_name, type_=t.evidence.c.ended_at.type),
                )
                for id_name, version_name, end_name in _ended_names(k)
            ]
        )
        .cte("ended")
    )
    e = t.evidence.c
    return (
        update(t.evidence)
        .add_cte(ended)
        .where(
            e.tenant_id == bindparam("tenant"),
            e.evidence_id == ended.c.evidence_id,
            e.version == ended.c.version,
        )
        .values(status=bindparam("status"), ended_at=ended.c.ended_at)
    )


def _retracted_version(versions: Sequence[tuple[int, str, str]], digest: str) -> int | None:
    """The newest retracted version among (version, status, blob sha256) with this content;
    None too when the active version has it (reactivated before: storing it again changes nothing)."""
    if any(status == "active" and sha == digest for _, status, sha in versions):
        return None
    found = [v for v, status, sha in versions if status == "retracted" and sha == digest]
    return max(found) if found else None


def _retraction_statuses(
    items: Sequence[tuple[str, str]], chains: dict[str, list[tuple[int, str, str]]]
) -> list[TargetStatus]:
    """For each (evidence id, content sha256): `ok`, or `retracted` when a retracted version of
    that record holds exactly this content."""
    statuses = []
    for evidence_id, digest in items:
        version = _retracted_version(chains.get(evidence_id, []), digest)
        statuses.append(
            TargetStatus(evidence_id, "ok", "")
            if version is None
            else TargetStatus(
                evidence_id,
                "retracted",
                f"this content is version {version} of {evidence_id!r}, which was retracted",
            )
        )
    return statuses


def _refuse_retracted(
    items: Sequence[tuple[str, str]], chains: dict[str, list[tuple[int, str, str]]]
) -> None:
    statuses = _retraction_statuses(items, chains)
    if any(not s.ok for s in statuses):
        raise RetractedContent(
            statuses,
            "a retraction stands until the content changes: store other content for those records, "
            "leave them out (CLI: ingest --partial), or re-activate the retracted text deliberately "
            "(CLI: ingest --reactivate; Python: reactivate=True in Mnemo.ingest)",
        )


def retracted_among(
    store: ArchiveStore, principal: Principal, items: Sequence[EvidenceInput]
) -> list[TargetStatus]:
    """One TargetStatus per item (validated as a put would), in item order: `retracted` where the
    item's content is that of a retracted version of its record (what a put would refuse with
    RetractedContent), else `ok`. Reads only; raises InvalidBatch for invalid items."""
    principal.require(Role.AGENT, "storing evidence")
    prepared = _prepare_all(store, principal, items)
    ids = sorted({p.evidence_id for p in prepared})
    with store.read() as conn:
        chains = {
            eid: [(r.version, r.status, r.blob_sha256) for r in rows]
            for eid, rows in _chains(conn, principal.tenant_id, ids).items()
        }
    return _retraction_statuses([(p.evidence_id, p.digest) for p in prepared], chains)


def put_evidence(
    store: ArchiveStore,
    principal: Principal,
    item: EvidenceInput,
    *,
    idempotency_key: str | None = None,
    reactivate: bool = False,
) -> EvidenceRecord:
    """Store a new version of an evidence record (version 1 for a new id).

    The previous active version, if any, becomes superseded and stays readable. Storing
    content and fields identical to the current version changes nothing and returns it.
    Content equal to a retracted version of the record is refused (RetractedContent) unless
    `reactivate`: then it is stored as a new active version.
    With an idempotency key, repeating the same call returns the first call's record (NotFound
    if it was deleted since) and stores nothing; reusing the key for another request raises
    IdempotencyMismatch. An item without an evidence id is the same request on every retry.
    """
    principal.require(Role.AGENT, "storing evidence")
    prepared = _prepare(store, principal, item)
    request = keyed(principal, idempotency_key, "put_evidence", prepared.request())
    return _put(store, principal, [prepared], request, reactivate=reactivate).records[0]


def put_evidence_batch(
    store: ArchiveStore,
    principal: Principal,
    items: Sequence[EvidenceInput],
    *,
    idempotency_key: str | None = None,
    reactivate: bool = False,
) -> EvidenceBatch:
    """Store many records all or nothing: every item is validated first (InvalidBatch lists each
    bad item with its index and problem), then one transaction writes them in order, so an id
    that appears twice gets two versions. An idempotency key works as for `put_evidence`, over
    the whole batch in its order. Items whose content is that of a retracted version of their
    record reject the batch (RetractedContent marks each) unless `reactivate`, as for
    `put_evidence`. Returns each item's record and the versions made (`EvidenceBatch`)."""
    principal.require(Role.AGENT, "storing evidence")
    if len(items) > store.policy.max_batch_size:
        raise InvalidInput("items", f"{len(items)} items; at most {store.policy.max_batch_size} per batch")
    prepared = _prepare_all(store, principal, items)
    # The request is hashed only under a key (its items' digests and fields cost per record).
    request = (
        None
        if idempotency_key is None
        else keyed(principal, idempotency_key, "put_evidence_batch", [p.request() for p in prepared])
    )
    return _put(store, principal, prepared, request, reactivate=reactivate)


def _prepare_all(
    store: ArchiveStore, principal: Principal, items: Sequence[EvidenceInput]
) -> list[_Prepared]:
    """Every item validated; InvalidBatch lists each bad one with its index and problem."""
    prepared: list[_Prepared] = []
    problems: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        try:
            prepared.append(_prepare(store, principal, item))
        except InvalidInput as e:
            problems.append(
                {"index": i, "evidence_id": item.evidence_id, "field": e.field, "problem": e.problem}
            )
    if problems:
        raise InvalidBatch(problems)
    return prepared


def _put(
    store: ArchiveStore,
    principal: Principal,
    prepared: Sequence[_Prepared],
    request: KeyedRequest | None,
    *,
    reactivate: bool = False,
) -> EvidenceBatch:
    with store.write() as conn:
        previous = previous_reply(conn, request)
        if previous is not None:
            replayed = _stored(
                conn, principal.tenant_id, [(eid, version) for eid, version in previous["records"]]
            )
            return EvidenceBatch(principal.tenant_id, replayed, {}, 0)
        # `prepared` is written once: `_write_batch` completes each item's fields into its row, so
        # a retry must validate the items again (nothing retries a write today).
        batch = _write_batch(conn, principal, prepared, reactivate=reactivate)
        if batch.made:
            _audit_put(conn, principal, list(batch.made))
        if request is not None:  # the reply is stored only under a key (a list per record)
            save_reply(conn, request, {"records": [[r.evidence_id, r.version] for r in batch.records]})
    # Only now, past the commit, is what the batch made the archive's.
    return batch


# The versions a put event lists by name: a batch of up to BATCH_ITEMS records of 256-character
# ids would otherwise write a quarter-megabyte event (hashed on every append and every verify).
VERSIONS_LISTED = 100


def put_event_detail(refs: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The target and detail of the audit event of a write that made the versions `refs` (each
    `ID@V`, a `version_ref`, in the order it made them): the target names the version when there
    is one (`evidence:ID@V`, as a retraction's does), else `evidence:batch of N`. The detail
    holds how many versions it made, the first VERSIONS_LISTED of them, and the sha256 of all of
    them, one a line (an id holds no line break), so a list held elsewhere (the write's answer)
    is checked against the chain whatever its length."""
    target = f"evidence:{refs[0]}" if len(refs) == 1 else f"evidence:batch of {len(refs)}"
    return target, {
        "count": len(refs),
        "versions": refs[:VERSIONS_LISTED],
        "versions_sha256": sha256_hex("\n".join(refs).encode("utf-8")),
    }


def _audit_put(conn: Connection, principal: Principal, made: Sequence[str]) -> None:
    """One `put_evidence` event for a write that made versions, in its transaction (an unchanged
    record makes none, a replay makes nothing: neither is audited), as an archive batch's event
    names its results. The action is the operation's name, as archive, recover and retract are."""
    target, detail = put_event_detail(made)
    append_event(conn, principal.tenant_id, principal.subject, "put_evidence", target, detail)


def _stored(conn: Connection, tenant_id: str, refs: Sequence[tuple[str, int]]) -> list[EvidenceRecord]:
    """The versions as a put first returned them (for a replay); NotFound for the first one gone."""
    stored = {
        (r.evidence_id, r.version): r
        for rows in _chains(conn, tenant_id, sorted({e for e, _ in refs})).values()
        for r in rows
    }
    found: list[EvidenceRecord] = []
    for evidence_id, version in refs:
        row = stored.get((evidence_id, version))
        if row is None:
            raise NotFound("evidence", f"{evidence_id}@{version}")
        # A put answers with the version it made current; superseding it later is a later state.
        found.append(replace(to_record(row), status="active", ended_at=None))
    return found


def retract(
    store: ArchiveStore,
    principal: Principal,
    evidence_id: str,
    reason: str,
    *,
    idempotency_key: str | None = None,
) -> EvidenceRecord:
    """Withdraw the current version: it stays in history but no longer answers queries.

    With an idempotency key, repeating the same call returns the version the first call
    retracted, as it is now, and changes nothing (NotFound if it was deleted since); reusing
    the key for another request raises IdempotencyMismatch.
    """
    principal.require(Role.AGENT, "retracting evidence")
    check_evidence_id(evidence_id)
    _check_text("reason", reason, limits.REASON_CHARS, required=True)
    tenant = principal.tenant_id
    request = keyed(principal, idempotency_key, "retract", {"evidence_id": evidence_id, "reason": reason})
    with store.write() as conn:
        previous = previous_reply(conn, request)
        lock_chain(conn, "evidence", tenant, evidence_id)
        now = utcnow()
        versions = _versions(conn, tenant, evidence_id, lock=True)
        if not versions:
            raise NotFound("evidence", evidence_id)
        if previous is not None:
            again = next((v for v in versions if v.version == previous["version"]), None)
            if again is None:
                raise NotFound("evidence", f"{evidence_id}@{previous['version']}")
            principal.require_clearance(Sensitivity(again.sensitivity), f"retracting {evidence_id}")
            return to_record(again)
        current = next((v for v in versions if v.status == "active"), None)
        if current is None:
            raise StateConflict(
                f"evidence {evidence_id!r} has no active version to retract", evidence_id=evidence_id
            )
        principal.require_clearance(Sensitivity(current.sensitivity), f"retracting {evidence_id}")
        principal.require_owner(current.owner, "retracting evidence")
        conn.execute(
            update(t.evidence)
            .where(
                t.evidence.c.tenant_id == tenant,
                t.evidence.c.evidence_id == evidence_id,
                t.evidence.c.version == current.version,
            )
            .values(status="retracted", ended_at=now)
        )
        enqueue(
            conn,
            tenant,
            "index_delete",
            "evidence",
            version_ref(evidence_id, current.version),
            {"evidence_id": evidence_id, "version": current.version, "content_sha256": current.blob_sha256},
        )
        enqueue(conn, tenant, "cache_purge", "tenant", tenant, {"reason": "evidence retracted"})
        append_event(
            conn,
            tenant,
            principal.subject,
            "retract",
            f"evidence:{evidence_id}@{current.version}",
            {"reason": reason},
        )
        save_reply(conn, request, {"evidence_id": evidence_id, "version": current.version})
        return next(
            to_record(v) for v in _versions(conn, tenant, evidence_id) if v.version == current.version
        )


def _pick(versions: list[Row[Any]], version: int | None, as_of: datetime | None) -> Row[Any] | None:
    if version is not None:
        return next((v for v in versions if v.version == version), None)
    if as_of is None:
        return next((v for v in versions if v.status == "active"), None)
    return next((v for v in reversed(versions) if evidence_answers_at(v, as_of)), None)


def get_evidence(
    store: ArchiveStore,
    principal: Principal,
    evidence_id: str,
    *,
    version: int | None = None,
    as_of: datetime | None = None,
    with_content: bool = False,
) -> tuple[EvidenceRecord, bytes | None]:
    """Read one version: a given `version`, the one in force `as_of`, or the active one.

    With `with_content` the hash-verified original bytes come too. NotFound when no such
    version exists for this tenant (a retracted record has no active version).
    """
    principal.require(Role.READER, "reading evidence")
    check_evidence_id(evidence_id)
    if version is not None and (not isinstance(version, int) or version < 1):
        raise InvalidInput("version", "must be a positive integer")
    when = aware("as_of", as_of)
    with store.read() as conn:
        row = _pick(_versions(conn, principal.tenant_id, evidence_id), version, when)
        if row is None:
            ref = evidence_id if version is None else f"{evidence_id}@{version}"
            raise NotFound("evidence", ref if when is None else f"{ref} as of {when.isoformat()}")
        rec = to_record(row)
        principal.require_clearance(rec.sensitivity, f"reading {evidence_id}")
        principal.require_owner(rec.owner, "reading evidence")
        content = read_blob(conn, principal.tenant_id, rec.content_sha256) if with_content else None
        return rec, content


def evidence_history(store: ArchiveStore, principal: Principal, evidence_id: str) -> list[EvidenceRecord]:
    """Every version, oldest first (metadata only)."""
    principal.require(Role.READER, "reading evidence")
    check_evidence_id(evidence_id)
    with store.read() as conn:
        records = [to_record(r) for r in _versions(conn, principal.tenant_id, evidence_id)]
    if not records:
        raise NotFound("evidence", evidence_id)
    for rec in records:
        principal.require_clearance(rec.sensitivity, f"reading {evidence_id}")
        principal.require_owner(rec.owner, "reading evidence")
    return records


@dataclass(frozen=True)
class EvidenceInfo:
    """One evidence record as a listing shows it: its newest version, and how many it has."""

    evidence_id: str
    kind: str  # of the newest version, as are source and status
    source: str
    latest_version: int
    status: EvidenceStatus  # active, or retracted (a newest version is never superseded)
    versions: int
    recorded_at: datetime  # when the newest version was recorded
    ended_at: datetime | None  # when it was retracted, if it was
    # Bytes of the newest version's original: what a file listing shows (the memory tool's view
    # of a folder) without reading each original.
    size: int


def list_evidence(
    store: ArchiveStore,
    principal: Principal,
    *,
    prefix: str | None = None,
    limit: int = 1000,
    offset: int = 0,
) -> list[EvidenceInfo]:
    """The tenant's evidence records, each once, by id (in the database's collation), at most
    `limit` (1 to 10,000) after the first `offset`; with `prefix`, only the ids that start with
    it (literally and case-sensitively: `%` and `_` are characters). Only records
    `evidence_history` would show this principal are listed (its clearance covers every version,
    and it acts for each one's owner), so every id listed opens, and a record it may not read is
    not even named.
    One statement: the page of ids is chosen in SQL, then joined to each one's newest version."""
    principal.require(Role.READER, "listing evidence")
    check_list_limit(limit)
    check_offset(offset)
    check_prefix(prefix, limits.EVIDENCE_ID_CHARS)
    e = t.evidence
    tenant = principal.tenant_id
    chains = (
        select(e.c.evidence_id, func.max(e.c.version).label("latest"), func.count().label("versions"))
        .where(e.c.tenant_id == tenant, *([starts_with(e.c.evidence_id, prefix)] if prefix else []))
        .group_by(e.c.evidence_id)
        .having(func.max(e.c.sensitivity) <= int(principal.clearance), func.min(e.c.sensitivity) >= 0)
    )
    if not principal.has(Role.AGENT):
        anothers = case((and_(e.c.owner.is_not(None), e.c.owner != principal.subject), 1), else_=0)
        chains = chains.having(func.sum(anothers) == 0)
    page = chains.order_by(e.c.evidence_id).limit(limit).offset(offset).subquery()
    stmt = (
        select(
            e.c.evidence_id,
            e.c.kind,
            e.c.source,
            e.c.version,
            e.c.status,
            e.c.recorded_at,
            e.c.ended_at,
            page.c.versions,
            t.blobs.c.size,
        )
        .join(page, and_(e.c.evidence_id == page.c.evidence_id, e.c.version == page.c.latest))
        .join(t.blobs, and_(t.blobs.c.tenant_id == e.c.tenant_id, t.blobs.c.sha256 == e.c.blob_sha256))
        .where(e.c.tenant_id == tenant)
        .order_by(e.c.evidence_id)
    )
    with store.read() as conn:
        return [
            EvidenceInfo(
                r.evidence_id,
                r.kind,
                r.source,
                r.version,
                r.status,
                r.versions,
                r.recorded_at,
                r.ended_at,
                int(r.size),
            )
            for r in conn.execute(stmt)
        ]
