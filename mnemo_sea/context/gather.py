"""One turn's material, read from the archive through its access-checked operations.

Everything here reads as the calling principal: the live view (which withholds results above
the caller's clearance), the task state, the current version of every evidence record a
confirmed fact cites, and the history of every memory key search returned, so contradictions
can be shown side by side instead of resolved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnemo_sea.archive import (
    EVIDENCE_REF_PREFIX,
    Archive,
    Forbidden,
    IndexId,
    InvalidInput,
    MemoryFact,
    MemoryIndexId,
    NotFound,
    Principal,
    ResultIndexId,
    TaskState,
    limits,
    parse_index_id,
)

from . import render
from .material import (
    CitedVersionConflict,
    ContextMaterial,
    EvidenceItem,
    HistoryItem,
    MemoryDisagreement,
)

MAX_INSTRUCTIONS_CHARS = limits.INSTRUCTIONS_CHARS
MAX_TOOLS = limits.TOOLS
CURRENT_TEXT_CHARS = 400  # of a current version without a statement, shown in a conflict
_USER = frozenset({"user_claim", "user_correction"})


def check_instructions(instructions: object) -> str:
    if not isinstance(instructions, str):
        raise InvalidInput("instructions", f"must be text, got {type(instructions).__name__}")
    if len(instructions) > MAX_INSTRUCTIONS_CHARS:
        raise InvalidInput(
            "instructions", f"{len(instructions)} characters; at most {MAX_INSTRUCTIONS_CHARS}"
        )
    return instructions


def tool_texts(tools: Sequence[Mapping[str, Any] | str] | None) -> tuple[str, ...]:
    if tools is None:
        return ()
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        raise InvalidInput("tools", "must be a list of tool definitions (objects or text)")
    if len(tools) > MAX_TOOLS:
        raise InvalidInput("tools", f"{len(tools)} tool definitions; at most {MAX_TOOLS}")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, str | Mapping):
            raise InvalidInput(f"tools[{i}]", f"must be an object or text, got {type(tool).__name__}")
        out.append(render.tool_definition(tool))
    return tuple(out)


def _source(fact: MemoryFact) -> str:
    """Where a memory version came from: what the user said (claim or correction) is one source."""
    if fact.derived_from:
        return fact.derived_from
    return "user" if fact.provenance in _USER else fact.provenance


def memory_disagreement(history: Sequence[MemoryFact], current: MemoryFact) -> MemoryDisagreement | None:
    """The latest version before `current` that another source wrote with another value."""
    for other in reversed([f for f in history if f.version < current.version]):
        if _source(other) != _source(current) and other.value != current.value:
            return MemoryDisagreement(current=current, other=other)
    return None


def cited_conflicts(
    archive: Archive, principal: Principal, state: TaskState | None
) -> tuple[CitedVersionConflict, ...]:
    """The task state's facts that rest on an evidence version no longer current (also used by a
    harness that builds the history itself, like the context experiment)."""
    out: list[CitedVersionConflict] = []
    if state is None:
        return ()
    for fact in state.confirmed:
        if fact.version is None or fact.ref is None or not fact.ref.startswith(EVIDENCE_REF_PREFIX):
            continue  # a result or a memory fact, not a versioned evidence record
        # The stored ref names the record: an id may itself contain `@`.
        record_id = fact.ref.removeprefix(EVIDENCE_REF_PREFIX)
        try:
            current, content = archive.get_evidence(principal, record_id, with_content=True)
        except NotFound:
            out.append(
                CitedVersionConflict(
                    record_id, fact.evidence_id, fact.version, fact.fact, None, None, None, None, None
                )
            )
            continue
        except Forbidden:
            # A newer version above the caller's clearance: the conflict is shown, its text is not.
            out.append(
                CitedVersionConflict(
                    record_id, fact.evidence_id, fact.version, fact.fact, None, None, None, None, None, True
                )
            )
            continue
        if current.version == fact.version:
            continue
        text = current.statement
        if not text and content is not None:
            decoded = content.decode("utf-8", "replace")
            text = decoded[:CURRENT_TEXT_CHARS] + ("…" if len(decoded) > CURRENT_TEXT_CHARS else "")
        out.append(
            CitedVersionConflict(
                record_id,
                fact.evidence_id,
                fact.version,
                fact.fact,
                current.version,
                text,
                current.source,
                current.scope,
                current.locator,
            )
        )
    return tuple(out)


def _note_of(session_id: str, named: IndexId | None) -> bool:
    return isinstance(named, ResultIndexId) and named.session_id == session_id


def gather(
    archive: Archive,
    principal: Principal,
    session_id: str,
    *,
    instructions: str,
    tools: tuple[str, ...],
    evidence: Sequence[EvidenceItem] = (),
) -> ContextMaterial:
    """Read the session's live view and task state, and check `evidence` (hydrated search hits)
    and the task state's citations for contradictions."""
    view = archive.live_view(principal, session_id)
    protected = archive.policy.protected_classes
    history = tuple(
        HistoryItem(
            result=item.result,
            rendered=item.rendered,
            protected=item.result.policy_class in protected and item.result.state == "live",
            withheld=not principal.can_read(item.result.sensitivity),
        )
        for item in view.items
    )
    withheld_state = False
    try:
        state = archive.task_state(principal, session_id)
    except Forbidden:
        # Above the caller's clearance, or repeating another owner's data: the context still
        # assembles, with a marker where the state would be (as the live view withholds results).
        state, withheld_state = None, True
    conflicts = cited_conflicts(archive, principal, state)
    # An archived note of this session is in the history already, as its stub.
    hits = [e for e in evidence if not _note_of(session_id, parse_index_id(e.evidence_id))]
    disagreements: list[tuple[str, MemoryDisagreement]] = []
    for hit in hits:
        named = parse_index_id(hit.evidence_id)
        if hit.kind != "memory" or not isinstance(named, MemoryIndexId):
            continue
        versions = archive.memory_history(principal, named.owner, named.key)
        current = next((f for f in versions if f.version == hit.version), None)
        found = memory_disagreement(versions, current) if current is not None else None
        if found is not None:
            disagreements.append((hit.evidence_id, found))
    return ContextMaterial(
        session_id=session_id,
        instructions=instructions,
        tools=tools,
        task_state=state,
        task_state_withheld=withheld_state,
        history=history,
        evidence=tuple(hits),
        cited_conflicts=conflicts,
        memory_disagreements=tuple(disagreements),
    )
