"""What the index is given: one version of one evidence record, with its text.

The text is only read to build vectors; it is never stored in the index. What the index keeps
is the pointer (tenant, evidence id, version, chunk span, content hash) and the filter fields,
so a hit is always hydrated from the archive and can be quoted exactly by its span.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from . import fields
from .errors import InvalidDocument

# A heading is a label, searched with each chunk: long enough for a tool call's arguments.
MAX_HEADING_CHARS = 512


def sha256_hex(text: str) -> str:
    """The content hash used everywhere in retrieval: sha256 of the UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EvidenceDocument:
    """One version of an evidence record as the index needs it.

    `sensitivity` is an ordinal (the archive's Sensitivity: 0 public ... 3 restricted); a reader
    sees a document when `sensitivity <= clearance`. `owner` is set for user-scoped memory only.
    `valid_from`/`valid_until` must be timezone-aware; None means open-ended.
    `content_sha256`, when given, must match `text` (it is the archive's hash of these bytes, and a
    mismatch means the caller is indexing different text from what the archive holds).
    `heading` (at most MAX_HEADING_CHARS, one line) is searched with every chunk but is no part
    of any span: what a chunk cut from the middle of a long text is about (an archived tool
    result's call: its tool and arguments), so a query naming it finds the chunk too.

    Raises InvalidDocument on any malformed field.
    """

    tenant_id: str
    evidence_id: str
    version: int
    text: str
    kind: str = "knowledge"
    source: str = "unknown"
    scope: str = "default"
    owner: str | None = None
    sensitivity: int = 0
    status: str = "active"
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    content_sha256: str = ""
    heading: str = ""

    def __post_init__(self) -> None:
        fields.identifier("tenant_id", self.tenant_id)
        fields.evidence_id(self.evidence_id)
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise InvalidDocument("version", f"{self.version!r} is not a positive integer", self.evidence_id)
        if not isinstance(self.text, str):
            raise InvalidDocument(
                "text", f"must be a string, got {type(self.text).__name__}", self.evidence_id
            )
        if not isinstance(self.heading, str) or len(self.heading) > MAX_HEADING_CHARS or "\n" in self.heading:
            raise InvalidDocument(
                "heading", f"must be one line of at most {MAX_HEADING_CHARS} characters", self.evidence_id
            )
        fields.one_of("kind", self.kind, fields.KINDS)
        fields.one_of("status", self.status, fields.STATUSES)
        fields.label("source", self.source)
        fields.label("scope", self.scope)
        if self.owner is not None:
            fields.identifier("owner", self.owner)
        if (
            isinstance(self.sensitivity, bool)
            or not isinstance(self.sensitivity, int)
            or self.sensitivity < 0
        ):
            raise InvalidDocument(
                "sensitivity", f"{self.sensitivity!r} is not a non-negative integer", self.evidence_id
            )
        object.__setattr__(self, "sensitivity", int(self.sensitivity))  # IntEnum -> plain int
        try:
            start, end = fields.epoch_window(self.valid_from, self.valid_until)
        except ValueError as exc:
            raise InvalidDocument("valid_from/valid_until", str(exc), self.evidence_id) from None
        if end <= start:
            raise InvalidDocument("valid_until", "must be later than valid_from", self.evidence_id)
        digest = sha256_hex(self.text)
        if not self.content_sha256:
            object.__setattr__(self, "content_sha256", digest)
        elif self.content_sha256 != digest:
            raise InvalidDocument(
                "content_sha256",
                f"{self.content_sha256} is not the sha256 of the text ({digest})",
                self.evidence_id,
            )

    @classmethod
    def prechecked(
        cls,
        tenant_id: str,
        evidence_id: str,
        version: int,
        text: str,
        *,
        kind: str,
        source: str,
        scope: str,
        owner: str | None,
        sensitivity: int,
        status: str,
        valid_from: datetime | None,
        valid_until: datetime | None,
        content_sha256: str,
        heading: str = "",
    ) -> EvidenceDocument:
        """The document of these values without `__post_init__`'s checks, which cost more than
        the rest of building it (~3 us a document, a tenth of a batch's bookkeeping around the
        index). Only for a caller that held every value to those same rules a moment ago: the
        system's indexer, for the versions an archive write of its own process validated and
        made (mnemo_sea/system/projection/index_documents.py; tests/system/
        test_prechecked_documents.py holds the two layers' rules equal and each such document
        equal to the checked one). `sensitivity` a plain int and `content_sha256` the sha256 of
        `text`, as the checks would leave them; everyone else builds a document the usual way."""
        doc = object.__new__(cls)
        # Attribute by attribute: the instance keeps its values inline (`vars(doc).update`
        # would give it a dict of its own, one more object per document for the collector).
        set_value = object.__setattr__
        set_value(doc, "tenant_id", tenant_id)
        set_value(doc, "evidence_id", evidence_id)
        set_value(doc, "version", version)
        set_value(doc, "text", text)
        set_value(doc, "kind", kind)
        set_value(doc, "source", source)
        set_value(doc, "scope", scope)
        set_value(doc, "owner", owner)
        set_value(doc, "sensitivity", sensitivity)
        set_value(doc, "status", status)
        set_value(doc, "valid_from", valid_from)
        set_value(doc, "valid_until", valid_until)
        set_value(doc, "content_sha256", content_sha256)
        set_value(doc, "heading", heading)
        return doc

    @property
    def valid_from_epoch(self) -> float:
        return fields.epoch_seconds(self.valid_from) if self.valid_from else fields.BEGINNING_OF_TIME

    @property
    def valid_until_epoch(self) -> float:
        return fields.epoch_seconds(self.valid_until) if self.valid_until else fields.END_OF_TIME


@dataclass(frozen=True)
class Chunk:
    """A span of a document's text: `text == document.text[start:end]` always holds."""

    index: int
    start: int
    end: int
    text: str
