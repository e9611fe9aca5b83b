"""The system's own operations (search, context, curation, recall, citation checks, ingest), each one's inputs
described once, as a typed record: the archive's operations are in mnemo_sea.archive.rules.operations,
and the same rules hold here (field names are every surface's names; the records are REST's
bodies and MCP's tool inputs; descriptions teach a model the field).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt

from mnemo_sea.archive.rules import limits as cap
from mnemo_sea.archive.rules.excerpts import DEFAULT_AROUND, MAX_AROUND
from mnemo_sea.archive.rules.limits import JsonCap
from mnemo_sea.archive.rules.operations import EvidenceInput, Id, IsoTime, KindName, Operation, Ref
from mnemo_sea.context.assembler import DEFAULT_CANDIDATE_MIN_TOKENS
from mnemo_sea.curation.policy import CurationPolicy

SearchModeName = Literal["hybrid", "bm25", "dense"]

# One tool definition (an object, or its text) and the list of them: each capped, and all of
# them together, before anything is rendered or counted.
ToolDefinition = Annotated[dict[str, Any] | str, JsonCap(cap.TOOL_DEFINITION_CHARS)]
ToolDefinitions = Annotated[
    list[ToolDefinition], Field(max_length=cap.TOOLS), JsonCap(cap.TOOLS_CHARS, values=cap.TOOLS_VALUES)
]

_KINDS = (
    "knowledge (documents), tool_result (notes of archived results), archived_original (pages of "
    "archived originals, agents only), memory (remembered facts), summary (derived summaries)"
)


class SearchOp(Operation):
    """Hybrid search under the caller's tenant, clearance and owner pre-filters."""

    query: str = Field(
        min_length=1,
        max_length=cap.QUERY_CHARS,
        description="What to look for, in words (hybrid BM25 + vector search).",
    )
    limit: StrictInt = Field(10, ge=1, le=100, description="The most hits to return (1-100).")
    mode: SearchModeName = Field(
        "hybrid", description="hybrid (default); bm25 for exact terms and codes; dense for paraphrases."
    )
    kinds: list[KindName] | None = Field(
        None, max_length=cap.FILTER_VALUES, description=f"Only these kinds: {_KINDS}. Default: all."
    )
    scopes: list[Annotated[str, Field(max_length=cap.SCOPE_CHARS)]] | None = Field(
        None, max_length=cap.FILTER_VALUES, description="Only evidence in these scopes. Default: all."
    )
    sources: list[Annotated[str, Field(max_length=cap.SOURCE_CHARS)]] | None = Field(
        None, max_length=cap.FILTER_VALUES, description="Only evidence from these sources. Default: all."
    )
    owners: list[Id] | None = Field(
        None,
        max_length=cap.FILTER_VALUES,
        description="Only hits about these people (a memory fact's owner, an evidence record's or a "
        "session's owner); what belongs to nobody is left out. Default: everything you may read.",
    )
    as_of: IsoTime | None = Field(
        None, description="Search what was current at this time (ISO-8601 with time zone). Default: now."
    )
    min_score: StrictFloat | None = Field(
        None,
        ge=-1,
        le=1,
        allow_inf_nan=False,
        description=(
            "Leave out hits whose relevance (the dense cosine in [-1, 1], raised by a strong BM25 match) "
            "is below this, before limit is counted; a hit holding every query term is always kept. "
            "Not with mode bm25. Default: no floor."
        ),
    )


class ContextOp(Operation):
    """Assemble a session's working context for this turn under a token budget."""

    budget_tokens: StrictInt = Field(
        ge=1,
        description="Your model's whole window in tokens: the context plus the room kept for the answer.",
    )
    output_reserve: StrictInt | None = Field(
        None, ge=0, description="Tokens kept free for the answer. Default: 4096 or a quarter of the budget."
    )
    instructions: str = Field(
        "",
        max_length=cap.INSTRUCTIONS_CHARS,
        description="Your system instructions, placed first and pinned (never cut). Default: none.",
    )
    tools: ToolDefinitions | None = Field(
        None, description="Tool definitions (objects, shown as canonical JSON, or text), pinned after them."
    )
    query: str | None = Field(
        None,
        min_length=1,
        max_length=cap.QUERY_CHARS,
        description="Retrieve evidence for this (hybrid search) and add it after the history.",
    )
    evidence_limit: StrictInt = Field(8, ge=1, le=100, description="The most evidence hits to retrieve.")
    kinds: list[KindName] | None = Field(
        None,
        max_length=cap.FILTER_VALUES,
        description=f"Only these kinds of evidence: {_KINDS}. Default: all.",
    )
    candidate_min_tokens: StrictInt = Field(
        DEFAULT_CANDIDATE_MIN_TOKENS,
        ge=0,
        description="Propose live results of at least this many tokens as archive candidates.",
    )


class CitationInput(Operation):
    """One citation of an answer."""

    evidence_id: Ref = Field(description="The cited evidence id, as search_evidence returned it.")
    quote: str = Field(
        max_length=cap.QUOTE_CHARS,
        description="The words the answer relies on, copied verbatim from the evidence.",
    )
    version: StrictInt | None = Field(None, ge=1, description="The version cited. Default: the one in force.")
    locator: str | None = Field(
        None, max_length=cap.LOCATOR_CHARS, description="Section or page, as search_evidence returned it."
    )


class CheckCitationsOp(Operation):
    """Check an answer's citations against the archive as the caller sees it."""

    citations: list[CitationInput] = Field(
        max_length=cap.CITATIONS, description="The citations of one answer."
    )
    answered_at: IsoTime | None = Field(
        None, description="When the answer is (or was) given (ISO-8601 with time zone). Default: now."
    )


class RecallOp(Operation):
    """Find the line of the session's results that holds a need, and bring back its excerpt."""

    query: str = Field(
        min_length=1,
        max_length=cap.QUERY_CHARS,
        description="What you need, in words, e.g. 'p99 latency of test_23' or 'amoxicillin stock'.",
    )
    around: StrictInt = Field(
        DEFAULT_AROUND, ge=0, le=MAX_AROUND, description="Lines of context before and after the line found."
    )


class GetResultOp(Operation):
    """Look at one result of a session without changing it (recover is what appends a copy)."""

    result_id: str = Field(max_length=cap.RESULT_ID_CHARS, description="The result to look at, like 'r3'.")
    with_content: StrictBool = Field(
        False,
        description="Include what it shows: its original, hash-checked (an excerpt copy: its excerpt).",
    )


class CurateOp(Operation):
    """Set aside what the session no longer needs in view, and bring back what it needs now."""

    budget_tokens: StrictInt = Field(
        CurationPolicy.budget_tokens,
        ge=1,
        description=(
            "The tokens the older live results (not the newest, not protected) should fit in; "
            "past it, the oldest are archived."
        ),
    )
    large_result_tokens: StrictInt = Field(
        CurationPolicy.large_result_tokens,
        ge=1,
        description="A live result this large is archived once newer results followed it.",
    )
    keep_recent: StrictInt = Field(
        CurationPolicy.keep_recent, ge=0, le=1_000, description="The newest results always stay in view."
    )
    need: str | None = Field(
        None,
        min_length=1,
        max_length=cap.QUERY_CHARS,
        description="What the next step needs, in words: recalled first (only the excerpt that holds it).",
    )
    around: StrictInt = Field(
        DEFAULT_AROUND, ge=0, le=MAX_AROUND, description="With need: lines of context around the line found."
    )


class IngestOp(Operation):
    """Store evidence records all or nothing (new versions supersede), then index them."""

    # The ceiling: the archive's policy may hold a batch to fewer (1,000 by default).
    items: list[EvidenceInput] = Field(
        max_length=cap.BATCH_ITEMS, description="Stored all or nothing; at most 1,000."
    )


__all__ = [
    "CheckCitationsOp",
    "CitationInput",
    "ContextOp",
    "CurateOp",
    "IngestOp",
    "RecallOp",
    "SearchModeName",
    "SearchOp",
    "ToolDefinition",
    "ToolDefinitions",
]
