"""Request and response bodies of the REST API (pydantic: they are the OpenAPI schema).

Inputs forbid unknown fields, so a misspelt field is a 422 rather than silently ignored.
Domain values the archive returns (frozen dataclasses) are used as response models directly.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mnemo_sea.archive import (
    EvidenceInput,
    EvidenceRecord,
    InvalidInput,
    LiveView,
    Recovered,
    ToolResult,
)
from mnemo_sea.archive.memory import MAX_TTL
from mnemo_sea.context import AssembledContext
from mnemo_sea.context.assembler import DEFAULT_CANDIDATE_MIN_TOKENS
from mnemo_sea.context.segments import Component, SegmentKind
from mnemo_sea.system.citations import CitationCheck, CitationReport

SensitivityName = Literal["public", "internal", "confidential", "restricted"]
T = TypeVar("T")
MAX_TTL_SECONDS = int(MAX_TTL.total_seconds())  # the archive's bound, checked when parsing


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Content(Strict):
    """Exactly one of `content` (text, stored as UTF-8) and `content_base64` (any bytes)."""

    content: str | None = Field(None, description="the original as text (stored as UTF-8 bytes)")
    content_base64: str | None = Field(None, description="the original as base64, for binary data")

    @model_validator(mode="after")
    def _one_content(self) -> Content:
        if (self.content is None) == (self.content_base64 is None):
            raise ValueError("give exactly one of content and content_base64")
        return self

    def payload(self) -> str | bytes:
        if self.content is not None:
            return self.content
        assert self.content_base64 is not None
        try:
            return base64.b64decode(self.content_base64, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput("content_base64", "is not valid base64") from None


class EvidenceIn(Strict):
    body: str = Field(description="the original text of the evidence")
    source: str = Field(description="where it came from (a URL, a file, a system)")
    evidence_id: str | None = Field(
        None, description="stable id; a new body for the same id is a new version"
    )
    scope: str = "default"
    locator: str = Field("", description="where in the source (page, section, row)")
    statement: str | None = Field(None, description="a short claim the evidence supports")
    media_type: str | None = None
    observed_at: datetime | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    sensitivity: SensitivityName | int = "internal"
    provenance: str = "document"
    kind: Literal["knowledge", "tool_result"] = "knowledge"
    owner: str | None = None
    session_id: str | None = None

    def to_input(self) -> EvidenceInput:
        return EvidenceInput(**self.model_dump())


class EvidenceBatchIn(Strict):
    items: list[EvidenceIn] = Field(description="stored all or nothing; at most 1,000")


class IngestOut(BaseModel):
    stored: list[EvidenceRecord]
    new_versions: int
    unchanged: int


class EvidenceOut(BaseModel):
    record: EvidenceRecord
    content: str | None = Field(None, description="the body as text, when asked and valid UTF-8")
    content_base64: str | None = Field(None, description="the body as base64, when asked and not text")


class SearchIn(Strict):
    query: str = Field(description="what to look for (Chinese or English)")
    limit: int = Field(10, ge=1, le=100)
    mode: Literal["hybrid", "bm25", "dense"] = "hybrid"
    kinds: list[str] | None = Field(None, description="knowledge, tool_result, memory, summary")
    scopes: list[str] | None = None
    sources: list[str] | None = None
    as_of: datetime | None = Field(None, description="search what was in force at this time")


class RecordIn(Content):
    tool_name: str
    arguments: dict[str, Any] | None = None
    media_type: str | None = None
    observed_at: datetime | None = None
    sensitivity: SensitivityName | int = "internal"
    policy_class: str = Field("default", description="e.g. protected classes can never be archived")
    owner: str | None = Field(None, description="the user the session is about (default: the caller)")


class TargetIn(Strict):
    result_id: str = Field(description="a result id of the session, like r3")
    note: str = Field(description="the short note that replaces the result in the live view")


class ArchiveIn(Strict):
    targets: list[TargetIn] = Field(description="archived all or nothing")


class LiveItemOut(BaseModel):
    result: ToolResult
    rendered: str


class LiveViewOut(BaseModel):
    session_id: str
    text: str = Field(description="the working context: live envelopes and archive stubs, in order")
    items: list[LiveItemOut]

    @classmethod
    def of(cls, view: LiveView) -> LiveViewOut:
        return cls(
            session_id=view.session_id,
            text=view.text,
            items=[LiveItemOut(result=i.result, rendered=i.rendered) for i in view.items],
        )


class RecoveredOut(BaseModel):
    original: ToolResult
    appended: ToolResult = Field(description="the recovery, appended to the session as a new result")
    content_sha256: str = Field(description="the verified hash of the original bytes")
    content: str | None = Field(None, description="the original as text, when it is valid UTF-8")
    content_base64: str | None = Field(None, description="the original as base64, when it is not text")
    staleness_warning: str | None
    rendered: str = Field(description="the appended result in its envelope, labelled historical")

    @classmethod
    def of(cls, rec: Recovered) -> RecoveredOut:
        text = rec.text
        return cls(
            original=rec.original,
            appended=rec.appended,
            content_sha256=rec.original.content_sha256,
            content=text,
            content_base64=None if text is not None else base64.b64encode(rec.content).decode("ascii"),
            staleness_warning=rec.staleness_warning,
            rendered=rec.rendered,
        )


class RememberIn(Strict):
    owner: str
    key: str = Field(description="letters, digits and . _ : / -; at most 100 characters")
    value: str
    provenance: Literal["document", "user_claim", "user_correction", "tool_fact", "model_inference"]
    ttl_seconds: float | None = Field(
        None,
        gt=0,
        le=MAX_TTL_SECONDS,
        description="stale after this long (price, stock...); at most 100 years",
    )
    derived_from: str | None = Field(None, description="evidence:<id> or result:<session>/<rN>")


class SummaryIn(Strict):
    text: str
    derived_from: list[str] = Field(description="refs: evidence:<id> or result:<session>/<rN>")
    trace_ref: str | None = None


class CitationIn(Strict):
    evidence_id: str
    quote: str
    version: int | None = None
    locator: str | None = None


class CitationsIn(Strict):
    citations: list[CitationIn]
    answered_at: datetime | None = Field(None, description="check against what was in force then")


# ---- context and task state ---------------------------------------------------------------------

MAX_VERSION = 2**31 - 1  # the archive's bound on task state versions


class ContextIn(Strict):
    """The arguments of `Mnemo.context`: what to assemble, under which budget."""

    budget_tokens: int = Field(ge=1, description="the model's whole window: context plus output reserve")
    output_reserve: int | None = Field(
        None, ge=0, description="tokens kept free for the answer; default min(4096, budget / 4)"
    )
    instructions: str = Field("", description="the system instructions, pinned first (verbatim)")
    tools: list[dict[str, Any] | str] | None = Field(
        None, description="tool definitions (objects, shown as canonical JSON, or text), pinned"
    )
    query: str | None = Field(
        None, description="retrieve evidence for this (hybrid search) after the history"
    )
    evidence_limit: int = Field(8, ge=1, le=100, description="the most evidence hits to retrieve")
    kinds: list[str] | None = Field(None, description="only these kinds of evidence (as /v1/search)")
    candidate_min_tokens: int = Field(
        DEFAULT_CANDIDATE_MIN_TOKENS,
        ge=0,
        description="propose live results of at least this many tokens as archive candidates",
    )
    with_text: bool = Field(True, description="include the text of each segment and of the whole context")


class SegmentOut(BaseModel):
    component: Component
    kind: SegmentKind
    tokens: int
    ids: list[str] = Field(description="what it carries: result ids (r3), evidence ids with version (X@4)")
    pinned: bool = Field(description="never dropped or shortened")
    priority: int = Field(description="higher is kept first; pinned segments are above every priority")
    why: str = Field(description="the rule that gave the priority (or pinned it)")
    text: str | None = Field(None, description="the segment as sent; null without with_text")


class ComponentTotals(BaseModel):
    """Tokens per component of B = I + T + H + E + O (the task state on its own)."""

    instructions: int
    tools: int
    task_state: int
    history: int
    evidence: int
    output_reserve: int


class LeftOutOut(BaseModel):
    component: Component
    kind: SegmentKind
    ids: list[str]
    tokens: int
    priority: int
    reason: str = Field(description="why the budget had no room for it")


class ArchiveCandidateOut(BaseModel):
    result_id: str
    tool_name: str
    tokens: int
    observed_at: datetime
    recovered_from: str | None
    left_out: bool = Field(description="the budget already had no room for it")


class ContextOut(BaseModel):
    """An assembled context and its accounting (AssembledContext.to_dict)."""

    session_id: str
    tokenizer: str
    exact: bool = Field(description="false only for an explicitly chosen character estimate")
    budget_tokens: int
    output_reserve: int
    used_tokens: int = Field(description="the tokens of the kept segments (the whole text)")
    pinned_tokens: int
    free_tokens: int = Field(description="budget - output reserve - used")
    totals: ComponentTotals
    task_state_version: int | None
    segments: list[SegmentOut] = Field(description="the kept segments, in the order sent")
    left_out: list[LeftOutOut] = Field(description="segments the budget had no room for, and why")
    archive_candidates: list[ArchiveCandidateOut] = Field(
        description="live results the agent could archive (with a note) to free room; never archived here"
    )
    text: str | None = Field(None, description="what the model receives; null without with_text")

    @classmethod
    def of(cls, context: AssembledContext, *, with_text: bool) -> ContextOut:
        return cls.model_validate(context.to_dict(with_text=with_text))


class ConfirmedIn(Strict):
    fact: str = Field(description="what is settled")
    evidence_id: str = Field(
        description="what it rests on: an evidence id (X or X@3), result:<session>/<rN> or "
        "memory:<owner>/<key>"
    )
    resolves: str | None = Field(None, description="the open item of the current version this fact settles")
    version: int | None = Field(
        None, description="ignored (the archive sets it): accepted so a fact read back can be sent again"
    )
    ref: str | None = Field(None, description="ignored (the archive sets it), like version")


class ReleaseIn(Strict):
    item: str = Field(description="a constraint, unresolved item or pending operation of the current version")
    reason: str = Field(description="why it is let go of")


class TaskStateIn(Strict):
    """The next version of a session's task state, whole: what is left out of it is dropped, and a
    dropped constraint or open item needs a release reason (or a fact that settles it)."""

    goal: str
    confirmed: list[ConfirmedIn] = Field(
        default_factory=list, description="facts held as settled, with evidence"
    )
    unresolved: list[str] = Field(default_factory=list, description="what is still unknown")
    constraints: list[str] = Field(default_factory=list, description="what must hold (or not be done)")
    pending_operations: list[str] = Field(
        default_factory=list, description="operations started whose outcome is not known yet"
    )
    trace_ref: str | None = Field(None, description="where the raw trace it was condensed from lives")
    release: list[ReleaseIn] = Field(
        default_factory=list, description="items of the current version let go of on purpose"
    )
    expected_version: int | None = Field(
        None,
        ge=0,
        le=MAX_VERSION,
        description="write only if this version is current (0: none yet); else 409",
    )
    owner: str | None = Field(None, description="the user the session is about, when this write creates it")

    def update(self) -> dict[str, Any]:
        """The keyword arguments of `Mnemo.update_task_state`."""
        return {
            "goal": self.goal,
            "confirmed": [c.model_dump(exclude={"version", "ref"}) for c in self.confirmed],
            "unresolved": self.unresolved,
            "constraints": self.constraints,
            "pending_operations": self.pending_operations,
            "trace_ref": self.trace_ref,
            "release": [r.model_dump() for r in self.release],
            "expected_version": self.expected_version,
            "owner": self.owner,
        }


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_offset: int | None = Field(description="pass as offset for the next page; null on the last")


def page(items: list[T], offset: int, limit: int) -> Page[T]:
    window = items[offset : offset + limit]
    more = offset + limit < len(items)
    return Page[T](items=window, next_offset=offset + limit if more else None)


def encode_content(content: bytes | None) -> tuple[str | None, str | None]:
    if content is None:
        return None, None
    try:
        return content.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, base64.b64encode(content).decode("ascii")


class CitationReportOut(BaseModel):
    answered_at: datetime
    checked_at: datetime
    total: int
    ok: int
    precision: float | None = Field(description="ok / total; null with no citations")
    counts: dict[str, int] = Field(description="citations per verdict")
    citations: list[CitationCheck]

    @classmethod
    def of(cls, report: CitationReport) -> CitationReportOut:
        return cls(
            answered_at=report.answered_at,
            checked_at=report.checked_at,
            total=report.total,
            ok=report.ok,
            precision=report.precision,
            counts=report.counts,
            citations=list(report.checks),
        )
