"""The system's own operations (search, context, citation checks, ingest), each one's inputs
described once, as a typed record: the archive's operations are in mnemo_sea.archive.operations,
and the same rules hold here (field names are every surface's names; the records are REST's
bodies and MCP's tool inputs; descriptions teach a model the field).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, Field

from mnemo_sea.archive.operations import EvidenceInput, KindName, Operation
from mnemo_sea.context.assembler import DEFAULT_CANDIDATE_MIN_TOKENS

SearchModeName = Literal["hybrid", "bm25", "dense"]

_KINDS = (
    "knowledge (documents), tool_result (notes of archived results), memory (remembered facts), "
    "summary (derived summaries)"
)


class SearchOp(Operation):
    """Hybrid search under the caller's tenant, clearance and owner pre-filters."""

    query: str = Field(min_length=1, description="What to look for, in words (hybrid BM25 + vector search).")
    limit: int = Field(10, ge=1, le=100, description="The most hits to return (1-100).")
    mode: SearchModeName = Field(
        "hybrid", description="hybrid (default); bm25 for exact terms and codes; dense for paraphrases."
    )
    kinds: list[KindName] | None = Field(None, description=f"Only these kinds: {_KINDS}. Default: all.")
    scopes: list[str] | None = Field(None, description="Only evidence in these scopes. Default: all.")
    sources: list[str] | None = Field(None, description="Only evidence from these sources. Default: all.")
    as_of: AwareDatetime | None = Field(
        None, description="Search what was current at this time (ISO-8601 with time zone). Default: now."
    )


class ContextOp(Operation):
    """Assemble a session's working context for this turn under a token budget."""

    budget_tokens: int = Field(
        ge=1,
        description="Your model's whole window in tokens: the context plus the room kept for the answer.",
    )
    output_reserve: int | None = Field(
        None, ge=0, description="Tokens kept free for the answer. Default: 4096 or a quarter of the budget."
    )
    instructions: str = Field(
        "", description="Your system instructions, placed first and pinned (never cut). Default: none."
    )
    tools: list[dict[str, Any] | str] | None = Field(
        None, description="Tool definitions (objects, shown as canonical JSON, or text), pinned after them."
    )
    query: str | None = Field(
        None,
        min_length=1,
        description="Retrieve evidence for this (hybrid search) and add it after the history.",
    )
    evidence_limit: int = Field(8, ge=1, le=100, description="The most evidence hits to retrieve.")
    kinds: list[KindName] | None = Field(
        None, description=f"Only these kinds of evidence: {_KINDS}. Default: all."
    )
    candidate_min_tokens: int = Field(
        DEFAULT_CANDIDATE_MIN_TOKENS,
        ge=0,
        description="Propose live results of at least this many tokens as archive candidates.",
    )


class CitationInput(Operation):
    """One citation of an answer."""

    evidence_id: str = Field(description="The cited evidence id, as search_evidence returned it.")
    quote: str = Field(description="The words the answer relies on, copied verbatim from the evidence.")
    version: int | None = Field(None, ge=1, description="The version cited. Default: the one in force.")
    locator: str | None = Field(None, description="Section or page, as search_evidence returned it.")


class CheckCitationsOp(Operation):
    """Check an answer's citations against the archive as the caller sees it."""

    citations: list[CitationInput] = Field(max_length=1000, description="The citations of one answer.")
    answered_at: AwareDatetime | None = Field(
        None, description="When the answer is (or was) given (ISO-8601 with time zone). Default: now."
    )


class IngestOp(Operation):
    """Store evidence records all or nothing (new versions supersede), then index them."""

    # No bound here: the archive's policy says how many one batch may hold (1,000 by default).
    items: list[EvidenceInput] = Field(description="Stored all or nothing; at most 1,000 by default.")


__all__ = [
    "CheckCitationsOp",
    "CitationInput",
    "ContextOp",
    "IngestOp",
    "SearchModeName",
    "SearchOp",
]
