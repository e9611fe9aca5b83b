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
from mnemo_sea.citations import CitationCheck, CitationReport

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
