"""The typed arguments of each agent tool; their JSON Schemas are what `tools/list` publishes.

The schemas check shapes (types, enums, ranges) so a model sees its mistake named by field;
the archive still validates every value itself, so nothing here is the last line of defence.
Unknown fields are refused: a misspelt argument must not be silently ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from mnemo_sea.archive.memory import MAX_TTL

Clearance = Literal["public", "internal", "confidential", "restricted"]
Kind = Literal["knowledge", "tool_result", "memory", "summary"]
Provenance = Literal["document", "user_claim", "user_correction", "tool_fact", "model_inference"]

_SESSION = "The session (conversation) id, e.g. 'visit-2024-05-01'. Result ids are numbered per session."
_RESULT_ID = "A result id issued by record_result in this session, like 'r3'."


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchEvidenceInput(ToolInput):
    query: str = Field(min_length=1, description="What to look for, in words (hybrid BM25 + vector search).")
    limit: int = Field(10, ge=1, le=100, description="The most hits to return (1-100).")
    mode: Literal["hybrid", "bm25", "dense"] = Field(
        "hybrid", description="hybrid (default); bm25 for exact terms and codes; dense for paraphrases."
    )
    kinds: list[Kind] | None = Field(
        None,
        description="Only these kinds: knowledge (documents), tool_result (notes of archived results), "
        "memory (remembered facts), summary (derived summaries). Default: all.",
    )
    scopes: list[str] | None = Field(None, description="Only evidence in these scopes. Default: all.")
    sources: list[str] | None = Field(None, description="Only evidence from these sources. Default: all.")
    as_of: AwareDatetime | None = Field(
        None, description="Search what was current at this time (ISO-8601 with time zone). Default: now."
    )


class RecordResultInput(ToolInput):
    session_id: str = Field(description=_SESSION)
    tool_name: str = Field(description="The tool that produced the result, e.g. 'lab_results'.")
    content: str = Field(description="The tool's output, exactly as returned (stored verbatim).")
    arguments: dict[str, Any] | None = Field(None, description="The arguments the tool was called with.")
    media_type: str | None = Field(
        None, description="The content's media type, e.g. 'application/json'. Default: text/plain."
    )
    observed_at: AwareDatetime | None = Field(
        None, description="When the tool produced it (ISO-8601 with time zone). Default: now."
    )
    sensitivity: Clearance = Field(
        "internal", description="How sensitive the content is; readers need at least this clearance."
    )
    policy_class: str = Field(
        "default",
        description="What kind of evidence this is. Protected classes (prescription_basis, vet_approval, "
        "approval_record, user_confirmed_fact) can never be archived; time-sensitive ones (price, stock, "
        "inventory, availability, approval_progress) come back from recovery with a staleness warning.",
    )
    owner: str | None = Field(
        None, description="The person the session is about. Default: the caller; fixed by the first result."
    )
    idempotency_key: str | None = Field(
        None, description="Optional; retrying with the same key returns the first result instead of a second."
    )


class ArchiveItem(ToolInput):
    result_id: str = Field(description=_RESULT_ID)
    note: str = Field(
        description="Replaces the result in the context: what it held and why it might matter later, "
        "e.g. 'CBC from 2024-05-01: all values normal except ALT 112 (high); relevant to dosing'."
    )


class ArchiveResultsInput(ToolInput):
    session_id: str = Field(description=_SESSION)
    results: list[ArchiveItem] = Field(
        min_length=1,
        description="Every result to archive now, each with its note: one batch, all or nothing.",
    )
    idempotency_key: str | None = Field(
        None, description="Optional; repeating a call with the same key returns the first receipt."
    )


class RecoverResultInput(ToolInput):
    session_id: str = Field(description=_SESSION)
    result_id: str = Field(description="The archived result to bring back, like 'r3'.")


class LiveContextInput(ToolInput):
    session_id: str = Field(description=_SESSION)


class RememberInput(ToolInput):
    owner: str = Field(description="Whose fact this is (a user or patient id).")
    key: str = Field(description="The fact's name, e.g. 'allergy' or 'preferred_pharmacy'.")
    value: str = Field(min_length=1, description="The fact itself; replaces the previous value of the key.")
    provenance: Provenance = Field(
        description="Where it comes from: user_claim, user_correction, document, tool_fact, or "
        "model_inference (a guess: returned as a candidate and not stored)."
    )
    ttl_seconds: int | None = Field(
        None, gt=0, le=int(MAX_TTL.total_seconds()), description="Forget the fact after this many seconds."
    )
    derived_from: str | None = Field(
        None, description="What it came from: 'evidence:<evidence_id>' or 'result:<session_id>/<rN>'."
    )
    idempotency_key: str | None = Field(
        None, description="Optional; retrying with the same key returns the first answer, stores nothing."
    )


class CitationInput(ToolInput):
    evidence_id: str = Field(description="The cited evidence id, as search_evidence returned it.")
    quote: str = Field(description="The words the answer relies on, copied verbatim from the evidence.")
    version: int | None = Field(None, ge=1, description="The version cited. Default: the one in force.")
    locator: str | None = Field(None, description="Section or page, as search_evidence returned it.")


class CheckCitationsInput(ToolInput):
    citations: list[CitationInput] = Field(max_length=1000, description="The citations of one answer.")
    answered_at: AwareDatetime | None = Field(
        None, description="When the answer is (or was) given (ISO-8601 with time zone). Default: now."
    )


class AssembleContextInput(ToolInput):
    session_id: str = Field(description=_SESSION)
    budget_tokens: int = Field(
        ge=1,
        description="Your model's whole window in tokens: the context plus the room kept for the answer.",
    )
    output_reserve: int | None = Field(
        None, ge=0, description="Tokens kept free for the answer. Default: 4096 or a quarter of the budget."
    )
    query: str | None = Field(
        None,
        min_length=1,
        description="Retrieve evidence for this (hybrid search) and add it after the history.",
    )
    instructions: str = Field(
        "", description="Your system instructions, placed first and pinned (never cut). Default: none."
    )


class ConfirmedFactInput(ToolInput):
    fact: str = Field(description="What you hold as settled, in one line.")
    evidence_id: str = Field(
        description="What it rests on: an evidence id from search_evidence (or 'X@3' for one version), "
        "'result:<session>/<rN>' for a tool result, or 'memory:<owner>/<key>'. Summaries are not evidence."
    )
    resolves: str | None = Field(
        None,
        description="An unresolved item or pending operation of the current version this fact settles, "
        "word for word; the item then leaves those lists.",
    )
    version: int | None = Field(
        None, description="Ignored (the archive sets it); accepted so a fact read back can be sent again."
    )
    ref: str | None = Field(None, description="Ignored (the archive sets it), like version.")


class ReleaseInput(ToolInput):
    item: str = Field(
        description="A constraint, unresolved item or pending operation of the current version, "
        "word for word."
    )
    reason: str = Field(description="Why you let go of it, e.g. 'the owner lifted the limit'.")


class UpdateTaskStateInput(ToolInput):
    session_id: str = Field(description=_SESSION)
    goal: str = Field(description="What you are trying to achieve in this session, in one line.")
    confirmed: list[ConfirmedFactInput] = Field(
        default_factory=list,
        description="Every fact you hold as settled, each citing its evidence (carry the current ones over).",
    )
    unresolved: list[str] = Field(default_factory=list, description="What is still unknown, one item each.")
    constraints: list[str] = Field(
        default_factory=list,
        description="What must hold or must not be done (e.g. 'no ivermectin: MDR1 mutant'), kept "
        "word for word.",
    )
    pending_operations: list[str] = Field(
        default_factory=list,
        description="Operations you started whose outcome you do not know yet (e.g. 'refund requested').",
    )
    trace_ref: str | None = Field(None, description="Optional: where the raw trace this condenses lives.")
    release: list[ReleaseInput] = Field(
        default_factory=list,
        description="Items of the current version you drop on purpose, each with the reason.",
    )
    expected_version: int | None = Field(
        None,
        ge=0,
        le=2**31 - 1,
        description="The version you read (0: none yet); the write is refused if another is current by then.",
    )
    owner: str | None = Field(
        None,
        description="The person the session is about. Default: the caller; fixed by the session's first "
        "write.",
    )
    idempotency_key: str | None = Field(
        None, description="Optional; retrying with the same key returns the version first written."
    )


class GetTaskStateInput(ToolInput):
    session_id: str = Field(description=_SESSION)
    version: int | None = Field(
        None, ge=1, le=2**31 - 1, description="One earlier version. Default: the current one."
    )
