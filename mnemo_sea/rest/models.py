"""Request and response bodies of the REST API (pydantic: they are the OpenAPI schema).

Request bodies are the operation records of mnemo_sea.archive.rules.operations and
mnemo_sea.system.operations, or compositions of them: the same fields, types and descriptions
as the Python facade and the MCP tools, the session coming from the path and the idempotency key
from the `Idempotency-Key` header. Only what HTTP itself needs is declared here: originals as
text or base64 (`Content`) and `with_text` of the context. Records forbid unknown fields, so a
misspelt field is a 422 rather than silently ignored. Every text, list and object of a body is
capped (mnemo_sea/archive/rules/limits.py) and every number and boolean is strict (`true` is not 1,
`"1000"` not 1000): a body over a cap or of a wrong type is refused before any work. Domain
values the archive returns (frozen dataclasses) are used as response models directly.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
from datetime import datetime
from typing import Annotated, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from mnemo_sea.archive import (
    ArchiveReceipt,
    EvidenceRecord,
    InvalidInput,
    LiveView,
    Recovered,
    ResultMetadata,
    ToolResult,
)
from mnemo_sea.archive import limits as cap
from mnemo_sea.context import AssembledContext
from mnemo_sea.context.segments import Component, SegmentKind
from mnemo_sea.system.citations import CitationCheck, CitationReport
from mnemo_sea.system.curating import CurationReport, RecallResult, RecallStatus
from mnemo_sea.system.json_ready import content_fields
from mnemo_sea.system.operations import ContextOp

T = TypeVar("T")


class Content(BaseModel):
    """An original over HTTP: exactly one of `content` (text, stored as UTF-8) and
    `content_base64` (any bytes)."""

    model_config = ConfigDict(extra="forbid")

    content: Annotated[str, cap.ContentCap(cap.CONTENT_BYTES)] | None = Field(
        None, description="the original as text (stored as UTF-8 bytes)"
    )
    content_base64: Annotated[str, cap.ContentCap(cap.CONTENT_BYTES, base64=True)] | None = Field(
        None, description="the original as base64, for binary data"
    )

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


class RecordIn(ResultMetadata, Content):
    """`RecordOp` over HTTP: its content as text or base64 (`Content`)."""


class ContextIn(ContextOp):
    """`ContextOp`, and whether the answer carries the text (REST's own: an answer's shape)."""

    with_text: StrictBool = Field(
        True, description="include the text of each segment and of the whole context"
    )


class IngestOut(BaseModel):
    stored: list[EvidenceRecord]
    new_versions: int
    unchanged: int


class EvidenceOut(BaseModel):
    record: EvidenceRecord
    content: str | None = Field(None, description="the body as text, when asked and valid UTF-8")
    content_base64: str | None = Field(None, description="the body as base64, when asked and not text")


class ResultOut(BaseModel):
    result: ToolResult
    content: str | None = Field(
        None, description="what the result shows, as text, when asked and valid UTF-8"
    )
    content_base64: str | None = Field(None, description="what the result shows, as base64, when not text")


class LiveItemOut(BaseModel):
    result: ToolResult
    rendered: str
    superseded_by: str | None = Field(
        None, description="a later result of the same call (tool and arguments) that replaced this one"
    )


class LiveViewOut(BaseModel):
    session_id: str
    text: str = Field(description="the working context: live envelopes and archive stubs, in order")
    items: list[LiveItemOut]

    @classmethod
    def of(cls, view: LiveView) -> LiveViewOut:
        return cls(
            session_id=view.session_id,
            text=view.text,
            items=[
                LiveItemOut(result=i.result, rendered=i.rendered, superseded_by=i.superseded_by)
                for i in view.items
            ],
        )


class RecoveredOut(BaseModel):
    original: ToolResult
    appended: ToolResult = Field(
        description="the recovery, appended to the session as a new result (`excerpt` set for an excerpt)"
    )
    content_sha256: str = Field(description="the verified hash of the whole original's bytes")
    excerpt_sha256: str | None = Field(
        None, description="for an excerpt, the hash of its bytes (`content`), cut from the verified original"
    )
    content: str | None = Field(
        None, description="the original (or the excerpt) as text, when it is valid UTF-8"
    )
    content_base64: str | None = Field(None, description="the same as base64, when it is not text")
    staleness_warning: str | None
    rendered: str = Field(description="the appended result in its envelope, labelled historical")

    @classmethod
    def of(cls, rec: Recovered) -> RecoveredOut:
        excerpt = rec.appended.excerpt is not None
        return cls(
            original=rec.original,
            appended=rec.appended,
            content_sha256=rec.original.content_sha256,
            excerpt_sha256=hashlib.sha256(rec.content).hexdigest() if excerpt else None,
            **content_fields(rec.content),
            staleness_warning=rec.staleness_warning,
            rendered=rec.rendered,
        )


class RecallOut(BaseModel):
    """What a recall found (Mnemo.recall): `recovered` with the excerpt that holds the need,
    `in_view` when a live result holds it, `ambiguous` when lines far apart hold it alike (too
    many to bring back), `not_found` with every result checked."""

    query: str
    status: RecallStatus
    checked: list[str] = Field(description="every result read, in order")
    result_id: str | None = Field(None, description="the result that holds the need")
    lines: tuple[int, int] | None = Field(None, description="where it holds it: [first, last] line")
    score: float | None = Field(None, description="the share of the need's terms the result carries")
    recovered: RecoveredOut | None = Field(None, description="the excerpt appended to the session")

    @classmethod
    def of(cls, found: RecallResult) -> RecallOut:
        return cls(
            query=found.query,
            status=found.status,
            checked=list(found.checked),
            result_id=found.result_id,
            lines=found.lines,
            score=found.score,
            recovered=None if found.recovered is None else RecoveredOut.of(found.recovered),
        )


class ArchivedByPolicyOut(BaseModel):
    result_id: str
    reason: str = Field(description="large: a large result newer ones followed; budget: the oldest, to fit")
    tokens: int
    note: str = Field(description="the automatic note that replaced it")


class CurationOut(BaseModel):
    """What curate did (Mnemo.curate)."""

    session_id: str
    archived: list[ArchivedByPolicyOut]
    live_tokens_before: int
    live_tokens_after: int
    receipt: ArchiveReceipt | None = Field(None, description="the archive batch; null when nothing was due")
    recall: RecallOut | None = Field(None, description="what `need` brought back, when one was given")

    @classmethod
    def of(cls, report: CurationReport) -> CurationOut:
        return cls(
            session_id=report.session_id,
            archived=[ArchivedByPolicyOut(**dataclasses.asdict(a)) for a in report.archived],
            live_tokens_before=report.live_tokens_before,
            live_tokens_after=report.live_tokens_after,
            receipt=report.receipt,
            recall=None if report.recall is None else RecallOut.of(report.recall),
        )


# ---- context and task state ---------------------------------------------------------------------


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


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_offset: int | None = Field(description="pass as offset for the next page; null on the last")


def page(items: list[T], offset: int, limit: int) -> Page[T]:
    """The page at `offset` of a whole list."""
    window = items[offset : offset + limit]
    more = offset + limit < len(items)
    return Page[T](items=window, next_offset=offset + limit if more else None)


def read_ahead_page(found: list[T], offset: int, limit: int) -> Page[T]:
    """The page at `offset` of a listing paged in SQL and read with one item more than `limit`:
    the extra item is not shown, it only says that another page follows."""
    return Page[T](items=found[:limit], next_offset=offset + limit if len(found) > limit else None)


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
