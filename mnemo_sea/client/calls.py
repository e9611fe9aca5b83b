"""Every operation of the REST API: the requests it makes, and how its answers become the
library's own types. One description, followed by both clients (MnemoClient, AsyncMnemoClient).

Each operation is a generator (a plan): it yields each Request it needs answered, receives the
Reply, and returns the operation's result, so a list that pages is one plan of several
requests, and the clients only send and wait (sync or async). Names and keyword parameters are
the facade's (`Mnemo`, or `Archive` for the reads `Mnemo.archive` serves), without the
principal: the API key says who calls. tests/composition/test_operation_vocabulary.py compares
them with the operation records, as it does every surface.

Results are the library's types, rebuilt from the JSON (SearchResult, EvidenceRecord, ToolResult,
LiveView, Recovered, AssembledContext, DeletionReceipt, ...), so code runs the same on a `Mnemo`
in process and on a server; `Health` is the one answer the facade has no type for.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic_core import PydanticSerializationError

from mnemo_sea.archive import (
    ArchiveReceipt,
    ArchiveTarget,
    ConfirmedFact,
    DeletionReceipt,
    EvidenceInput,
    EvidenceRecord,
    IntegrityError,
    InvalidInput,
    LiveView,
    MemoryFact,
    Recovered,
    ReleasedItem,
    RememberOutcome,
    Sensitivity,
    Summary,
    TaskState,
    ToolResult,
)
from mnemo_sea.archive.operations import Clearance, ProvenanceName, TextOrBytes
from mnemo_sea.client.errors import error_of
from mnemo_sea.client.wire import (
    Reply,
    Request,
    dumped,
    jsonable,
    keyed_write,
    parsed,
    read,
    segment,
    unkeyed_write,
)
from mnemo_sea.context import AssembledContext
from mnemo_sea.context.assembler import DEFAULT_CANDIDATE_MIN_TOKENS
from mnemo_sea.retrieval.query import SearchMode
from mnemo_sea.system.citations import Citation, CitationReport
from mnemo_sea.system.results import DeletionCheck, IngestReport, SearchResult

T = TypeVar("T")
Plan = Generator[Request, Reply, T]

# The largest page the API serves: a list is read in as few requests as it can.
PAGE = 500

# name -> plan, in the order of the facade's sections: what both clients offer.
OPERATIONS: dict[str, Callable[..., Plan[Any]]] = {}
F = TypeVar("F", bound=Callable[..., Plan[Any]])


def operation(plan: F) -> F:
    OPERATIONS[plan.__name__] = plan
    return plan


# ---- helpers ------------------------------------------------------------------------------------


def _listed(values: Iterable[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _query(**params: Any) -> dict[str, Any]:
    """Query parameters without the unset ones, as the strings a URL carries."""
    return {k: jsonable(v) for k, v in params.items() if v is not None}


def _content(content: TextOrBytes) -> dict[str, str]:
    """An original as JSON: text as it is, bytes as base64 (JSON has no bytes)."""
    if isinstance(content, bytes | bytearray | memoryview):
        return {"content_base64": base64.b64encode(bytes(content)).decode("ascii")}
    return {"content": content}


def _decoded(body: Mapping[str, Any]) -> bytes | None:
    """The bytes of an answer's `content` (text) or `content_base64` (binary); None if neither."""
    if body.get("content") is not None:
        return str(body["content"]).encode("utf-8")
    encoded = body.get("content_base64")
    if encoded is None:
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise IntegrityError("the API answered a content_base64 that is not base64") from None


def _original(body: Mapping[str, Any], sha256: str) -> bytes:
    """An original the API served, checked here too against the hash its record names: a
    proxy that cut the body, or a server bug, must not hand back other bytes as the original."""
    content = _decoded(body)
    if content is None:
        raise IntegrityError(f"the API answered no content for original {sha256[:12]}…", sha256=sha256)
    actual = hashlib.sha256(content).hexdigest()
    if actual != sha256:
        raise IntegrityError(
            f"the original the API answered hashes to {actual[:12]}…, not {sha256[:12]}…; it is not returned",
            sha256=sha256,
            actual_sha256=actual,
        )
    return content


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


def _every_page(path: str, **params: Any) -> Generator[Request, Reply, list[Any]]:
    """Every item of a paged list, oldest first, in pages of PAGE."""
    items: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        reply = yield read("GET", path, params=_query(**params, offset=offset, limit=PAGE))
        items += reply.body["items"]
        offset = reply.body["next_offset"]
    return items


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
    as_of: datetime | None = None,
) -> Plan[SearchResult]:
    """`Mnemo.search`: hybrid search under the caller's tenant, clearance and owner pre-filters,
    each hit hydrated with the exact text of its span. The result is always `results` or
    `no_match`: a search that could not run raises its typed error (InvalidInput, Forbidden,
    IndexUnavailable, CacheUnavailable), as `Mnemo.search(...).raise_for_status()` does, so
    code written for the facade (`search(...).raise_for_status()`) runs unchanged."""
    body = {
        "query": query,
        "limit": limit,
        "mode": str(mode),
        "kinds": _listed(kinds),
        "scopes": _listed(scopes),
        "sources": _listed(sources),
        "as_of": as_of,
    }
    reply = yield read("POST", "/v1/search", body=jsonable(body))
    return parsed(SearchResult, reply.body)


@operation
def put_evidence(item: EvidenceInput, *, idempotency_key: str | None = None) -> Plan[IngestReport]:
    """`Mnemo.put_evidence`: store one version of an evidence record and index it; an unchanged
    body (or a replay under the same key) writes nothing and reports the record unchanged."""
    reply = yield keyed_write("POST", "/v1/evidence", idempotency_key, body=_evidence(item))
    new = 1 if reply.status == 201 else 0
    return IngestReport((parsed(EvidenceRecord, reply.body),), new, 1 - new)


@operation
def ingest(items: Iterable[EvidenceInput], *, idempotency_key: str | None = None) -> Plan[IngestReport]:
    """`Mnemo.ingest`: store evidence records all or nothing, then index them (InvalidBatch names
    every bad item before anything is stored)."""
    body = {"items": [_evidence(item) for item in items]}
    reply = yield keyed_write("POST", "/v1/evidence/batch", idempotency_key, body=body)
    stored = tuple(parsed(EvidenceRecord, r) for r in reply.body["stored"])
    return IngestReport(stored, reply.body["new_versions"], reply.body["unchanged"])


@operation
def retract(evidence_id: str, reason: str, *, idempotency_key: str | None = None) -> Plan[EvidenceRecord]:
    """`Mnemo.retract`: withdraw the current version of a record (it stays in history);
    StateConflict when it has no active version."""
    body = {"evidence_id": evidence_id, "reason": reason}
    reply = yield keyed_write("POST", "/v1/evidence/retract", idempotency_key, body=body)
    return parsed(EvidenceRecord, reply.body)


@operation
def get_evidence(
    evidence_id: str, *, version: int | None = None, as_of: datetime | None = None, with_content: bool = False
) -> Plan[tuple[EvidenceRecord, bytes | None]]:
    """`Archive.get_evidence`: one version of a record (the current one, `version`, or the one in
    force at `as_of`) and, `with_content`, its hash-verified body."""
    params = _query(version=version, as_of=as_of, content=with_content)
    reply = yield read("GET", f"/v1/evidence/{segment(evidence_id)}", params=params)
    record = parsed(EvidenceRecord, reply.body["record"])
    return record, _original(reply.body, record.content_sha256) if with_content else None


@operation
def evidence_history(evidence_id: str) -> Plan[list[EvidenceRecord]]:
    """`Archive.evidence_history`: every version of a record, oldest first."""
    items = yield from _every_page(f"/v1/evidence-history/{segment(evidence_id)}")
    return [parsed(EvidenceRecord, r) for r in items]


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
    return parsed(ToolResult, reply.body)


@operation
def list_results(session_id: str) -> Plan[list[ToolResult]]:
    """`Archive.list_results`: the session's results in order, live and archived, without content."""
    items = yield from _every_page(_session(session_id, "/results"))
    return [parsed(ToolResult, r) for r in items]


@operation
def live_view(session_id: str) -> Plan[LiveView]:
    """`Mnemo.live_view`: the session as the agent's context, live results in their envelopes and
    archived ones as stubs in place."""
    reply = yield read("GET", _session(session_id, "/live"))
    return parsed(LiveView, reply.body)


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
    return parsed(ArchiveReceipt, reply.body)


@operation
def recover(session_id: str, result_id: str, *, idempotency_key: str | None = None) -> Plan[Recovered]:
    """`Mnemo.recover`: an archived result's exact original, hash-verified, appended to the session
    labelled historical (with a staleness warning for prices, stock and the like)."""
    path = _session(session_id, f"/results/{segment(result_id)}/recover")
    reply = yield keyed_write("POST", path, idempotency_key)
    original = parsed(ToolResult, reply.body["original"])
    return Recovered(
        original=original,
        appended=parsed(ToolResult, reply.body["appended"]),
        content=_original(reply.body, original.content_sha256),
        staleness_warning=reply.body["staleness_warning"],
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
    return parsed(AssembledContext, {**reply.body, "candidates": reply.body["archive_candidates"]})


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
    return parsed(RememberOutcome, reply.body)


@operation
def current(owner: str, key: str) -> Plan[MemoryFact | None]:
    """`Mnemo.current`: the owner's current, unexpired value for `key`; None when there is none."""
    request = read(
        "GET", f"/v1/memory/{segment(owner)}", params={"key": key}, passthrough=frozenset({"not_found"})
    )
    reply = yield request
    if reply.ok:
        return parsed(MemoryFact, reply.body)
    # The API answers "no current fact" as a 404 of the fact itself; any other 404 (no such
    # owner for this caller, say) is the error it is.
    if reply.body.get("what") == "memory fact":
        return None
    raise error_of(reply, request)


@operation
def memory_history(owner: str, key: str) -> Plan[list[MemoryFact]]:
    """`Mnemo.memory_history`: every version of the fact, oldest first, superseded ones included."""
    items = yield from _every_page(f"/v1/memory/{segment(owner)}/history", key=key)
    return [parsed(MemoryFact, f) for f in items]


@operation
def forget(owner: str, key: str, *, idempotency_key: str | None = None) -> Plan[DeletionReceipt]:
    """`Mnemo.forget`: delete every version of one fact with its index points and cached searches."""
    path = f"/v1/memory/{segment(owner)}"
    reply = yield keyed_write("DELETE", path, idempotency_key, params={"key": key})
    return parsed(DeletionReceipt, reply.body)


@operation
def purge_expired() -> Plan[DeletionReceipt | None]:
    """`Mnemo.purge_expired`: delete the tenant's expired memory versions now (admin); None when
    none had expired. Never retried: the API takes no idempotency key for it."""
    reply = yield unkeyed_write("POST", "/v1/memory/purge-expired")
    receipt = reply.body["receipt"]
    return None if receipt is None else parsed(DeletionReceipt, receipt)


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
    return parsed(Summary, reply.body)


@operation
def get_summary(summary_id: str) -> Plan[Summary]:
    """`Archive.get_summary`: one summary, labelled derived."""
    reply = yield read("GET", f"/v1/summaries/{segment(summary_id)}")
    return parsed(Summary, reply.body)


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
    return parsed(TaskState, reply.body)


@operation
def task_state(session_id: str, *, version: int | None = None) -> Plan[TaskState | None]:
    """`Mnemo.task_state`: the session's current task state, or `version`; None when it has none yet."""
    reply = yield read("GET", _session(session_id, "/task-state"), params=_query(version=version))
    return None if reply.body is None else parsed(TaskState, reply.body)


@operation
def task_state_history(session_id: str) -> Plan[list[TaskState]]:
    """`Mnemo.task_state_history`: every version the caller's clearance allows, oldest first."""
    items = yield from _every_page(_session(session_id, "/task-state/history"))
    return [parsed(TaskState, s) for s in items]


# ---- deletion -----------------------------------------------------------------------------------


@operation
def delete_evidence(evidence_id: str, *, idempotency_key: str | None = None) -> Plan[DeletionReceipt]:
    """`Mnemo.delete_evidence`: every version of a record and everything derived from it (admin)."""
    reply = yield keyed_write("DELETE", f"/v1/evidence/{segment(evidence_id)}", idempotency_key)
    return parsed(DeletionReceipt, reply.body)


@operation
def delete_session(session_id: str, *, idempotency_key: str | None = None) -> Plan[DeletionReceipt]:
    """`Mnemo.delete_session`: a session, its results, notes and everything derived from them (admin)."""
    reply = yield keyed_write("DELETE", _session(session_id), idempotency_key)
    return parsed(DeletionReceipt, reply.body)


@operation
def delete_owner(owner: str, *, idempotency_key: str | None = None) -> Plan[DeletionReceipt]:
    """`Mnemo.delete_owner`: everything about one person, a data-subject request (admin)."""
    reply = yield keyed_write("DELETE", f"/v1/owners/{segment(owner)}", idempotency_key)
    return parsed(DeletionReceipt, reply.body)


@operation
def verify_deleted(receipt: DeletionReceipt) -> Plan[DeletionCheck]:
    """`Mnemo.verify_deleted`: check every store for anything left of a deletion; ReceiptInvalid
    for a receipt this deployment did not sign."""
    reply = yield read("POST", "/v1/deletions/verify", body=dumped(DeletionReceipt, receipt))
    return DeletionCheck(
        receipt,
        tuple(reply.body["archive_leftovers"]),
        tuple(reply.body["index_leftovers"]),
        reply.body["pending_outbox"],
        # Absent from the answers of servers older than the erasure check.
        reply.body.get("erasure", "done"),
        reply.body.get("erasure_detail", ""),
    )


# ---- citations and health -----------------------------------------------------------------------


@operation
def check_citations(
    citations: Sequence[Citation | Mapping[str, Any]], *, answered_at: datetime | None = None
) -> Plan[CitationReport]:
    """`Mnemo.check_citations`: does each cited evidence exist for the caller, was it in force at
    `answered_at`, does it hold the quote?"""
    body = {
        "citations": [c.to_dict() if isinstance(c, Citation) else dict(c) for c in citations],
        "answered_at": answered_at,
    }
    reply = yield read("POST", "/v1/citations/check", body=jsonable(body))
    return parsed(CitationReport, {**reply.body, "checks": reply.body["citations"]})


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
    body = reply.body
    return Health(
        status="ready" if reply.ok else "not_ready",
        mode=body.get("mode"),
        components={name: parsed(ComponentHealth, c) for name, c in body.get("components", {}).items()},
    )


__all__ = ["OPERATIONS", "ComponentHealth", "Health", "Plan"]
