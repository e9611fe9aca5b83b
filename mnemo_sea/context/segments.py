"""What an assembled context is made of: segments, what was left out, what could be archived.

The budget is B = I + T + H + E + O (design note 001): instructions, tool definitions, history,
retrieved evidence and the output reserve; the task state (goal, confirmed state, constraints)
is accounted as a component of its own, so a caller sees what the state costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Component = Literal["instructions", "tools", "task_state", "history", "evidence", "output_reserve"]
COMPONENTS: tuple[Component, ...] = (
    "instructions",
    "tools",
    "task_state",
    "history",
    "evidence",
    "output_reserve",
)

# What a segment is, within its component.
SegmentKind = Literal[
    "instructions",
    "tools",
    "constraints",
    "task_state",
    "withheld_task_state",
    "live_result",
    "protected_result",
    "recovered_copy",
    "archived_stub",
    "withheld_result",
    "evidence",
    "evidence_conflict",
    "memory_conflict",
]


@dataclass(frozen=True)
class Segment:
    """One piece of the context, rendered exactly as sent: it starts with a tag and ends with a
    newline, so the tokens of the whole context are the sum of its segments' tokens."""

    component: Component
    kind: SegmentKind
    text: str
    tokens: int
    ids: tuple[str, ...]  # what it carries: result ids (r3), evidence ids with version (X@4), ...
    pinned: bool  # never dropped or shortened
    priority: int  # higher is kept first; pinned segments are above every priority
    why: str  # the rule that gave the priority (or pinned it), for the accounting

    def to_dict(self, *, with_text: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "component": self.component,
            "kind": self.kind,
            "tokens": self.tokens,
            "ids": list(self.ids),
            "pinned": self.pinned,
            "priority": self.priority,
            "why": self.why,
        }
        if with_text:
            out["text"] = self.text
        return out


@dataclass(frozen=True)
class LeftOut:
    """A segment the budget had no room for, and why."""

    component: Component
    kind: SegmentKind
    ids: tuple[str, ...]
    tokens: int
    priority: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "kind": self.kind,
            "ids": list(self.ids),
            "tokens": self.tokens,
            "priority": self.priority,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ArchiveCandidate:
    """A live result the agent could archive to free room: the assembler proposes, never archives."""

    result_id: str
    tool_name: str
    tokens: int
    observed_at: datetime
    recovered_from: str | None
    left_out: bool  # the budget already had no room for it

    def to_dict(self) -> dict[str, Any]:
        return {
            "result_id": self.result_id,
            "tool_name": self.tool_name,
            "tokens": self.tokens,
            "observed_at": self.observed_at.isoformat(),
            "recovered_from": self.recovered_from,
            "left_out": self.left_out,
        }


@dataclass(frozen=True)
class AssembledContext:
    """The working context of one turn: kept segments in order, and the accounting."""

    session_id: str
    tokenizer: str
    exact: bool  # False only for an explicitly chosen character estimate
    budget_tokens: int
    output_reserve: int
    segments: tuple[Segment, ...]
    left_out: tuple[LeftOut, ...]
    candidates: tuple[ArchiveCandidate, ...]
    task_state_version: int | None
    totals: dict[str, int] = field(default_factory=dict)  # per component, output_reserve included

    @property
    def text(self) -> str:
        """What the model receives (the output reserve is room, not text)."""
        return "".join(s.text for s in self.segments)

    @property
    def used_tokens(self) -> int:
        return sum(s.tokens for s in self.segments)

    @property
    def pinned_tokens(self) -> int:
        return sum(s.tokens for s in self.segments if s.pinned)

    def to_dict(self, *, with_text: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "session_id": self.session_id,
            "tokenizer": self.tokenizer,
            "exact": self.exact,
            "budget_tokens": self.budget_tokens,
            "output_reserve": self.output_reserve,
            "used_tokens": self.used_tokens,
            "pinned_tokens": self.pinned_tokens,
            "free_tokens": self.budget_tokens - self.output_reserve - self.used_tokens,
            "totals": dict(self.totals),
            "task_state_version": self.task_state_version,
            "segments": [s.to_dict(with_text=with_text) for s in self.segments],
            "left_out": [x.to_dict() for x in self.left_out],
            "archive_candidates": [c.to_dict() for c in self.candidates],
        }
        if with_text:
            out["text"] = self.text
        return out
