"""Every operation of the REST API: the requests it makes, and how its answers become the
library's own types. One description, followed by both clients (MnemoClient, AsyncMnemoClient).

Each operation is a generator (a plan): it yields each Request it needs answered, receives the
Reply, and returns the operation's result, so a list that pages is one plan of several
requests, and the clients only send and wait (sync or async). Names and keyword parameters are
the facade's (`Mnemo`, or `Archive` for the reads `Mnemo.archive` serves), without the
principal: the API key says who calls. tests/system/test_operation_vocabulary.py compares
them with the operation records, as it does every surface.

Results are the library's types, rebuilt from the JSON (SearchResult, EvidenceRecord, ToolResult,
LiveView, Recovered, AssembledContext, DeletionReceipt, ...), so code runs the same on a `Mnemo`
in process and on a server; `Health` is the one answer the facade has no type for. Each answer is
read through mnemo_sea.client.answers, which checks what the client can check on its own (the
shape, originals against their hashes, snippets against their spans, statuses against the HTTP
code, the record against the one asked for) and raises a BadAnswer for an answer that fails.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic_core import PydanticSerializationError

from mnemo_sea.archive import (
    DEFAULT_AROUND,
    ArchiveReceipt,
    ArchiveTarget,
    Clearance,
    ConfirmedFact,
    DeletionReceipt,
    ErasureState,
    EvidenceInfo,
    EvidenceInput,
    EvidenceRecord,
    InvalidInput,
    LiveView,
    MemoryFact,
    MemoryOwner,
    ProvenanceName,
    Recovered,
    ReleasedItem,
    RememberOutcome,
    Sensitivity,
    SessionInfo,
    Summary,
    TaskState,
    TextOrBytes,
    ToolResult,
)
from mnemo_sea.client.answers import (
    an_object,
    carried,
    expected_hash,
    expected_is,
    inconsistent,
    member,
    original,
    parsed,
    same,
    typed,
    where,
)
from mnemo_sea.client.envelopes import shows_its_record
from mnemo_sea.client.errors import error_of
from mnemo_sea.client.wire import (
    Reply,
    Request,
    dumped,
    jsonable,
    keyed_write,
    read,
    segment,
    unkeyed_write,
)
from mnemo_sea.context import AssembledContext
from mnemo_sea.context.assembler import DEFAULT_CANDIDATE_MIN_TOKENS
from mnemo_sea.context.segments import ArchiveCandidate
from mnemo_sea.curation.policy import CurationPolicy
from mnemo_sea.retrieval.query import SearchMode
from mnemo_sea.system.citations import Citation, CitationCheck, CitationReport
from mnemo_sea.system.curating import ArchivedByPolicy, CurationReport, RecallResult, RecallStatus
from mnemo_sea.system.results import DeletionCheck, IngestReport, SearchResult

T = TypeVar("T")
Plan = Generator[Request, Reply, T]

# The largest page the API serves: a list is read in as few requests as it can.
PAGE = 500

# name -> plan, in the order of the facade's sections: what both clients offer.
OPERATIONS: dict[str, Callable[..., Plan[Any]]] = {}
F = TypeVar("F", bound=Callable[..., Plan[Any]])


def operation(plan: F) -> F:
    """Register `plan` under its name; each request it makes carries the name, so an answer the
    client refuses (a BadAnswer) says which operation it answered."""
    name = plan.__name__

    @functools.wraps(plan)
    def named(*args: Any, **kwargs: Any) -> Plan[Any]:
        steps = plan(*args, **kwargs)
        reply: Reply | None = None
        while True:
            try:
                request = steps.send(reply) if reply is not None else next(steps)
            except StopIteration as done:
                return done.value
            reply = yield dataclasses.replace(request, operation=name)

    OPERATIONS[name] = named
    return named  # type: ignore[return-value]


# ---- helpers ------------------------------------------------------------------------------------


def _listed(values: Iterable[str] | None) -> list[str] | None:
    """A filter's values as a JSON list; a bare string is sent as it is, for the server to refuse
    as the facade does (a list of its letters would be another filter)."""
    if values is None or isinstance(values, str):
        return values  # type: ignore[return-value]
    return list(values)


def _query(**params: Any) -> dict[str, Any]:
    """Query parameters without the unset ones, as the strings a URL carries."""
    return {k: jsonable(v) for k, v in params.items() if v is not None}


def _content(content: TextOrBytes) -> dict[str, str]:
    """An original as JSON: text as it is, bytes as base64 (JSON has no bytes)."""
    if isinstance(content, bytes | bytearray | memoryview):
        return {"content_base64": base64.b64encode(bytes(content)).decode("ascii")}
    return {"content": content}


def _evidence(item: EvidenceInput) -> Any:
    try:
        return dumped(EvidenceInput, item)
    except PydanticSerializationError:
        raise InvalidInput(
            "body", "over REST an evidence body is text: these bytes are not valid UTF-8"
        ) from None


def _sensitivity(value: Clearance) -> str:
    """A sensitivity by name, as every surface publishes it (InvalidInput, as in process, for
    a value that is none)."""
    return Sensitivity.parse(value).name.lower()


def _every_page(
    kind: type[T],
    path: str,
    *,
    offset: int = 0,
    limit: int | None = None,
    check: Callable[[Reply, int, T], None] | None = None,
    **params: Any,
) -> Generator[Request, Reply, list[T]]:
    """The items of a paged list from `offset` (every one, or at most `limit`), in order, read
    in pages of PAGE, each item as a `kind` and, with `check`, checked (reply, its index in the
    page, the item) as it is read."""
    items: list[T] = []
    at: int | None = offset
    while at is not None and (limit is None or len(items) < limit):
        asked = PAGE if limit is None else min(PAGE, limit - len(items))
        reply = yield read("GET", path, params=_query(**params, offset=at, limit=asked))
        page: tuple[T, ...] = parsed(reply, tuple[kind, ...], "items")  # type: ignore[valid-type]
        if check is not None:
            for i, item in enumerate(page):
                check(reply, i, item)
        items += page
        following: int | None = parsed(reply, int | None, "next_offset")  # type: ignore[arg-type]
        if following is not None and following <= at:
            raise inconsistent(reply, "next_offset", f"{following} does not follow offset {at}")
        at = following
    return items if limit is None else items[:limit]


def _check_window(limit: int | None, offset: int) -> None:
    """InvalidInput, before any request, for a limit under 1 or an offset under 0 (or a non-integer)."""
    for name, value, low in (("limit", limit, 1), ("offset", offset, 0)):
        if value is None and name == "limit":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidInput(name, f"must be an integer from {low}, got {value!r}")


# ---- knowledge ----------------------------------------------------------------------------------


@operation
def search(
    query: str,
    *,
    limit: int = 10,
    mode: SearchMode | str = SearchMode.HYBRID,
    kinds: Iterable[str] | None = None,
    scopes: Iterable[str] | None = None,
    sources: Iterable[str] | None = None,
    owners: Iterable[str] | None = None,
    as_of: datetime | None = None,
    min_score: float | None = None,
) -> Plan[SearchResult]:
    """`Mnemo.search`: hybrid search under the caller's tenant, clearance and owner pre-filters,
    each hit hydrated with the exact text of its span. The result is always `results` or
    `no_match`: a search that could not run raises its typed error (InvalidInput, Forbidden,
    IndexUnavailable, CacheUnavailable), as `Mnemo.search(...).raise_for_status()` does, so
    code written for the facade (`search(...).raise_for_status()`) runs unchanged."""
    if isinstance(min_score, float) and not math.isfinite(min_score):
        # JSON has no NaN or infinity to send; the server would refuse them as this does.
        raise InvalidInput("min_score", f"{min_score!r} is not a number in [-1, 1]")
    body = {
        "query": query,
        "limit": limit,
        "mode": str(mode),
        "kinds": _listed(kinds),
        "scopes": _listed(scopes),
        "sources": _listed(sources),
        "owners": _listed(owners),
        "as_of": as_of,
        "min_score": min_score,
    }
    reply = yield read("POST", "/v1/search", body=jsonable(body))
    return _found(reply, parsed(reply, SearchResult))


# What a search that ran answers; the other statuses are errors, which REST answers as problems.
_RAN = frozenset({"results", "no_match"})


def _found(reply: Reply, result: SearchResult) -> SearchResult:
    """A search answer that says what a 200 may say: it ran (`results`, or `no_match` with no
    hit), and each hit's snippet is the text of its span, so exactly as long."""
    if result.status.value not in _RAN:
        raise inconsistent(
            reply, "status", f"an HTTP {reply.status} success says the search is {result.status.value!r}"
        )
    if result.status.value == "no_match" and result.hits:
        raise inconsistent(reply, "hits", f"a no_match answer with {len(result.hits)} hit(s)")
    for i, hit in enumerate(result.hits):
        start, end = hit.span
        if not 0 <= start <= end:
            raise inconsistent(reply, where("hits", i, "span"), f"{list(hit.span)} is not a span of a text")
        if len(hit.snippet) != end - start:
            raise inconsistent(
                reply,
                where("hits", i, "snippet"),
                f"{len(hit.snippet)} characters, not the {end - start} of its span {list(hit.span)}",
            )
    return result


@operation
def put_evidence(item: EvidenceInput, *, idempotency_key: str | None = None) -> Plan[IngestReport]:
    """`Mnemo.put_evidence`: store one version of an evidence record and index it; an unchanged
    body (or a replay under the same key) writes nothing and reports the record unchanged."""
    body = _evidence(item)
    reply = yield keyed_write("POST", "/v1/evidence", idempotency_key, body=body)
    stored = _stored(reply, parsed(reply, EvidenceRecord), item, "")
    new = 1 if reply.status == 201 else 0
    return IngestReport((stored,), new, 1 - new)


def _stored(reply: Reply, record: EvidenceRecord, item: EvidenceInput, at: str) -> EvidenceRecord:
    """The record the API stored for `item`: of the item's id (when the item named one) and of the
    item's body, whose hash the client computes from what it sent."""
    prefix = f"{at}." if at else ""
    if item.evidence_id is not None:
        same(reply, f"{prefix}evidence_id", record.evidence_id, item.evidence_id, "the record stored")
    body = item.body.encode("utf-8") if isinstance(item.body, str) else bytes(item.body)
    same(
        reply,
        f"{prefix}content_sha256",
        record.content_sha256,
        hashlib.sha256(body).hexdigest(),
        "the hash of the body sent",
    )
    return record


@operation
def ingest(items: Iterable[EvidenceInput], *, idempotency_key: str | None = None) -> Plan[IngestReport]:
    """`Mnemo.ingest`: store evidence records all or nothing, then index them (InvalidBatch names
    every bad item before anything is stored)."""
    sent = list(items)
    body = {"items": [_evidence(item) for item in sent]}
    reply = yield keyed_write("POST", "/v1/evidence/batch", idempotency_key, body=body)
    records = parsed(reply, tuple[EvidenceRecord, ...], "stored")
    new, unchanged = parsed(reply, int, "new_versions"), parsed(reply, int, "unchanged")
    same(reply, "stored", len(records), len(sent), "the number of records stored")
    same(reply, "new_versions", new + unchanged, len(sent), "new_versions + unchanged")
    stored = tuple(
        _stored(reply, r, item, where("stored", i))
        for i, (r, item) in enumerate(zip(records, sent, strict=True))
    )
    return IngestReport(stored, new, unchanged)


@operation
def retract(evidence_id: str, reason: str, *, idempotency_key: str | None = None) -> Plan[EvidenceRecord]:
    """`Mnemo.retract`: withdraw the current version of a record (it stays in history);
    StateConflict when it has no active version."""
    body = {"evidence_id": evidence_id, "reason": reason}
    reply = yield keyed_write("POST", "/v1/evidence/retract", idempotency_key, body=body)
    record = parsed(reply, EvidenceRecord)
    same(reply, "evidence_id", record.evidence_id, evidence_id, "the record retracted")
    same(reply, "status", record.status, "retracted", "the version retracted")
    return record


@operation
def get_evidence(
    evidence_id: str,
    *,
    version: int | None = None,
    as_of: datetime | None = None,
    with_content: bool = False,
    expected_sha256: str | None = None,
) -> Plan[tuple[EvidenceRecord, bytes | None]]:
    """`Archive.get_evidence`: one version of a record (the current one, `version`, or the one in
    force at `as_of`) and, `with_content`, its hash-verified body. `expected_sha256` (the
    client's own: a hash you hold from an earlier answer) refuses any other version: the body
    and its record's hash must both be it, or InconsistentAnswer."""
    expected = expected_hash(expected_sha256)
    params = _query(version=version, as_of=as_of, content=with_content)
    reply = yield read("GET", f"/v1/evidence/{segment(evidence_id)}", params=params)
    record = parsed(reply, EvidenceRecord, "record")
    same(reply, "record.evidence_id", record.evidence_id, evidence_id, "the record answered")
    if version is not None:
        same(reply, "record.version", record.version, version, "the version answered")
    if expected is not None:
        same(reply, "record.content_sha256", record.content_sha256, expected, "the record's hash")
    if not with_content:
        return record, None
    return record, original(reply, record.content_sha256, None)


@operation
def evidence_history(evidence_id: str) -> Plan[list[EvidenceRecord]]:
    """`Archive.evidence_history`: every version of a record, oldest first."""
    items = yield from _every_page(EvidenceRecord, f"/v1/evidence-history/{segment(evidence_id)}")
    return items


@operation
def list_evidence(
    *, prefix: str | None = None, limit: int = 1000, offset: int = 0
) -> Plan[list[EvidenceInfo]]:
    """`Mnemo.list_evidence`: the tenant's evidence records by id, each with its newest version,
    as far as the key may read them; with `prefix`, only ids starting with it (literally); at
    most `limit` after the first `offset`. An id listed that does not start with the prefix is
    an InconsistentAnswer."""
    items = yield from _listed_by_prefix(EvidenceInfo, "/v1/evidence", "evidence_id", prefix, limit, offset)
    return items


def _listed_by_prefix(
    kind: type[T], path: str, name: str, prefix: str | None, limit: int, offset: int
) -> Generator[Request, Reply, list[T]]:
    """A listing by prefix (at most `limit` after the first `offset`), each item's `name` field
    checked to start with the prefix asked for: an InconsistentAnswer otherwise."""
    _check_window(limit, offset)

    def starts(reply: Reply, i: int, item: T) -> None:
        listed = getattr(item, name)
        if prefix and not listed.startswith(prefix):
            raise inconsistent(
                reply,
                where("items", i, name),
                f"{listed!r} does not start with the prefix asked for, {prefix!r}",
            )

    items = yield from _every_page(kind, path, offset=offset, limit=limit, check=starts, prefix=prefix)
    return items


# ---- sessions -----------------------------------------------------------------------------------


def _session(session_id: str, tail: str = "") -> str:
    return f"/v1/sessions/{segment(session_id)}{tail}"


@operation
def record(
    session_id: str,
    tool_name: str,
    content: TextOrBytes,
    *,
    arguments: Mapping[str, Any] | None = None,
    media_type: str | None = None,
    observed_at: datetime | None = None,
    sensitivity: Clearance = Sensitivity.INTERNAL,
    policy_class: str = "default",
    owner: str | None = None,
    idempotency_key: str | None = None,
) -> Plan[ToolResult]:
    """`Mnemo.record`: record a tool result in a session (created by its first result); it gets
    the next id, r1, r2, ..."""
    body = {
        **_content(content),
        "tool_name": tool_name,
        "arguments": None if arguments is None else dict(arguments),
        "media_type": media_type,
        "observed_at": observed_at,
        "sensitivity": _sensitivity(sensitivity),
        "policy_class": policy_class,
        "owner": owner,
    }
    reply = yield keyed_write("POST", _session(session_id, "/results"), idempotency_key, body=jsonable(body))
    result = parsed(reply, ToolResult)
    sent = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    same(reply, "session_id", result.session_id, session_id, "the session recorded in")
    same(reply, "tool_name", result.tool_name, tool_name, "the tool recorded")
    same(reply, "size", result.size, len(sent), "the size of the content sent")
    same(
        reply,
        "content_sha256",
        result.content_sha256,
        hashlib.sha256(sent).hexdigest(),
        "the hash of the content sent",
    )
    return result


@operation
def list_sessions(*, limit: int = 1000, offset: int = 0) -> Plan[list[SessionInfo]]:
    """`Mnemo.list_sessions`: the tenant's sessions, oldest first, with their result counts; at
    most `limit` after the first `offset` (a reader's key: only the sessions about itself)."""
    _check_window(limit, offset)
    items = yield from _every_page(SessionInfo, "/v1/sessions", offset=offset, limit=limit)
    return items


@operation
def session_info(session_id: str) -> Plan[SessionInfo]:
    """`Mnemo.session_info`: one session with its result counts, as `list_sessions` lists it."""
    reply = yield read("GET", _session(session_id, ""))
    info = parsed(reply, SessionInfo)
    same(reply, "session_id", info.session_id, session_id, "the session answered")
    return info


@operation
def get_result(
    session_id: str, result_id: str, *, with_content: bool = False, expected_sha256: str | None = None
) -> Plan[tuple[ToolResult, bytes | None]]:
    """`Mnemo.get_result`: one result, changing nothing (`recover` appends a copy; this only
    looks), and with `with_content` what it shows: the original, whose bytes must hash to the
    record's `content_sha256` (and to `expected_sha256`, the client's own, when given), or an
    excerpt copy's excerpt, whose size must be its place's. Else InconsistentAnswer."""
    expected = expected_hash(expected_sha256)
    reply = yield read(
        "GET", _session(session_id, f"/results/{segment(result_id)}"), params=_query(content=with_content)
    )
    result = parsed(reply, ToolResult, "result")
    same(reply, "result.session_id", result.session_id, session_id, "the session answered")
    same(reply, "result.result_id", result.result_id, result_id, "the result answered")
    if expected is not None:
        same(reply, "result.content_sha256", result.content_sha256, expected, "the result's hash")
    if not with_content:
        return result, None
    if result.excerpt is None:
        return result, original(reply, result.content_sha256, None)
    shown = carried(reply)
    same(reply, "content", len(shown), result.excerpt.size, "the excerpt's size")
    return result, shown


@operation
def list_results(session_id: str, *, offset: int = 0, limit: int | None = None) -> Plan[list[ToolResult]]:
    """`Mnemo.list_results`: the session's results in order, live and archived, without content;
    every one, or at most `limit` after the first `offset`."""
    _check_window(limit, offset)
    items = yield from _every_page(ToolResult, _session(session_id, "/results"), offset=offset, limit=limit)
    return items


@operation
def live_view(session_id: str) -> Plan[LiveView]:
    """`Mnemo.live_view`: the session as the agent's context, live results in their envelopes and
    archived ones as stubs in place; each envelope checked against its result (client.envelopes:
    a live result's text must hash to its `content_sha256`), else InconsistentAnswer."""
    reply = yield read("GET", _session(session_id, "/live"))
    view = parsed(reply, LiveView)
    same(reply, "session_id", view.session_id, session_id, "the session answered")
    same(reply, "text", parsed(reply, str, "text"), view.text, "the text of the items' envelopes")
    for i, item in enumerate(view.items):
        same(
            reply,
            where("items", i, "result", "session_id"),
            item.result.session_id,
            session_id,
            "its session",
        )
        if not shows_its_record(item):
            raise inconsistent(
                reply,
                where("items", i, "rendered"),
                f"the envelope of {item.result.result_id} is not what its record renders (the content "
                "must hash to its content_sha256)",
            )
    return view


def _target(target: ArchiveTarget | Mapping[str, Any] | tuple[str, str]) -> Any:
    if isinstance(target, tuple):
        result_id, note = target
        return {"result_id": result_id, "note": note}
    return jsonable(target)


@operation
def archive_results(
    session_id: str,
    targets: Iterable[ArchiveTarget | Mapping[str, Any] | tuple[str, str]],
    *,
    idempotency_key: str | None = None,
) -> Plan[ArchiveReceipt]:
    """`Mnemo.archive_results`: archive a batch all or nothing, each result replaced by its note;
    BatchRejected (ArchiveConflict when every problem is an already archived target) names each
    target's status, and nothing changed."""
    body = {"targets": [_target(t) for t in targets]}
    reply = yield keyed_write("POST", _session(session_id, "/archive"), idempotency_key, body=body)
    receipt = parsed(reply, ArchiveReceipt)
    same(reply, "session_id", receipt.session_id, session_id, "the session archived in")
    return receipt


@operation
def recover(
    session_id: str,
    result_id: str,
    *,
    lines: tuple[int, int] | None = None,
    byte_range: tuple[int, int] | None = None,
    match: str | None = None,
    around: int = DEFAULT_AROUND,
    expected_sha256: str | None = None,
    idempotency_key: str | None = None,
) -> Plan[Recovered]:
    """`Mnemo.recover`: an archived result's exact original, hash-verified, appended to the session
    labelled historical (with a staleness warning for prices, stock and the like); with one span
    (`lines`, `byte_range` or `match` with `around`), only that excerpt of it.

    The bytes must hash to the original's `content_sha256`, which every hash of the answer must
    repeat; `expected_sha256` (the client's own: the hash of the `ToolResult` that `record` or
    `list_results` gave you) must be it too, which catches an original altered together with
    its hashes. An excerpt's bytes must hash to the answer's `excerpt_sha256` and have the size
    its place in the original says (the whole original, which the server checked, is not sent).
    Else InconsistentAnswer, and nothing is returned."""
    expected = expected_hash(expected_sha256)
    path = _session(session_id, f"/results/{segment(result_id)}/recover")
    span: dict[str, Any] = {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in (("lines", lines), ("byte_range", byte_range), ("match", match))
        if value is not None
    }
    if match is not None:
        span["around"] = around
    reply = yield keyed_write("POST", path, idempotency_key, body=span or None)
    return _recovered(reply, session_id, result_id, expected)


@operation
def recall(
    session_id: str, query: str, *, around: int = DEFAULT_AROUND, idempotency_key: str | None = None
) -> Plan[RecallResult]:
    """`Mnemo.recall`: the line of the session's results that holds a need, and its excerpt
    recovered (`recovered`, checked as `recover` checks an excerpt), `in_view`, `ambiguous` or
    `not_found`."""
    path = _session(session_id, "/recall")
    body = {"query": query, "around": around}
    reply = yield keyed_write("POST", path, idempotency_key, body=body)
    return _recall(reply, session_id)


@operation
def curate(
    session_id: str,
    *,
    budget_tokens: int = CurationPolicy.budget_tokens,
    large_result_tokens: int = CurationPolicy.large_result_tokens,
    keep_recent: int = CurationPolicy.keep_recent,
    need: str | None = None,
    around: int = DEFAULT_AROUND,
    idempotency_key: str | None = None,
) -> Plan[CurationReport]:
    """`Mnemo.curate`: the automatic policy applied to the session, and with `need` the excerpt
    that holds it recalled first."""
    path = _session(session_id, "/curate")
    body = {
        "budget_tokens": budget_tokens,
        "large_result_tokens": large_result_tokens,
        "keep_recent": keep_recent,
        "need": need,
        "around": around,
    }
    reply = yield keyed_write("POST", path, idempotency_key, body=body)
    same(reply, "session_id", parsed(reply, str, "session_id"), session_id, "the session curated")
    recalled = None if member(reply, "recall") is None else _recall(reply, session_id, "recall")
    return CurationReport(
        session_id=session_id,
        archived=tuple(parsed(reply, list[ArchivedByPolicy], "archived")),
        live_tokens_before=parsed(reply, int, "live_tokens_before"),
        live_tokens_after=parsed(reply, int, "live_tokens_after"),
        receipt=parsed(reply, ArchiveReceipt | None, "receipt"),  # type: ignore[arg-type]
        recall=recalled,
    )


def _recall(reply: Reply, session_id: str, *at: str) -> RecallResult:
    recovered = None
    if member(reply, *at, "recovered") is not None:
        source = parsed(reply, str, *at, "result_id")
        recovered = _recovered(reply, session_id, source, None, *at, "recovered")
    return RecallResult(
        query=parsed(reply, str, *at, "query"),
        status=parsed(reply, RecallStatus, *at, "status"),  # type: ignore[arg-type]
        checked=tuple(parsed(reply, list[str], *at, "checked")),
        result_id=parsed(reply, str | None, *at, "result_id"),  # type: ignore[arg-type]
        lines=parsed(reply, tuple[int, int] | None, *at, "lines"),  # type: ignore[arg-type]
        score=parsed(reply, float | None, *at, "score"),  # type: ignore[arg-type]
        recovered=recovered,
    )


def _recovered(
    reply: Reply, session_id: str, result_id: str | None, expected: str | None, *at: str
) -> Recovered:
    """A recovery's answer (under `at`: a recall's `recovered`) as the library's Recovered, every
    hash and size checked (see `recover`); InconsistentAnswer otherwise."""
    first = parsed(reply, ToolResult, *at, "original")
    appended = parsed(reply, ToolResult, *at, "appended")
    same(
        reply,
        where(*at, "original", "session_id"),
        first.session_id,
        session_id,
        "the session recovered from",
    )
    same(
        reply,
        where(*at, "appended", "session_id"),
        appended.session_id,
        session_id,
        "the session appended to",
    )
    if result_id is not None and not result_id.startswith("result:"):
        same(reply, where(*at, "original", "result_id"), first.result_id, result_id, "the result recovered")
    same(
        reply,
        where(*at, "appended", "recovered_from"),
        appended.recovered_from,
        first.result_id,
        "the copy's original",
    )
    same(
        reply,
        where(*at, "content_sha256"),
        parsed(reply, str, *at, "content_sha256"),
        first.content_sha256,
        "the answer's hash",
    )
    same(
        reply,
        where(*at, "appended", "content_sha256"),
        appended.content_sha256,
        first.content_sha256,
        "the copy's hash",
    )
    if appended.excerpt is None:
        content = original(reply, first.content_sha256, expected, *at)
        same(reply, where(*at, "original", "size"), first.size, len(content), "the original's size")
    else:
        expected_is(reply, first.content_sha256, expected, *at)
        content = original(reply, parsed(reply, str, *at, "excerpt_sha256"), None, *at)
        same(
            reply,
            where(*at, "appended", "excerpt"),
            appended.excerpt.size,
            len(content),
            "the excerpt's size",
        )
    return Recovered(
        original=first,
        appended=appended,
        content=content,
        staleness_warning=parsed(reply, str | None, *at, "staleness_warning"),  # type: ignore[arg-type]
    )


@operation
def context(
    session_id: str,
    *,
    budget_tokens: int,
    output_reserve: int | None = None,
    instructions: str = "",
    tools: Sequence[Mapping[str, Any] | str] | None = None,
    query: str | None = None,
    evidence_limit: int = 8,
    kinds: Iterable[str] | None = None,
    candidate_min_tokens: int = DEFAULT_CANDIDATE_MIN_TOKENS,
) -> Plan[AssembledContext]:
    """`Mnemo.context`: the session's working context for this turn under `budget_tokens`, with
    its accounting (kept segments, what was left out and why, archive candidates). Reads only.
    ContextOverBudget when the pinned segments alone exceed the budget."""
    body = {
        "budget_tokens": budget_tokens,
        "output_reserve": output_reserve,
        "instructions": instructions,
        "tools": None if tools is None else jsonable(list(tools)),
        "query": query,
        "evidence_limit": evidence_limit,
        "kinds": _listed(kinds),
        "candidate_min_tokens": candidate_min_tokens,
        "with_text": True,  # the segments' text is part of the AssembledContext
    }
    reply = yield read("POST", _session(session_id, "/context"), body=body)
    # Each member read under the name the answer gives it, so an error names that member.
    candidates = parsed(reply, tuple[ArchiveCandidate, ...], "archive_candidates")
    assembled: AssembledContext = typed(
        reply, AssembledContext, {**an_object(reply), "candidates": candidates}
    )
    same(reply, "session_id", assembled.session_id, session_id, "the session answered")
    same(reply, "budget_tokens", assembled.budget_tokens, budget_tokens, "the budget answered")
    same(reply, "text", parsed(reply, str, "text"), assembled.text, "the text of the segments")
    same(
        reply, "used_tokens", parsed(reply, int, "used_tokens"), assembled.used_tokens, "the segments' tokens"
    )
    return assembled


# ---- memory -------------------------------------------------------------------------------------


@operation
def remember(
    owner: str,
    key: str,
    value: str,
    provenance: ProvenanceName,
    *,
    ttl_seconds: float | None = None,
    derived_from: str | None = None,
    idempotency_key: str | None = None,
) -> Plan[RememberOutcome]:
    """`Mnemo.remember`: store a fact for an owner, superseding the key's previous value; a model
    inference comes back as an unpersisted candidate; MemoryConflict when a higher-ranked current
    fact stands."""
    body = {
        "owner": owner,
        "key": key,
        "value": value,
        "provenance": provenance,
        "ttl_seconds": ttl_seconds,
        "derived_from": derived_from,
    }
    reply = yield keyed_write("POST", "/v1/memory", idempotency_key, body=body)
    outcome = parsed(reply, RememberOutcome)
    _fact_of(reply, outcome.fact, owner, key, "fact.")
    return outcome


def _fact_of(reply: Reply, fact: MemoryFact, owner: str, key: str, at: str = "") -> MemoryFact:
    same(reply, f"{at}owner", fact.owner, owner, "the fact's owner")
    same(reply, f"{at}key", fact.key, key, "the fact's key")
    return fact


@operation
def current(owner: str, key: str) -> Plan[MemoryFact | None]:
    """`Mnemo.current`: the owner's current, unexpired value for `key`; None when there is none."""
    request = read(
        "GET", f"/v1/memory/{segment(owner)}", params={"key": key}, passthrough=frozenset({"not_found"})
    )
    reply = yield request
    if reply.ok:
        fact = _fact_of(reply, parsed(reply, MemoryFact), owner, key)
        same(reply, "status", fact.status, "active", "the current fact's status")
        return fact
    # The API answers "no current fact" as a 404 of the fact itself; any other 404 (no such
    # owner for this caller, say) is the error it is.
    if isinstance(reply.body, dict) and reply.body.get("what") == "memory fact":
        return None
    raise error_of(reply, request)


@operation
def memory_history(owner: str, key: str) -> Plan[list[MemoryFact]]:
    """`Mnemo.memory_history`: every version of the fact, oldest first, superseded ones included."""
    items = yield from _every_page(MemoryFact, f"/v1/memory/{segment(owner)}/history", key=key)
    return items


@operation
def list_memory_owners(
    *, prefix: str | None = None, limit: int = 1000, offset: int = 0
) -> Plan[list[MemoryOwner]]:
    """`Mnemo.list_memory_owners`: the owners the tenant keeps memory about, by name, with their
    counts of facts (a reader's key: only itself); with `prefix`, only names starting with it
    (literally); at most `limit` after the first `offset`. An owner listed that does not start
    with the prefix is an InconsistentAnswer."""
    items = yield from _listed_by_prefix(MemoryOwner, "/v1/memory", "owner", prefix, limit, offset)
    return items


@operation
def facts(owner: str, *, offset: int = 0, limit: int | None = None) -> Plan[list[MemoryFact]]:
    """`Mnemo.facts`: the owner's current, unexpired facts by key, every one or at most `limit`
    after the first `offset`. A fact of another owner, or not current, is an InconsistentAnswer."""
    _check_window(limit, offset)

    def current_of_owner(reply: Reply, i: int, fact: MemoryFact) -> None:
        _fact_of(reply, fact, owner, fact.key, where("items", i) + ".")
        same(reply, where("items", i, "status"), fact.status, "active", "a current fact's status")

    items = yield from _every_page(
        MemoryFact, f"/v1/memory/{segment(owner)}/facts", offset=offset, limit=limit, check=current_of_owner
    )
    return items


@operation
def forget(owner: str, key: str, *, idempotency_key: str | None = None) -> Plan[DeletionReceipt]:
    """`Mnemo.forget`: delete every version of one fact with its index points and cached searches."""
    path = f"/v1/memory/{segment(owner)}"
    reply = yield keyed_write("DELETE", path, idempotency_key, params={"key": key})
    return parsed(reply, DeletionReceipt)


@operation
def purge_expired() -> Plan[DeletionReceipt | None]:
    """`Mnemo.purge_expired`: delete the tenant's expired memory versions now (admin); None when
    none had expired. Never retried: the API takes no idempotency key for it."""
    reply = yield unkeyed_write("POST", "/v1/memory/purge-expired")
    receipt: DeletionReceipt | None = parsed(reply, DeletionReceipt | None, "receipt")  # type: ignore[arg-type]
    purged = parsed(reply, int, "purged")
    same(reply, "purged", purged, 0 if receipt is None else len(receipt.memory_facts), "the versions purged")
    return receipt


# ---- summaries ----------------------------------------------------------------------------------


@operation
def create_summary(
    text: str,
    derived_from: Sequence[str],
    *,
    trace_ref: str | None = None,
    idempotency_key: str | None = None,
) -> Plan[Summary]:
    """`Mnemo.create_summary`: a derived summary of existing sources, searchable and labelled
    derived wherever shown; deleted with any of its sources."""
    body = {"text": text, "derived_from": list(derived_from), "trace_ref": trace_ref}
    reply = yield keyed_write("POST", "/v1/summaries", idempotency_key, body=body)
    summary = parsed(reply, Summary)
    same(reply, "text", summary.text, text, "the summary's text")
    return summary


@operation
def get_summary(summary_id: str) -> Plan[Summary]:
    """`Archive.get_summary`: one summary, labelled derived."""
    reply = yield read("GET", f"/v1/summaries/{segment(summary_id)}")
    summary = parsed(reply, Summary)
    same(reply, "summary_id", summary.summary_id, summary_id, "the summary answered")
    return summary


# ---- task state ---------------------------------------------------------------------------------


def _fact(fact: ConfirmedFact | Mapping[str, Any]) -> Any:
    return jsonable(fact) if isinstance(fact, ConfirmedFact) else dict(fact)


def _released(item: ReleasedItem | Mapping[str, Any]) -> Any:
    # A ReleasedItem read back carries its kind, which the archive sets: only item and reason go.
    if isinstance(item, ReleasedItem):
        return {"item": item.item, "reason": item.reason}
    return dict(item)


@operation
def update_task_state(
    session_id: str,
    *,
    goal: str,
    confirmed: Sequence[ConfirmedFact | Mapping[str, Any]] = (),
    unresolved: Sequence[str] = (),
    constraints: Sequence[str] = (),
    pending_operations: Sequence[str] = (),
    trace_ref: str | None = None,
    release: Sequence[ReleasedItem | Mapping[str, Any]] = (),
    expected_version: int | None = None,
    owner: str | None = None,
    idempotency_key: str | None = None,
) -> Plan[TaskState]:
    """`Mnemo.update_task_state`: write the next version of the session's task state, validated
    whole against the current one; TaskStateRejected lists every problem (nothing stored), a
    stale `expected_version` is a StateConflict."""
    body = {
        "goal": goal,
        "confirmed": [_fact(f) for f in confirmed],
        "unresolved": list(unresolved),
        "constraints": list(constraints),
        "pending_operations": list(pending_operations),
        "trace_ref": trace_ref,
        "release": [_released(r) for r in release],
        "expected_version": expected_version,
        "owner": owner,
    }
    reply = yield keyed_write(
        "POST", _session(session_id, "/task-state"), idempotency_key, body=jsonable(body)
    )
    state = _state_of(reply, parsed(reply, TaskState), session_id)
    same(reply, "goal", state.goal, goal, "the goal written")
    if expected_version is not None:
        same(reply, "version", state.version, expected_version + 1, "the version written")
    return state


def _state_of(reply: Reply, state: TaskState, session_id: str, version: int | None = None) -> TaskState:
    """A task state of the session asked for: `version` when one was asked, else the current one."""
    same(reply, "session_id", state.session_id, session_id, "the task state's session")
    if version is None:
        same(reply, "status", state.status, "current", "the current task state's status")
    else:
        same(reply, "version", state.version, version, "the version answered")
    return state


@operation
def task_state(session_id: str, *, version: int | None = None) -> Plan[TaskState | None]:
    """`Mnemo.task_state`: the session's current task state, or `version`; None when it has none yet."""
    reply = yield read("GET", _session(session_id, "/task-state"), params=_query(version=version))
    if reply.body is None:  # JSON null: no answer that is not JSON reaches here (success_of)
        return None
    return _state_of(reply, parsed(reply, TaskState), session_id, version)


@operation
def task_state_history(session_id: str) -> Plan[list[TaskState]]:
    """`Mnemo.task_state_history`: every version the caller's clearance allows, oldest first."""
    items = yield from _every_page(TaskState, _session(session_id, "/task-state/history"))
    return items


# ---- deletion -----------------------------------------------------------------------------------


@operation
def delete_evidence(evidence_id: str, *, idempotency_key: str | None = None) -> Plan[DeletionReceipt]:
    """`Mnemo.delete_evidence`: every version of a record and everything derived from it (admin)."""
    reply = yield keyed_write("DELETE", f"/v1/evidence/{segment(evidence_id)}", idempotency_key)
    return parsed(reply, DeletionReceipt)


@operation
def delete_session(session_id: str, *, idempotency_key: str | None = None) -> Plan[DeletionReceipt]:
    """`Mnemo.delete_session`: a session, its results, notes and everything derived from them (admin)."""
    reply = yield keyed_write("DELETE", _session(session_id), idempotency_key)
    return parsed(reply, DeletionReceipt)


@operation
def delete_owner(owner: str, *, idempotency_key: str | None = None) -> Plan[DeletionReceipt]:
    """`Mnemo.delete_owner`: everything about one person, a data-subject request (admin)."""
    reply = yield keyed_write("DELETE", f"/v1/owners/{segment(owner)}", idempotency_key)
    return parsed(reply, DeletionReceipt)


@operation
def verify_deleted(receipt: DeletionReceipt) -> Plan[DeletionCheck]:
    """`Mnemo.verify_deleted`: check every store for anything left of a deletion; ReceiptInvalid
    for a receipt this deployment did not sign."""
    reply = yield read("POST", "/v1/deletions/verify", body=dumped(DeletionReceipt, receipt))
    check = DeletionCheck(
        receipt,
        parsed(reply, tuple[str, ...], "archive_leftovers"),
        parsed(reply, tuple[str, ...], "index_leftovers"),
        parsed(reply, int, "pending_outbox"),
        # Absent from the answers of servers older than the erasure check.
        typed(reply, ErasureState, an_object(reply).get("erasure", "done"), "erasure"),
        typed(reply, str, an_object(reply).get("erasure_detail", ""), "erasure_detail"),
    )
    # `ok` is what a reader of the raw answer looks at first: it must say what the leftovers say.
    same(reply, "ok", parsed(reply, bool, "ok"), check.ok, "the check's verdict")
    if "status" in an_object(reply):
        same(reply, "status", parsed(reply, str, "status"), check.status, "the check's status")
    return check


# ---- citations and health -----------------------------------------------------------------------


@operation
def check_citations(
    citations: Sequence[Citation | Mapping[str, Any]], *, answered_at: datetime | None = None
) -> Plan[CitationReport]:
    """`Mnemo.check_citations`: does each cited evidence exist for the caller, was it in force at
    `answered_at`, does it hold the quote?"""
    cited = [c.to_dict() if isinstance(c, Citation) else dict(c) for c in citations]
    body = {"citations": cited, "answered_at": answered_at}
    reply = yield read("POST", "/v1/citations/check", body=jsonable(body))
    checks = parsed(reply, tuple[CitationCheck, ...], "citations")
    report: CitationReport = typed(reply, CitationReport, {**an_object(reply), "checks": checks})
    same(reply, "citations", len(report.checks), len(cited), "the number of citations checked")
    same(reply, "total", parsed(reply, int, "total"), len(report.checks), "the citations' total")
    same(reply, "ok", parsed(reply, int, "ok"), sum(c.ok for c in report.checks), "the citations found ok")
    return report


@dataclass(frozen=True)
class ComponentHealth:
    """One store's answer to the readiness probe."""

    ok: bool
    ms: float
    error: str | None = None  # the failure's type, when not ok


@dataclass(frozen=True)
class Health:
    """The API's readiness (`GET /v1/health/ready`): whether the archive, the index and the cache
    each answered. `mode` is `embedded` or `server`, None when not ready (the answer then
    names the components only)."""

    status: str  # ready | not_ready
    mode: str | None
    components: dict[str, ComponentHealth]

    @property
    def ok(self) -> bool:
        return self.status == "ready"


@operation
def health() -> Plan[Health]:
    """Whether every store of the API answers: a not-ready API is a `Health` that says which
    component failed, not an error. Never retried: the probe reports what it sees now."""
    reply = yield Request("GET", "/v1/health/ready", retry=False, passthrough=frozenset({"not_ready"}))
    components = parsed(reply, dict[str, ComponentHealth], "components")
    if reply.ok:
        # A 200 is the API's word that it is ready: a body that says otherwise contradicts it.
        same(reply, "status", parsed(reply, str, "status"), "ready", "an HTTP 200 readiness")
        failed = sorted(name for name, c in components.items() if not c.ok)
        same(reply, "components", failed, [], "the components failed in an HTTP 200 readiness")
        return Health(status="ready", mode=parsed(reply, str, "mode"), components=components)
    return Health(status="not_ready", mode=None, components=components)


__all__ = ["OPERATIONS", "ComponentHealth", "Health", "Plan"]
