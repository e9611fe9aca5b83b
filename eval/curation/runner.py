"""Replay one trace under one arm: a fresh embedded Mnemo, every prompt through the assembler.

Semantics (CURATION.md, issue 11):
- a fresh `Mnemo.open(tmp, embedder=HashingEmbedder())` per (trace, arm); the principal is an
  agent of the trace's tenant with clearance INTERNAL; every tool call is recorded (observed_at
  shifted by the clock advances before it), whatever the arm;
- a turn (one model request) follows every `tool_call`, `need`, `answer` and `task` event, after
  the arm reacted; its prompt is `assemble(material, budget_tokens=10_000_000,
  output_reserve=4096, counter=...)` with one counter shared across arms (counts are cached by
  hash, so replaying the full arm costs hashing, not tokenising);
- the task state (goal and constraints at the start, `task` pivots, `state` events) is written
  through `Mnemo.update_task_state` and pinned in every arm's prompt; `summary` events go through
  `Mnemo.create_summary` and are shown, labelled derived, as retrieved evidence in every arm;
- `need`: satisfied iff its quote (as rendered, i.e. escaped) is in that turn's prompt;
- `answer`: a citation is correct iff `Mnemo.check_citations` says ok for
  `result:<session>/<rN of source>` AND its quote is in that turn's prompt;
- `fault: store_down`: the archive is unreachable for the next turn's assembly (a turn the trace
  asks for; a request an arm adds before it meets a working store); the harness then assembles
  the full history from its own copies, and the turn is recorded as a fallback. The other fault
  kinds are exercised by the safety gate (gates.py), not here.

Counted per turn: prompt tokens, (kind, sha256, tokens) of every segment (for the prefix proxy),
protected results not verbatim in the prompt, injected text outside an envelope, and a derived
summary shown without its label.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html import escape
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from mnemo_sea.archive import (
    RESULT_PREFIX,
    ArchiveConflict,
    ArchiveError,
    BatchRejected,
    EvidenceInput,
    InvalidInput,
    Principal,
    Role,
    Sensitivity,
    StateConflict,
    StoreUnavailable,
    TaskState,
    TaskStateRejected,
    ToolResult,
    escape_text,
    render_live,
)
from mnemo_sea.context import AssembledContext, BpeCounter, CachedCounter, TokenCounter
from mnemo_sea.context.assembler import DEFAULT_CANDIDATE_MIN_TOKENS, assemble
from mnemo_sea.context.gather import cited_conflicts, gather
from mnemo_sea.context.material import ContextMaterial, EvidenceItem, HistoryItem
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.projection.indexer import GroupCommit
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

from .arms import (
    ARCHIVE_AUTO,
    ARCHIVE_NO_NOTES,
    ARCHIVE_RESULTS,
    ARCHIVE_SCRIPTED,
    CLEARED_PLACEHOLDER,
    MASKING,
    NO_NOTE,
    RECALL,
    RECOVER_RESULT,
    SEARCH_ARCHIVE,
    SUMMARY,
    WINDOW,
    Arm,
    extract_note,
)
from .injection import leaks
from .trace import (
    EVIDENCE_SOURCE,
    Answer,
    Archive,
    Citation,
    Clock,
    Evidence,
    Fault,
    Generated,
    Need,
    Recover,
    Said,
    State,
    Summary,
    Task,
    ToolCall,
    ToolCalls,
    Trace,
)
from .transcript import Message, MessageKind, interleave, reply, result_number, said, said_texts, tool_use

BUDGET_TOKENS = 10_000_000  # never drops anything: the arms decide what is shown, not the budget
OUTPUT_RESERVE = 4096
AGENT_SUBJECT = "agent"
SUMMARY_LABEL = "derived summary (not original evidence)"
_ENVELOPES = frozenset({"live_result", "protected_result", "recovered_copy"})
_CALLER_OWN = frozenset({"instructions", "tools"})
# The checker's verdicts for a knowledge record's version that no longer holds.
_REPLACED_VERDICTS = frozenset({"retracted", "stale_version", "superseded"})


class ReplayError(InvalidInput):
    """The trace cannot be replayed as written (e.g. the archive refuses a scripted task state)."""

    code = "invalid_trace"

    def __init__(self, trace_id: str, event_index: int, kind: str, problem: str) -> None:
        where = f"events[{event_index}]"
        ArchiveError.__init__(self, f"{trace_id}: {where} ({kind}): {problem}", field=where, problem=problem)
        self.field = where
        self.problem = problem


@dataclass(frozen=True)
class PromptRecord:
    index: int
    event_index: int
    # What asked for it: the trace (TURN_EVENTS) or the arm (archive, recover, search, recall, reread).
    event: str
    tokens: int
    segments: tuple[tuple[str, str, int], ...]  # (kind, sha256 of the text, tokens), in order
    fallback: bool = False


@dataclass(frozen=True)
class NeedOutcome:
    event_index: int
    fact: str
    source: str
    satisfied: bool
    stale_unwarned: bool


@dataclass(frozen=True)
class CitationOutcome:
    event_index: int
    source: str
    verdict: str  # the checker's
    visible: bool  # the quote was in that turn's prompt
    stale_unwarned: bool

    @property
    def correct(self) -> bool:
        return self.verdict == "ok" and self.visible


@dataclass(frozen=True)
class TraceRun:
    trace_id: str
    family: str
    arm: str
    prompts: tuple[PromptRecord, ...]  # every model request's, in order
    archive_calls: int
    archived_results: int
    recover_calls: int
    rejected: int  # rejected archive batches and refused recoveries
    needs: tuple[NeedOutcome, ...]
    citations: tuple[CitationOutcome, ...]
    protected_violations: int  # turns
    injection_leaks: int  # turns
    unknown_definite: int  # turns
    archive_ms: tuple[float, ...] = ()
    recover_ms: tuple[float, ...] = ()
    recall_ms: tuple[float, ...] = ()  # every recall, whether it recovered or not
    rereads: int = 0  # read-only calls run again by a `+reread` baseline (each a request)
    superseded_cited: int = 0  # citations and confirmed facts resting on a replaced source
    searches: int = 0  # searches of archived notes and recalls (each one tool call)
    recalled: int = 0  # recoveries made inside a recall's one call (no tool call of their own)
    seconds: float = 0.0


def resolve_content(content: str | Generated) -> str:
    """A tool call's text: given, or made by its generator (generators.py, imported on demand)."""
    if isinstance(content, str):
        return content
    try:
        module = importlib.import_module("mnemo_sea.eval.curation.generators")
    except ImportError as e:
        raise InvalidInput(
            "generator", f"content generator {content.name!r} needs mnemo_sea.eval.curation.generators ({e})"
        ) from None
    text = module.generate(content)
    if not isinstance(text, str):
        raise InvalidInput("generator", f"generator {content.name!r} returned {type(text).__name__}")
    return text


def trace_contents(trace: Trace) -> dict[str, str]:
    """Every tool call's text by label, generated once and shared by all arms."""
    return {label: resolve_content(call.content) for label, call in trace.calls().items()}


@contextmanager
def store_unreachable(mnemo: Mnemo) -> Iterator[None]:
    """The archive's database becomes unreachable (its engine points at a folder that does not
    exist, so connecting fails as a lost server does) until the block ends."""
    store = mnemo.archive.store
    saved = store.engine
    with tempfile.TemporaryDirectory() as gone:
        missing = Path(gone) / "missing" / "archive.db"
    store.engine = create_engine(f"sqlite+pysqlite:///{missing}")
    try:
        yield
    finally:
        store.engine.dispose()
        store.engine = saved


@dataclass
class _Result:
    """One recorded original, with what the harness needs to render it without the archive."""

    label: str
    event_index: int
    result: ToolResult
    content: str
    protected: bool
    time_sensitive: bool
    _rendered: str | None = None
    _summary: str | None = None

    @property
    def rendered(self) -> str:
        if self._rendered is None:
            self._rendered = render_live(self.result, self.content.encode("utf-8"))
        return self._rendered

    def summary(self, lines: int, max_chars: int) -> str:
        """The `summary` arm's stand-in: the extractive summary in a `summary` pseudo-result's
        envelope (the same call id and time, so it keeps its place)."""
        if self._summary is None:
            pseudo = dataclasses.replace(self.result, tool_name="summary", arguments={})
            text = extract_note(self.content, self.result.arguments, lines=lines, max_chars=max_chars)
            self._summary = render_live(pseudo, text.encode("utf-8"))
        return self._summary


@dataclass
class _Counts:
    archive_calls: int = 0
    archived_results: int = 0
    recover_calls: int = 0
    rejected: int = 0
    searches: int = 0
    recalled: int = 0
    rereads: int = 0
    archive_ms: list[float] = field(default_factory=list)
    recover_ms: list[float] = field(default_factory=list)
    recall_ms: list[float] = field(default_factory=list)


class _Replay:
    def __init__(
        self,
        trace: Trace,
        arm: Arm,
        mnemo: Mnemo,
        counter: TokenCounter,
        contents: dict[str, str],
        trails: list[Callable[[], None]] | None = None,
    ):
        self.trace = trace
        # The trails archives started (their originals indexed behind them), run by the replay.
        self.trails = trails if trails is not None else []
        self.arm = arm
        self.p = arm.params
        self.mnemo = mnemo
        self.counter = counter
        self.contents = contents
        self.session = trace.session_id
        self.principal = Principal(trace.tenant, AGENT_SUBJECT, frozenset({Role.AGENT}), Sensitivity.INTERNAL)
        self.policy = mnemo.archive.policy
        self.results: list[_Result] = []
        self.by_label: dict[str, _Result] = {}
        self.label_of: dict[str, str] = {}  # result id (originals and copies) -> label
        self.live_copies: dict[str, list[str]] = {}  # label -> live recovered copies
        self.calls = trace.calls()
        self.rerun: dict[str, list[str]] = {}  # label -> results of its calls run again
        self.now: datetime | None = None  # the session's time: the last call's, moved by clock events
        self.archived: set[str] = set()
        self.notes: dict[str, str] = {}  # result id -> the note it was archived with
        self.cleared: set[str] = set()  # masking
        self.pending: dict[str, tuple[str, int]] = {}  # copy id -> (note, re-archive after this turn)
        self.offset = timedelta(0)
        self.clock_marks: list[int] = []  # event indexes of clock advances
        self.state: TaskState | None = None
        self.conflicts: tuple[Any, ...] = ()
        self.summaries: list[EvidenceItem] = []
        self.store_down_next = False
        self.prompts: list[PromptRecord] = []  # every model request's prompt, in order
        self.transcript: list[Message] = []  # what the model wrote and the curation tools replied
        self.at = -1  # the event being replayed
        self.newest = 0  # the number of the session's newest result (originals, runs, copies)
        self.trace_turns = 0  # the requests the trace asks for (not those an arm adds)
        self.counts = _Counts()
        self.needs: list[NeedOutcome] = []
        self.citations: list[CitationOutcome] = []
        self.protected_violations = 0
        self.injection_leaks = 0
        self.unknown_definite = 0
        self.planted: list[str] = []  # the injected texts of the results recorded, raw and escaped
        self.derived: set[str] = set()  # results the last history built shows as summary text
        self.replacing: dict[str, list[str]] = {}  # label -> the calls that superseded it, in order
        self.last_prompt: AssembledContext | None = None
        self.knowledge: dict[str, EvidenceItem] = {}  # evidence id -> its current version, shown
        self.withdrawn: set[str] = set()  # evidence ids superseded by another record
        self.superseded_cited = 0

    # ---- the replay ------------------------------------------------------------------------

    def run(self) -> None:
        t = self.trace
        self._write_state(-1, "start", goal=t.goal, constraints=t.constraints)
        for i, event in enumerate(t.events):
            self.at = i
            if isinstance(event, ToolCall):
                self._tool_calls(i, (event,))
            elif isinstance(event, ToolCalls):
                self._tool_calls(i, event.calls)
            elif isinstance(event, Said):
                self._say("assistant", said(event.text))
            elif isinstance(event, Archive):
                if self.arm.name == ARCHIVE_SCRIPTED:
                    self._archive([self._live_id(label) for label in event.labels], scripted=True)
            elif isinstance(event, Recover):
                if self.arm.name == ARCHIVE_SCRIPTED:
                    self._recover(self.by_label[event.label].result.result_id, match=event.match)
            elif isinstance(event, Need):
                self._need(i, event)
            elif isinstance(event, Answer):
                self._answer(i, event)
            elif isinstance(event, Clock):
                self.offset += timedelta(hours=event.hours)
                if self.now is not None:
                    self.now += timedelta(hours=event.hours)
                if event.hours > 0:
                    self.clock_marks.append(i)
            elif isinstance(event, Task):
                self._task(i, event)
            elif isinstance(event, Evidence):
                self._evidence(event)
            elif isinstance(event, State):
                self._state(i, event)
            elif isinstance(event, Summary):
                self._summary(i, event)
            elif isinstance(event, Fault) and event.kind == "store_down":
                self.store_down_next = True  # the other kinds are the safety gate's (gates.py)

    def _tool_calls(self, i: int, calls: Sequence[ToolCall]) -> None:
        """Calls the model made in one request: each recorded, then the arm reacts, then one turn."""
        for call in calls:
            self._observe(i, call)
        if self.arm.heuristic:
            self._heuristic_archive()
        elif self.arm.name == ARCHIVE_AUTO:
            self._auto_curate()
        self._turn(i, "tool_call")

    def _observe(self, i: int, call: ToolCall) -> None:
        content = self.contents[call.label]
        observed: datetime = call.observed_at + self.offset
        self.now = observed
        self._say("assistant", tool_use(call.tool, call.arguments))  # the call, then its result
        result = self._record(call, content, observed)
        item = _Result(
            call.label,
            i,
            result,
            content,
            self.policy.is_protected(call.policy_class),
            self.policy.is_time_sensitive(call.policy_class),
        )
        self.results.append(item)
        self.by_label[call.label] = item
        self.label_of[result.result_id] = call.label
        # As written (the transcript's decoded texts) and as an envelope or a stub escapes them.
        self.planted += [form for text in call.injected for form in (text, escape_text(text))]
        if call.supersedes is not None:
            self.replacing.setdefault(call.supersedes, []).append(call.label)

    def _record(self, call: ToolCall, content: str, observed: datetime | None) -> ToolResult:
        """The call's output recorded in the session, as every arm records it."""
        result = self.mnemo.record(
            self.principal,
            self.session,
            call.tool,
            content,
            arguments=call.arguments,
            observed_at=observed,
            policy_class=call.policy_class,
            owner=self.trace.owner,
        )
        self._added(result.result_id)
        return result

    def _added(self, result_id: str) -> None:
        self.newest = max(self.newest, result_number(result_id))

    def _shows(self, ctx: AssembledContext, label: str, quote: str) -> bool:
        """Whether the prompt holds `quote` where it comes from `label`'s result: its envelope (or
        what the arm shows in its place), a recovered copy of it, or the task state citing it. The
        same text in another result does not count: an agent cannot cite what it cannot see."""
        rid = self.by_label[label].result.result_id
        accepted = {rid, f"{RESULT_PREFIX}{self.session}/{rid}", *self.rerun.get(label, ())}
        return any(quote in s.text for s in ctx.segments if accepted & set(s.ids))

    def _shown_by(self, ctx: AssembledContext, labels: Sequence[str], quote: str) -> str | None:
        """The first of `labels` whose result shows `quote` (see `_shows`), or None."""
        return next((label for label in labels if self._shows(ctx, label, quote)), None)

    def _replaced_unseen(self, ctx: AssembledContext | None, label: str) -> bool:
        """Whether another call superseded `label`'s result and no result of those calls is in
        view in `ctx` (in any form: live, a stub, a copy): what the prompt let the agent believe
        still held, so it depends on what each arm shows."""
        later = self.replacing.get(label, [])
        return bool(later) and not (ctx is not None and any(self._shows(ctx, x, "") for x in later))

    def _shows_evidence(self, ctx: AssembledContext, evidence_id: str, quote: str) -> bool:
        """Whether the prompt holds `quote` in a segment carrying a version of the record."""
        prefix = f"{evidence_id}@"
        return any(quote in s.text for s in ctx.segments if any(x.startswith(prefix) for x in s.ids))

    def _need(self, i: int, need: Need) -> None:
        quote = escape_text(need.quote)
        # The policy is told what it needs (the trace's need); what it must find is where it is.
        if self.arm.heuristic and not self._shown_by(self._assemble(), need.sources, quote):
            self._heuristic_recover(need.query)
        elif self.arm.name == ARCHIVE_AUTO and not self._shown_by(self._assemble(), need.sources, quote):
            self._auto_recall(need.query)
        elif self.arm.rereads and not self._shown_by(before := self._assemble(), need.sources, quote):
            any(self._reread(i, source, before) for source in need.sources)  # the first that runs
        ctx = self._turn(i, "need")
        shown_by = self._shown_by(ctx, need.sources, quote)
        stale = shown_by is not None and self._stale_unwarned(ctx, shown_by, quote, i)
        self.needs.append(NeedOutcome(i, need.fact, need.source, shown_by is not None, stale))

    def _answer(self, i: int, answer: Answer) -> None:
        if self.arm.rereads:
            # At its best, a baseline that re-reads does so for what it is about to quote too.
            before = self._assemble()
            results = [c for c in answer.citations if c.evidence is None]
            for source in dict.fromkeys(c.source for c in results):
                quotes = [escape_text(c.quote) for c in results if c.source == source]
                if not all(self._shows(before, source, q) for q in quotes):
                    self._reread(i, source, before)
        ctx = self._turn(i, "answer")
        self._say("assistant", said(answer.text))
        if not answer.citations:
            return
        report = self.mnemo.check_citations(self.principal, [self._citation(c) for c in answer.citations])
        for c, check in zip(answer.citations, report.checks, strict=True):
            quote = escape_text(c.quote)
            cited = c.evidence
            if cited is None:
                visible = self._shows(ctx, c.source, quote)
                stale = visible and self._stale_unwarned(ctx, c.source, quote, i)
                replaced = self._replaced_unseen(ctx, c.source)
            else:
                visible, stale = self._shows_evidence(ctx, cited[0], quote), False
                replaced = check.verdict in _REPLACED_VERDICTS or cited[0] in self.withdrawn
            self.superseded_cited += replaced
            self.citations.append(CitationOutcome(i, c.source, check.verdict, visible, stale))

    def _citation(self, c: Citation) -> dict[str, Any]:
        """What the citation checker is asked: a result of the session, or a knowledge record."""
        cited = c.evidence
        if cited is None:
            rid = self.by_label[c.source].result.result_id
            return {"evidence_id": f"{RESULT_PREFIX}{self.session}/{rid}", "quote": c.quote}
        asked: dict[str, Any] = {"evidence_id": cited[0], "quote": c.quote}
        return asked if cited[1] is None else asked | {"version": cited[1]}

    def _task(self, i: int, task: Task) -> None:
        old = self.state
        released = [] if old is None else [c for c in old.constraints if c not in task.constraints]
        self._write_state(
            i,
            "task",
            goal=task.goal,
            constraints=task.constraints,
            release=[{"item": c, "reason": f"the task changed: {task.goal}"[:500]} for c in released],
        )
        self._turn(i, "task")

    def _state(self, i: int, state: State) -> None:
        # A fact confirmed from a source replaced by one the agent was not shown (in the prompt
        # of the request before) rests on what no longer holds.
        self.superseded_cited += sum(
            self._replaced_unseen(self.last_prompt, f.source)
            or f.source.removeprefix(EVIDENCE_SOURCE) in self.withdrawn
            for f in state.confirmed
        )
        old = self.state
        self._write_state(
            i,
            "state",
            goal=old.goal if old else self.trace.goal,
            constraints=old.constraints if old else self.trace.constraints,
            confirmed=[{"fact": f.fact, "evidence_id": self._cite(f.source)} for f in state.confirmed],
            unresolved=state.unresolved,
            pending=state.pending_operations,
            release=[{"item": r.item, "reason": r.reason} for r in state.release],
        )

    def _cite(self, source: str) -> str:
        if source.startswith("evidence:"):
            return source.removeprefix("evidence:")
        return f"{RESULT_PREFIX}{self.session}/{self.by_label[source].result.result_id}"

    def _write_state(
        self,
        i: int,
        kind: str,
        *,
        goal: str,
        constraints: Sequence[str],
        confirmed: Sequence[dict[str, str]] | None = None,
        unresolved: Sequence[str] | None = None,
        pending: Sequence[str] | None = None,
        release: Sequence[dict[str, str]] = (),
    ) -> None:
        old = self.state
        if confirmed is None:
            confirmed = (
                [] if old is None else [{"fact": f.fact, "evidence_id": f.evidence_id} for f in old.confirmed]
            )
        if unresolved is None:
            unresolved = () if old is None else old.unresolved
        if pending is None:
            pending = () if old is None else old.pending_operations
        try:
            self.state = self.mnemo.update_task_state(
                self.principal,
                self.session,
                goal=goal,
                confirmed=confirmed,
                unresolved=unresolved,
                constraints=constraints,
                pending_operations=pending,
                release=release,
                owner=self.trace.owner,
            )
        except TaskStateRejected as e:
            problems = "; ".join(f"{p['field']}: {p['message']}" for p in e.problems)
            raise ReplayError(
                self.trace.trace_id, i, kind, f"the archive refused the task state: {problems}"
            ) from None
        self.conflicts = cited_conflicts(self.mnemo.archive, self.principal, self.state)

    def _evidence(self, ev: Evidence) -> None:
        stored = self.mnemo.ingest(
            self.principal,
            [
                EvidenceInput(
                    body=ev.body,
                    source=ev.source,
                    evidence_id=ev.evidence_id,
                    scope=ev.scope,
                    locator=ev.locator,
                    statement=ev.statement,
                )
            ],
        )
        record = stored.stored[0]
        # Every arm is shown the current version of each knowledge record, as retrieval would.
        self.knowledge[ev.evidence_id] = EvidenceItem(
            ev.evidence_id, record.version, record.kind, ev.source, ev.scope, ev.locator, ev.body, "", 1.0, 1
        )
        if ev.supersedes is not None and ev.supersedes not in self.withdrawn:
            self.mnemo.retract(self.principal, ev.supersedes, f"superseded by {ev.evidence_id}")
            self.withdrawn.add(ev.supersedes)
            self.knowledge.pop(ev.supersedes, None)
        self.conflicts = cited_conflicts(self.mnemo.archive, self.principal, self.state)

    def _summary(self, i: int, summary: Summary) -> None:
        refs = [f"{RESULT_PREFIX}{self.session}/{self.by_label[s].result.result_id}" for s in summary.sources]
        made = self.mnemo.create_summary(self.principal, summary.text, refs)
        # The archive's id is random (uuid); the prompt shows an id fixed by the trace, so two runs
        # render the same bytes.
        n = len(self.summaries) + 1
        self.summaries.append(
            EvidenceItem(
                f"sum:{self.trace.trace_id}-{n}",
                1,
                "summary",
                "summary",
                "",
                "",
                made.text,
                made.label,
                1.0,
                n,
            )
        )

    # ---- archive operations ------------------------------------------------------------------

    def _live_id(self, label: str) -> str:
        """What archiving `label` means now: its original if live, else its newest live copy
        (else the original, which the archive then refuses as archived already)."""
        original = self.by_label[label].result.result_id
        if original not in self.archived:
            return original
        copies = self.live_copies.get(label, [])
        return copies[-1] if copies else original

    def _note_for(self, rid: str, *, scripted: bool) -> str:
        if self.arm.name == ARCHIVE_NO_NOTES:
            return NO_NOTE
        item = self.by_label[self.label_of[rid]]
        if scripted:
            call = self.trace.calls()[item.label]
            if call.note:
                return call.note
        return extract_note(
            item.content, item.result.arguments, lines=self.p.summary_lines, max_chars=self.p.summary_chars
        )

    def _archive(self, rids: Sequence[str], *, scripted: bool, notes: dict[str, str] | None = None) -> None:
        if not rids:
            return
        targets = [(rid, (notes or {}).get(rid) or self._note_for(rid, scripted=scripted)) for rid in rids]
        self._request("archive")
        asked = [{"id": rid, "note": note} for rid, note in targets]
        self._say("assistant", tool_use(ARCHIVE_RESULTS, {"targets": asked}))
        start = time.perf_counter()
        try:
            receipt = self.mnemo.archive_results(self.principal, self.session, targets)
        except (BatchRejected, ArchiveConflict) as e:
            self.counts.rejected += 1
            self._say("tool_reply", reply(ARCHIVE_RESULTS, {"refused": str(e)}))
            return
        finally:
            self.counts.archive_ms.append((time.perf_counter() - start) * 1000)
        self._say("tool_reply", reply(ARCHIVE_RESULTS, {"archived": list(receipt.archived)}))
        self.counts.archive_calls += 1
        self.counts.archived_results += len(receipt.archived)
        self._index_originals()
        for rid, note in targets:
            self._set_aside(rid, note)

    def _set_aside(self, rid: str, note: str) -> None:
        """What the replay keeps of a result just archived (an original or a copy of one)."""
        self.archived.add(rid)
        self.notes[rid] = note
        label = self.label_of[rid]
        if rid in self.live_copies.get(label, []):
            self.live_copies[label].remove(rid)

    def _copied(self, rid: str, copy: str) -> None:
        """What the replay keeps of a copy just appended: whose it is, and that it is live."""
        self._added(copy)
        label = self.label_of[rid]
        self.label_of[copy] = label
        self.live_copies.setdefault(label, []).append(copy)

    def _recover(self, rid: str, *, match: str | None = None) -> str | None:
        self._request("recover")
        self._say("assistant", tool_use(RECOVER_RESULT, {"id": rid} | ({"match": match} if match else {})))
        start = time.perf_counter()
        try:
            recovered = self.mnemo.recover(self.principal, self.session, rid, match=match)
        except StateConflict as e:
            self.counts.rejected += 1
            self._say("tool_reply", reply(RECOVER_RESULT, {"refused": str(e)}))
            return None
        finally:
            self.counts.recover_ms.append((time.perf_counter() - start) * 1000)
        self.counts.recover_calls += 1
        copy = recovered.appended.result_id
        self._say("tool_reply", reply(RECOVER_RESULT, {"recovered": rid, "as": copy}))
        self._copied(rid, copy)
        return copy

    def _heuristic_archive(self) -> None:
        ctx = self._assemble(candidate_min_tokens=self.p.min_result_tokens)
        if ctx.used_tokens + self._transcript_tokens() <= self.p.trigger_tokens:
            return
        history = [s.ids[0] for s in ctx.segments if s.component == "history"]
        newest = set(history[-self.p.keep :]) if self.p.keep else set()
        rids = [
            c.result_id
            for c in ctx.candidates
            if c.result_id not in newest
            and c.result_id not in self.pending
            and c.result_id not in self.archived
        ]
        self._archive(rids, scripted=False)

    def _heuristic_recover(self, query: str) -> None:
        self.counts.searches += 1  # a search is a tool call the model asks for: a request
        self._request("search")
        self._say("assistant", tool_use(SEARCH_ARCHIVE, {"query": query}))
        found = self.mnemo.search(self.principal, query, kinds=["tool_result", "archived_original"])
        own = f"{RESULT_PREFIX}{self.session}/"
        # Only a note that shares a word with the query (a BM25 rank) counts as found: the dense
        # leg ranks every note, and with the hashing embedder a note sharing no word is noise.
        hits = [h for h in found.hits if h.evidence_id.startswith(own) and h.bm25_rank is not None]
        self._say("tool_reply", reply(SEARCH_ARCHIVE, {"hits": [h.evidence_id for h in hits]}))
        if not hits:
            return
        rid = hits[0].evidence_id.removeprefix(own)
        label = self.label_of.get(rid)
        if label is None or self.live_copies.get(label):
            return  # its copy is in view already: recovering again shows nothing new
        copy = self._recover(rid)
        if copy is not None:
            # The copy stays for the need's turn and the one after, then goes back with its note.
            self.pending[copy] = (
                self.notes.get(rid) or self._note_for(rid, scripted=False),
                self.trace_turns + 1,
            )

    def _auto_curate(self) -> None:
        """The library's policy after a tool call (its defaults; its own automatic notes)."""
        start = time.perf_counter()
        report = self.mnemo.curate(self.principal, self.session)
        if report.receipt is None:
            return
        self.counts.archive_ms.append((time.perf_counter() - start) * 1000)
        self.counts.archive_calls += 1
        self.counts.archived_results += len(report.archived)
        self._index_originals()
        for done in report.archived:
            self._set_aside(done.result_id, done.note)

    def _auto_recall(self, query: str) -> None:
        """The library's recall of a need out of view: one tool call the model asks for (a request),
        which searches and, when something holds the need, recovers it in the same call."""
        self.counts.searches += 1
        self._request("recall")
        self._say("assistant", tool_use(RECALL, {"query": query}))
        start = time.perf_counter()
        found = self.mnemo.recall(self.principal, self.session, query)
        self.counts.recall_ms.append((time.perf_counter() - start) * 1000)
        copy = None if found.recovered is None else found.recovered.appended.result_id
        answered = {"status": found.status, "result_id": found.result_id, "lines": found.lines, "as": copy}
        self._say("tool_reply", reply(RECALL, {k: v for k, v in answered.items() if v is not None}))
        if copy is None or found.result_id is None:
            return
        self.counts.recalled += 1
        self._copied(found.result_id, copy)

    def _reread(self, i: int, label: str, shown: AssembledContext) -> bool:
        """Run `label`'s call again, if the trace says it is read-only: one tool call (a request),
        whose output is appended as the newest result, observed now. A stable call gives its
        original; another, what the trace says a run returns now. Not when its last run is in
        view (`shown`): the agent sees what a run returns now, and another would return it again."""
        call = self.calls[label]
        if call.reread is None:
            return False  # an action or an approval is not run again to be read
        runs = self.rerun.get(label)
        if runs and runs[-1] not in self.cleared and any(runs[-1] in s.ids for s in shown.segments):
            return False  # (a run masking cleared is no longer seen: it may run again)
        content = (
            self.contents[label] if call.reread.current is None else resolve_content(call.reread.current)
        )
        self.counts.rereads += 1
        self._request("reread")
        self._say("assistant", tool_use(call.tool, call.arguments))
        result = self._record(call, content, self.now)
        source = self.by_label[label]
        self.results.append(_Result(label, i, result, content, source.protected, source.time_sensitive))
        self.label_of[result.result_id] = label
        self.rerun.setdefault(label, []).append(result.result_id)
        return True

    def _index_originals(self) -> None:
        """Run the trail an archive started, after its timing: an agent's next turn comes seconds
        later, when the originals are searchable; the replay runs it then, so it is deterministic."""
        while self.trails:
            self.trails.pop(0)()

    def _rearchive_due(self) -> None:
        done = self.trace_turns - 1
        due = sorted((rid for rid, (_, turn) in self.pending.items() if turn <= done), key=result_number)
        if not due:
            return
        notes = {rid: self.pending.pop(rid)[0] for rid in due}
        self._archive(due, scripted=False, notes=notes)

    # ---- prompts -----------------------------------------------------------------------------

    def _harness_history(self, *, everything: bool = False) -> tuple[HistoryItem, ...]:
        items = self.results
        name = "full" if everything else self.arm.shows
        self.derived = set()  # what this history shows as the arm's own summary text
        k = self.p.window_k
        # Window and summary pin protected results as masking and the archive do: a harness
        # keeps what it may never drop (an approval, a user-confirmed fact) whatever its rule.
        if name == WINDOW:
            recent = {r.result.result_id for r in items[-k:]}
            return tuple(
                HistoryItem(r.result, r.rendered, r.protected)
                for r in items
                if r.protected or r.result.result_id in recent
            )
        out: list[HistoryItem] = []
        for n, r in enumerate(items):
            if name == SUMMARY and n < len(items) - k and not r.protected:
                self.derived.add(r.result.result_id)
                pseudo = dataclasses.replace(r.result, tool_name="summary")
                out.append(HistoryItem(pseudo, r.summary(self.p.summary_lines, self.p.summary_chars), False))
            elif name == MASKING and r.result.result_id in self.cleared:
                out.append(HistoryItem(r.result, render_live(r.result, CLEARED_PLACEHOLDER.encode()), False))
            else:
                out.append(HistoryItem(r.result, r.rendered, r.protected))
        return tuple(out)

    def _material(self) -> ContextMaterial:
        if self.arm.uses_archive:
            return gather(
                self.mnemo.archive,
                self.principal,
                self.session,
                instructions=self.trace.instructions,
                tools=self.arm.tools,
                evidence=self._evidence_items(),
            )
        return ContextMaterial(
            session_id=self.session,
            instructions=self.trace.instructions,
            tools=self.arm.tools,
            task_state=self.state,
            history=self._harness_history(),
            evidence=self._evidence_items(),
            cited_conflicts=self.conflicts,
        )

    def _evidence_items(self) -> tuple[EvidenceItem, ...]:
        """The derived summaries, then the knowledge records' current versions, ranked in order."""
        items = [*self.summaries, *self.knowledge.values()]
        return tuple(dataclasses.replace(item, rank=n) for n, item in enumerate(items, 1))

    def _fallback_material(self) -> ContextMaterial:
        """The full history from the harness's own copies, when the archive is unreachable."""
        return ContextMaterial(
            session_id=self.session,
            instructions=self.trace.instructions,
            tools=self.arm.tools,
            task_state=self.state,
            history=self._harness_history(everything=True),
            evidence=self._evidence_items(),
            cited_conflicts=self.conflicts,
        )

    def _fit(self, material: ContextMaterial, candidate_min_tokens: int) -> AssembledContext:
        return assemble(
            material,
            budget_tokens=BUDGET_TOKENS,
            output_reserve=OUTPUT_RESERVE,
            counter=self.counter,
            candidate_min_tokens=candidate_min_tokens,
        )

    def _assemble(self, candidate_min_tokens: int = DEFAULT_CANDIDATE_MIN_TOKENS) -> AssembledContext:
        ctx = self._fit(self._material(), candidate_min_tokens)
        # The trigger is on the whole prompt, as a provider counts input tokens.
        if self.arm.shows == MASKING and ctx.used_tokens + self._transcript_tokens() > self.p.trigger_tokens:
            keep = {r.result.result_id for r in self.results[-self.p.keep :]} if self.p.keep else set()
            clear = {
                r.result.result_id for r in self.results if not r.protected and r.result.result_id not in keep
            }
            if not clear <= self.cleared:
                self.cleared |= clear
                ctx = self._fit(self._material(), candidate_min_tokens)
        return ctx

    def _say(self, kind: MessageKind, text: str) -> None:
        self.transcript.append(Message(kind, text, self.counter.count(text), self.newest))

    def _transcript_tokens(self) -> int:
        return sum(m.tokens for m in self.transcript)

    def _turn(self, i: int, kind: str) -> AssembledContext:
        """A model request the trace asks for: after a tool call, at a need, an answer, a pivot."""
        ctx = self._prompt(i, kind, fault=True)
        self.trace_turns += 1
        if self.arm.heuristic:
            self._rearchive_due()
        return ctx

    def _request(self, kind: str) -> None:
        """A model request an arm adds (a curation call, a re-read): its prompt is the context
        as it stands when the model asks; the call and its reply are in the prompts after it."""
        self._prompt(self.at, kind)

    def _prompt(self, i: int, kind: str, *, fault: bool = False) -> AssembledContext:
        """Assemble and record one request's prompt: the assembled context, then the transcript.
        `fault`: a trace turn, which meets a `store_down` fault waiting for it."""
        fallback = False
        if fault and self.store_down_next:
            self.store_down_next = False
            with store_unreachable(self.mnemo):
                try:
                    ctx = self._assemble()
                except StoreUnavailable:
                    ctx = self._fit(self._fallback_material(), DEFAULT_CANDIDATE_MIN_TOKENS)
                    fallback = True
        else:
            ctx = self._assemble()
        shown = interleave(ctx.segments, self.transcript)
        segments = tuple(
            (kind_, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), tokens)
            for kind_, text, tokens in shown
        )
        tokens = ctx.used_tokens + self._transcript_tokens()
        self.prompts.append(PromptRecord(len(self.prompts), i, kind, tokens, segments, fallback))
        self.last_prompt = ctx
        self._check_prompt(ctx)
        return ctx

    # ---- per-turn checks ---------------------------------------------------------------------

    def _check_prompt(self, ctx: AssembledContext) -> None:
        text = ctx.text
        if any(r.protected and escape_text(r.content) not in text for r in self.results):
            self.protected_violations += 1
        # An original's escaped envelope holds what the tool returned; anything else the model
        # reads as the session's own words: notes, the task state, the transcript, and the
        # summary arm's text in its pseudo-result's envelope.
        outside = [
            s.text
            for s in ctx.segments
            if s.kind not in _CALLER_OWN and (s.kind not in _ENVELOPES or self.derived & set(s.ids))
        ]
        outside += [text for m in self.transcript for text in said_texts(m)]
        if any(leaks(t, self.planted) for t in outside):
            self.injection_leaks += 1
        if self._summary_unlabelled(ctx):
            self.unknown_definite += 1

    def _summary_unlabelled(self, ctx: AssembledContext) -> bool:
        """A derived summary shown anywhere but in its own labelled segment (copied into the task
        state's confirmed facts, a note, ...) is asserted as if it were definite."""
        label = f'label="{escape(SUMMARY_LABEL, quote=True)}"'
        for item in self.summaries:
            shown = escape_text(item.text)
            for s in ctx.segments:
                if shown not in s.text:
                    continue
                labelled = s.kind == "evidence" and label in s.text.split("\n", 1)[0]
                if not labelled:
                    return True
        return False

    def _stale_unwarned(self, ctx: AssembledContext, label: str, quote: str, i: int) -> bool:
        """A time-sensitive source observed before a clock advance that precedes event `i`, shown
        (holding the quote) without a staleness warning."""
        source = self.by_label[label]
        if not source.time_sensitive or not any(source.event_index < c < i for c in self.clock_marks):
            return False
        rid = source.result.result_id
        return any(quote in s.text and "[warning: " not in s.text for s in ctx.segments if rid in s.ids)

    def outcome(self, seconds: float) -> TraceRun:
        c = self.counts
        return TraceRun(
            trace_id=self.trace.trace_id,
            family=self.trace.family,
            arm=self.arm.name,
            prompts=tuple(self.prompts),
            archive_calls=c.archive_calls,
            archived_results=c.archived_results,
            recover_calls=c.recover_calls,
            searches=c.searches,
            recalled=c.recalled,
            rereads=c.rereads,
            rejected=c.rejected,
            needs=tuple(self.needs),
            citations=tuple(self.citations),
            protected_violations=self.protected_violations,
            injection_leaks=self.injection_leaks,
            unknown_definite=self.unknown_definite,
            superseded_cited=self.superseded_cited,
            archive_ms=tuple(c.archive_ms),
            recover_ms=tuple(c.recover_ms),
            recall_ms=tuple(c.recall_ms),
            seconds=seconds,
        )


_SHARED_COUNTER: list[TokenCounter] = []


def shared_counter() -> TokenCounter:
    """One cl100k_base counter for every arm of every trace in this process (cached by hash)."""
    if not _SHARED_COUNTER:
        _SHARED_COUNTER.append(CachedCounter(BpeCounter(), max_entries=65_536))
    return _SHARED_COUNTER[0]


def replay(
    trace: Trace,
    arm: Arm,
    *,
    counter: TokenCounter | None = None,
    contents: dict[str, str] | None = None,
    work_dir: Path | None = None,
) -> TraceRun:
    """Replay `trace` under `arm` in a fresh embedded Mnemo (a temporary folder, removed after).

    Raises ReplayError when the archive refuses what the trace scripts (a task state), and
    InvalidInput for content it cannot produce."""
    started = time.perf_counter()
    texts = contents if contents is not None else trace_contents(trace)
    trails: list[Callable[[], None]] = []
    with (
        tempfile.TemporaryDirectory(dir=work_dir) as tmp,
        Mnemo.open(
            tmp, embedder=HashingEmbedder(), group_commit=GroupCommit(start_trail=trails.append)
        ) as mnemo,
    ):
        state = _Replay(trace, arm, mnemo, counter or shared_counter(), texts, trails)
        state.run()
        return state.outcome(time.perf_counter() - started)


def replay_all(
    traces: Sequence[Trace],
    arms: Sequence[Arm],
    *,
    counter: TokenCounter | None = None,
    progress: Any = None,
) -> list[TraceRun]:
    """Every trace under every arm, in order; `progress(message)` is called before each replay."""
    shared = counter or shared_counter()
    runs: list[TraceRun] = []
    for trace in traces:
        texts = trace_contents(trace)
        for arm in arms:
            if progress is not None:
                progress(f"{trace.trace_id}: {arm.name}")
            runs.append(replay(trace, arm, counter=shared, contents=texts))
    return runs


__all__ = [
    "CitationOutcome",
    "NeedOutcome",
    "PromptRecord",
    "ReplayError",
    "TraceRun",
    "replay",
    "replay_all",
    "resolve_content",
    "shared_counter",
    "store_unreachable",
    "trace_contents",
]
