"""What the framework vector stores share: documents kept as evidence records, through a handle.

A vector store's document is one evidence record: its id the record's id, its text the
record's body, its metadata the version's metadata (`EvidenceInput.metadata`, a JSON object).
Adding a document again under its id makes a new version when its text or metadata changed and
nothing when neither did, so adding is idempotent by id and a changed document supersedes the
old one. Each operation is written once, as a *plan*: a generator that yields the handle calls
it needs (mnemo_sea.integrations.plans: `HandleCall`) and is sent back their answers (or has
their errors thrown into it), so one description runs on a blocking handle (`run`) and on an
async one (`arun`), as every adapter's operations do.

    add       one `ingest` of the whole batch: every item checked first, then all or nothing
    read      `get_evidence(..., with_content=True)` per id; a missing id is skipped
    search    one hybrid `search` with the archive's pre-filters (kinds, scopes, sources), the
              rest of a filter applied to each hit's metadata over a widened search, then each
              kept hit's whole text read back (the hit's snippet is a span of it)
    delete    `delete_evidence` per id (admin only: a Forbidden stops at the first id, before
              anything is deleted); a missing id is skipped; the receipts are returned

Filters are a small framework-free predicate language (`Condition`, `AllOf`, `AnyOf`) both
stores translate into. The keys `source`, `scope` and `kind` name the record's own fields (the
archive filters on them before ranking); any other key names a metadata key.

Nothing here imports a framework, the facade or the client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from mnemo_sea.archive import EvidenceInput, InvalidBatch, InvalidInput, NotFound, metadata_json
from mnemo_sea.integrations.plans import HandleCall, Plan, every_item

if TYPE_CHECKING:
    from mnemo_sea.archive import DeletionReceipt, EvidenceInfo, EvidenceRecord
    from mnemo_sea.system.mnemo import SearchHit, SearchResult

T = TypeVar("T")

# The search's own ceiling on hits per call (system/operations.py SearchOp.limit).
SEARCH_LIMIT = 100
# How many hits a search with a metadata post-filter asks for, per hit wanted: the archive
# cannot filter on metadata, so it ranks more than wanted and the filter keeps the first k.
WIDENING = 5
FIELDS = ("source", "scope", "kind")  # the record's own fields, pre-filtered by the archive


# ---- documents ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredDocument:
    """A document as the archive keeps it: the record's id, version, fields, whole text and
    metadata; `score` is the hit's relevance when found by a search (None when read by id)."""

    evidence_id: str
    version: int
    text: str
    metadata: dict[str, Any]
    source: str
    scope: str
    kind: str
    score: float | None = None


@dataclass(frozen=True)
class NewDocument:
    """What a framework gives to store: an id, a text and a metadata object."""

    evidence_id: str
    text: str
    metadata: Mapping[str, Any] | None


def evidence_inputs(documents: Sequence[NewDocument], *, source: str, scope: str) -> list[EvidenceInput]:
    """The evidence a batch of documents becomes. The source is the metadata's "source" when it
    is a string (the loaders of both frameworks put the file or URL there), else `source`.
    InvalidBatch naming every bad document (empty text, metadata the archive would refuse, an id
    given twice) before anything is stored. The metadata is checked here with the archive's own
    rule (`metadata_json`), not only by the archive: a REST client would send a value JSON
    cannot hold (a date) as a string, and the archive would keep that string."""
    problems: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    items = []
    for index, doc in enumerate(documents):
        if not isinstance(doc.text, str) or not doc.text.strip():
            problems.append({"index": index, "field": "text", "problem": "a document needs some text"})
        metadata = dict(doc.metadata) if isinstance(doc.metadata, Mapping) else doc.metadata
        try:
            metadata_json(metadata)
        except InvalidInput as e:
            problems.append({"index": index, "field": "metadata", "problem": e.problem})
        if doc.evidence_id in seen:
            problems.append(
                {
                    "index": index,
                    "field": "id",
                    "problem": f"{doc.evidence_id!r} is also the id of item {seen[doc.evidence_id]}",
                }
            )
        seen.setdefault(doc.evidence_id, index)
        named = metadata.get("source") if isinstance(metadata, dict) else None
        items.append(
            EvidenceInput(
                body=doc.text,
                source=named if isinstance(named, str) and named else source,
                evidence_id=doc.evidence_id,
                scope=scope,
                metadata=metadata,
            )
        )
    if problems:
        raise InvalidBatch(problems)
    return items


def add(items: list[EvidenceInput]) -> Plan[list[str]]:
    """Store `items` in one ingest (all or nothing); their ids."""
    yield HandleCall("ingest", (items,))
    return [str(item.evidence_id) for item in items]


def _document(record: EvidenceRecord, content: bytes | None, score: float | None = None) -> StoredDocument:
    return StoredDocument(
        evidence_id=record.evidence_id,
        version=record.version,
        text=(content or b"").decode("utf-8"),
        metadata=dict(record.metadata or {}),
        source=record.source,
        scope=record.scope,
        kind=record.kind,
        score=score,
    )


def read(evidence_ids: Sequence[str]) -> Plan[list[StoredDocument]]:
    """The current version of each record, in the order asked; a missing one (never stored,
    deleted, retracted, or another tenant's: the archive does not tell them apart) is skipped."""
    out = []
    for evidence_id in evidence_ids:
        try:
            record, content = yield HandleCall("get_evidence", (evidence_id,), {"with_content": True})
        except NotFound:
            continue
        out.append(_document(record, content))
    return out


def delete(evidence_ids: Sequence[str], receipts: list[DeletionReceipt]) -> Plan[int]:
    """Delete each record (every version and what was derived from it), appending each
    receipt to `receipts` as it comes (so a failure half-way leaves the receipts of what was
    deleted); a missing id is skipped. How many were deleted."""
    deleted = 0
    for evidence_id in dict.fromkeys(evidence_ids):  # each once, in order
        try:
            receipt = yield HandleCall("delete_evidence", (evidence_id,))
        except NotFound:
            continue
        receipts.append(receipt)
        deleted += 1
    return deleted


def ids_starting_with(prefix: str) -> Plan[list[str]]:
    """The ids of every record whose id starts with `prefix`, page by page."""
    infos: list[EvidenceInfo] = yield from every_item("list_evidence", prefix=prefix)
    return [info.evidence_id for info in infos]


# ---- filters --------------------------------------------------------------------------------------

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda have, want: bool(have == want),
    "!=": lambda have, want: bool(have != want),
    ">": lambda have, want: bool(have > want),
    ">=": lambda have, want: bool(have >= want),
    "<": lambda have, want: bool(have < want),
    "<=": lambda have, want: bool(have <= want),
    "in": lambda have, want: have in want,
    "nin": lambda have, want: have not in want,
}


@dataclass(frozen=True)
class Condition:
    """`key op value`: op one of OPERATORS; `in`/`nin` take a list. A document without the key
    matches `!=` and `nin` only (as LlamaIndex's SimpleVectorStore decides); values that do not
    compare (a string against a number) do not match."""

    key: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        if self.op not in OPERATORS:
            raise ValueError(f"unknown filter operator {self.op!r}; one of {', '.join(OPERATORS)}")
        if self.op in ("in", "nin") and not isinstance(self.value, list | tuple | set | frozenset):
            raise ValueError(f"filter {self.key!r} {self.op} needs a list of values, got {self.value!r}")


@dataclass(frozen=True)
class AllOf:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class NoneOf:
    parts: tuple[Predicate, ...]


Predicate = Condition | AllOf | AnyOf | NoneOf


def matches(predicate: Predicate, fields: Mapping[str, Any]) -> bool:
    if isinstance(predicate, AllOf):
        return all(matches(p, fields) for p in predicate.parts)
    if isinstance(predicate, AnyOf):
        return any(matches(p, fields) for p in predicate.parts)
    if isinstance(predicate, NoneOf):
        return not any(matches(p, fields) for p in predicate.parts)
    have = fields.get(predicate.key)
    if have is None:
        return predicate.op in ("!=", "nin")
    try:
        return OPERATORS[predicate.op](have, predicate.value)
    except TypeError:
        return False


@dataclass(frozen=True)
class SearchPlan:
    """A filter split into what the archive filters before ranking (`kinds`, `scopes`,
    `sources`: None is no filter) and what is left to check on each hit (`rest`)."""

    kinds: list[str] | None = None
    scopes: list[str] | None = None
    sources: list[str] | None = None
    rest: Predicate | None = None


def split(predicate: Predicate | None) -> SearchPlan:
    """The pre-filters in `predicate`: a condition `==` or `in` on source, scope or kind at its
    top level (the whole predicate, or a part of a top-level AllOf) narrows the search itself;
    every other condition is left to check on the hits."""
    if predicate is None:
        return SearchPlan()
    parts = predicate.parts if isinstance(predicate, AllOf) else (predicate,)
    names: dict[str, list[str]] = {}
    rest: list[Predicate] = []
    for part in parts:
        values = _field_values(part)
        if values is None or part.key in names:  # type: ignore[union-attr]
            rest.append(part)
            continue
        names[part.key] = values  # type: ignore[union-attr]
    left: Predicate | None = None if not rest else rest[0] if len(rest) == 1 else AllOf(tuple(rest))
    return SearchPlan(names.get("kind"), names.get("scope"), names.get("source"), left)


def _field_values(part: Predicate) -> list[str] | None:
    if not isinstance(part, Condition) or part.key not in FIELDS:
        return None
    values = [part.value] if part.op == "==" else list(part.value) if part.op == "in" else None
    if values is None or not all(isinstance(v, str) for v in values):
        return None
    return values


def hit_fields(hit: SearchHit) -> dict[str, Any]:
    """What a filter sees of a hit: its metadata, with the record's source, scope and kind."""
    metadata = hit.metadata or {}
    return {**metadata, "source": hit.source, "scope": hit.scope, "kind": hit.kind}


def search(
    query: str,
    k: int,
    plan: SearchPlan,
    *,
    kinds: Sequence[str] | None,
    mode: str = "hybrid",
    min_score: float | None = None,
    keep: Callable[[SearchHit], bool] | None = None,
) -> Plan[list[StoredDocument]]:
    """The `k` best documents for `query`, each with its whole text and its relevance.

    The archive's pre-filters narrow the search (`kinds` is the store's default when the filter
    names none); what is left of the filter (and `keep`, a store's own test) is checked on each
    hit's metadata, over a search widened to WIDENING times k hits (at most SEARCH_LIMIT), so
    fewer than k may come back when matches rank beyond it. A hit whose record went away
    between the search and the read is skipped.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    filtered = plan.rest is not None or keep is not None
    limit = min(SEARCH_LIMIT, k * WIDENING if filtered else k)
    result: SearchResult = yield HandleCall(
        "search",
        (query,),
        {
            "limit": limit,
            "mode": mode,
            "kinds": plan.kinds if plan.kinds is not None else (None if kinds is None else list(kinds)),
            "scopes": plan.scopes,
            "sources": plan.sources,
            "min_score": min_score,
        },
    )
    hits = [
        hit
        for hit in result.raise_for_status().hits
        if (plan.rest is None or matches(plan.rest, hit_fields(hit))) and (keep is None or keep(hit))
    ][:k]
    out = []
    for hit in hits:
        try:
            record, content = yield HandleCall(
                "get_evidence", (hit.evidence_id,), {"version": hit.version, "with_content": True}
            )
        except NotFound:
            continue
        score = hit.relevance if hit.relevance is not None else hit.score
        out.append(_document(record, content, score))
    return out


__all__ = [
    "AllOf",
    "AnyOf",
    "Condition",
    "NewDocument",
    "NoneOf",
    "Plan",
    "Predicate",
    "SearchPlan",
    "StoredDocument",
    "add",
    "delete",
    "evidence_inputs",
    "ids_starting_with",
    "matches",
    "read",
    "search",
    "split",
]
