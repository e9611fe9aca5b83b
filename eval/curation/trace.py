"""Scripted agent traces for the context-curation experiment (`mnemo-sea eval context`).

A trace is what an agent did in one task, with no model: the user's goal and constraints, the
tool calls it made (content given, or produced by a named deterministic generator), the archive
and recover decisions a scripted agent took, the moments it needed an exact fact (`need`: a
quote that must be in front of it, or recoverable), its answers with citations, clock advances
and injected faults. Every arm of the experiment replays the same trace.

Format `mnemo-sea/context-trace/1` (JSON; a file holds one trace or a list of traces):

    {"format": "mnemo-sea/context-trace/1", "trace_id": "f2-vet-s1", "family": "F2",
     "tenant": "clinic", "session_id": "visit-1", "owner": "pet-7",
     "instructions": "...", "goal": "...", "constraints": ["..."],
     "events": [
       {"type": "tool_call", "label": "lab_log", "tool": "lab.log", "arguments": {},
        "content": "..." | "generator": {"name": "log", "size": 250000, "seed": 3},
        "policy_class": "default", "observed_at": "2026-11-30T09:00:00+08:00",
        "note": "the note a scripted agent leaves when it archives this result",
        "reread": "stable" | {"content": "..."} | {"generator": {...}}},
       {"type": "archive", "labels": ["lab_log"]},
       {"type": "recover", "label": "lab_log"},
       {"type": "need", "fact": "mdr1", "quote": "MDR1 mut/mut", "source": "lab_mdr1", "query": "MDR1"},
       {"type": "answer", "text": "...", "citations": [{"source": "lab_mdr1", "quote": "..."}]},
       {"type": "clock", "hours": 24},
       {"type": "task", "goal": "...", "constraints": ["..."]},
       {"type": "evidence", "evidence_id": "policy:refund", "body": "...", "statement": "...",
        "source": "policy", "scope": "domestic", "locator": "section-2"},
       {"type": "state", "confirmed": [{"fact": "...", "source": "lab_mdr1"}],
        "unresolved": ["..."], "pending_operations": [], "release": [{"item": "...", "reason": "..."}]},
       {"type": "summary", "text": "...", "sources": ["tracking_log"]},
       {"type": "fault", "kind": "store_down"}
     ]}

Format 1.1 (`mnemo-sea/context-trace/1.1`) adds:

    {"type": "tool_calls", "calls": [{"label": ..., "tool": ..., ...}, ...]}   parallel calls
    {"type": "assistant", "text": "..."}                                        what the model wrote
    a tool call's "injected": ["..."] (instructions planted in its output, exact substrings) and
    "supersedes": "<label>" (it replaces that earlier result); an evidence event's "supersedes":
    "<evidence id>" (that record is withdrawn); a need's "sources": ["a", "b"] (either serves); a
    citation's "source": "evidence:<id>" or "evidence:<id>@<version>"; quotes holding & < >
    (matched as an envelope shows them, escaped).

`reread` (optional) says the call is read-only and may be run again by a baseline that needs its
result out of view: `stable` (a file, a fixed report: the same output) or what a run returns
now (a stock level, a rotating log, a page that changed: the output may no longer hold what
the first run did). Without it the call is not to be run again (an action, an approval).
`source` and `label` name a tool call of the same trace (a `state` fact's `source` may also be
`evidence:<id>`). Times are ISO-8601 with a zone. `evidence` stores a knowledge record (a second
event with the same id is its next version, superseding the first); `state` is a scripted task
state update; `summary` a derived summary an earlier step wrote (possibly wrong: design note 001's
"an old summary that wrote an unknown result as failed").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

TRACE_FORMAT = "mnemo-sea/context-trace/1"
# 1.1 adds parallel `tool_calls`, `assistant` text, `injected` and `supersedes` on a tool call,
# `supersedes` on evidence, a need's second source (`sources`), citations of evidence records and
# quotes holding & < >. A trace is written as /1 unless it uses one of them, so /1 readers and
# the frozen digests of /1 traces are unaffected.
TRACE_FORMAT_1_1 = "mnemo-sea/context-trace/1.1"
TRACE_FORMATS = (TRACE_FORMAT, TRACE_FORMAT_1_1)
EVIDENCE_SOURCE = "evidence:"  # a citation's or a state fact's source naming a knowledge record
FaultKind = Literal["store_down", "tamper", "cross_tenant_recover", "bad_batch"]


@dataclass(frozen=True)
class Generated:
    """Content made by a deterministic generator (see generators.py): same arguments, same bytes."""

    name: str
    size: int
    seed: int
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reread:
    """How the call runs again: `current` is what a run returns now; None: stable, the original."""

    current: str | Generated | None = None


@dataclass(frozen=True)
class ToolCall:
    label: str
    tool: str
    arguments: dict[str, Any]
    content: str | Generated
    policy_class: str
    observed_at: datetime
    note: str | None  # what a scripted agent writes when it archives this result
    reread: Reread | None = None  # None: not read-only, never run again
    injected: tuple[str, ...] = ()  # instructions planted in the output (exact substrings of it)
    supersedes: str | None = None  # the label of an earlier call whose result this one replaces


@dataclass(frozen=True)
class ToolCalls:
    """Several calls the model made in one request (parallel tool use): their results are
    recorded in order and one turn follows them all."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class Said:
    """Text the model wrote between its calls; part of every prompt after it, in every arm."""

    text: str


@dataclass(frozen=True)
class Archive:
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Recover:
    """The scripted agent recovers `label`'s original: whole, or, with `match`, only the lines
    around the first occurrence of that text (the archive's excerpt recovery)."""

    label: str
    match: str | None = None


@dataclass(frozen=True)
class Need:
    """At this step the agent needs `quote` (an exact substring of `source`'s original)."""

    fact: str
    quote: str
    source: str
    query: str  # what a policy searches the archived notes with when the quote is not in view
    also: tuple[str, ...] = ()  # other calls whose originals hold the quote too: either serves

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.source, *self.also)


@dataclass(frozen=True)
class Citation:
    """`source`: a tool call's label, or `evidence:<id>` (its current version) or
    `evidence:<id>@<version>` (that version) for a knowledge record."""

    source: str
    quote: str

    @property
    def evidence(self) -> tuple[str, int | None] | None:
        """(id, version) of the knowledge record cited, or None for a tool call's result."""
        if not self.source.startswith(EVIDENCE_SOURCE):
            return None
        eid, at, version = self.source.removeprefix(EVIDENCE_SOURCE).rpartition("@")
        return (eid, int(version)) if at else (version, None)


@dataclass(frozen=True)
class Answer:
    text: str
    citations: tuple[Citation, ...]


@dataclass(frozen=True)
class Clock:
    hours: float


@dataclass(frozen=True)
class Task:
    """A pivot to a new task in the same session (F1): the goal and constraints change."""

    goal: str
    constraints: tuple[str, ...]


@dataclass(frozen=True)
class Evidence:
    evidence_id: str
    body: str
    statement: str | None
    source: str
    scope: str
    locator: str
    supersedes: str | None = None  # another record's id this one replaces (withdrawn when stored)


@dataclass(frozen=True)
class StateFact:
    fact: str
    source: str  # a tool call's label, or evidence:<id>


@dataclass(frozen=True)
class Released:
    item: str
    reason: str


@dataclass(frozen=True)
class State:
    confirmed: tuple[StateFact, ...]
    unresolved: tuple[str, ...]
    pending_operations: tuple[str, ...]
    release: tuple[Released, ...]


@dataclass(frozen=True)
class Summary:
    text: str
    sources: tuple[str, ...]  # tool call labels


@dataclass(frozen=True)
class Fault:
    kind: FaultKind


Event = (
    ToolCall
    | ToolCalls
    | Said
    | Archive
    | Recover
    | Need
    | Answer
    | Clock
    | Task
    | Evidence
    | State
    | Summary
    | Fault
)


@dataclass(frozen=True)
class Trace:
    trace_id: str
    family: str
    tenant: str
    session_id: str
    owner: str
    instructions: str
    goal: str
    constraints: tuple[str, ...]
    events: tuple[Event, ...]

    def calls(self) -> dict[str, ToolCall]:
        """Every tool call by label, those made in parallel included, in order."""
        out: dict[str, ToolCall] = {}
        for e in self.events:
            for call in (e,) if isinstance(e, ToolCall) else e.calls if isinstance(e, ToolCalls) else ():
                out[call.label] = call
        return out
