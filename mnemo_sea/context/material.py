"""What a context is assembled from, as read from the archive and the search for one turn.

The assembler itself (assembler.py) is a pure function of this material, so the same material
always renders the same bytes, and a harness (the context experiment) can assemble scripted
material without a database.
"""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_sea.archive import MemoryFact, TaskState, ToolResult


@dataclass(frozen=True)
class HistoryItem:
    """One result of the session in order, rendered as the live view renders it."""

    result: ToolResult
    rendered: str  # envelope (live), stub (archived) or withheld marker
    protected: bool  # its policy class is never archived, so it is never dropped either
    withheld: bool = False  # above the reader's clearance: a marker without content


@dataclass(frozen=True)
class EvidenceItem:
    """One hydrated search hit."""

    evidence_id: str
    version: int
    kind: str
    source: str
    scope: str
    locator: str
    text: str
    label: str
    score: float
    rank: int  # 1 = best


@dataclass(frozen=True)
class CitedVersionConflict:
    """A confirmed fact of the task state rests on a version of an evidence record that is no
    longer the current one (superseded, or the record was retracted)."""

    evidence_id: str  # the record's id
    cited_as: str  # the evidence_id as the confirmed fact gives it
    cited_version: int
    fact: str
    current_version: int | None  # None: no active version (retracted)
    current_text: str | None  # the current version's statement, or the start of its text
    source: str | None
    scope: str | None
    locator: str | None
    withheld: bool = False  # a newer version exists above the caller's clearance


@dataclass(frozen=True)
class MemoryDisagreement:
    """Two sources disagree on one memory key: the current version and the latest earlier one
    that came from another source with another value."""

    current: MemoryFact
    other: MemoryFact


@dataclass(frozen=True)
class ContextMaterial:
    session_id: str
    instructions: str
    tools: tuple[str, ...]  # each tool definition as the text sent (canonical JSON)
    task_state: TaskState | None
    history: tuple[HistoryItem, ...]
    task_state_withheld: bool = False  # the session has one the caller may not read
    evidence: tuple[EvidenceItem, ...] = ()
    cited_conflicts: tuple[CitedVersionConflict, ...] = ()
    # Keyed by the memory hit's evidence id (memory:<owner>/<key>): shown in place of that hit.
    memory_disagreements: tuple[tuple[str, MemoryDisagreement], ...] = ()
