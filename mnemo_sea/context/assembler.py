"""The context assembler: one turn's working context under a token budget.

Order is fixed (design note 001): instructions, tool definitions, the task's immutable
constraints, the goal and confirmed state, then the session's observations in the order they
happened (live results in their envelopes, archived ones as stubs in place, recovered copies
where they were appended), then retrieved evidence. Contradictory material is shown side by
side and marked, never resolved here.

Fit is by priority (design note 002). Pinned segments are never dropped or shortened:
instructions, tools, constraints, the task state, results of protected classes and the
conflicts a pinned fact takes part in. The rest is taken in priority order while it fits, each
segment whole; what does not fit is listed with its size and the reason. If the pinned part
alone exceeds the budget, nothing is assembled: ContextOverBudget names the sizes.

| priority | segments | within the class |
|---|---|---|
| pinned | instructions, tools, constraints, task state, protected results, cited-version conflicts | |
| 90 | archived stubs, withheld markers | newest first |
| 80 | recovered copies (the agent asked for them) | newest first |
| 70 | the newest live result (what the agent acts on now) | |
| 60 | retrieved evidence and memory conflicts | best rank first |
| 50 | other live results | newest first |

The assembler never archives: archiving stays the agent's decision. It proposes candidates
(non-protected live results of at least `candidate_min_tokens`, oldest first).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mnemo_sea.archive import InvalidInput

from . import render
from .errors import ContextOverBudget
from .material import ContextMaterial, HistoryItem
from .segments import COMPONENTS, ArchiveCandidate, AssembledContext, Component, LeftOut, Segment, SegmentKind

if TYPE_CHECKING:
    from .tokens import TokenCounter

PRIORITY_PINNED = 1000
PRIORITY_STUB = 90
PRIORITY_RECOVERED = 80
PRIORITY_NEWEST_LIVE = 70
PRIORITY_EVIDENCE = 60
PRIORITY_LIVE = 50
DEFAULT_CANDIDATE_MIN_TOKENS = 1000


@dataclass(frozen=True)
class _Draft:
    component: Component
    kind: SegmentKind
    text: str
    ids: tuple[str, ...]
    priority: int
    rank: int  # within a priority: lower is kept first
    why: str

    @property
    def pinned(self) -> bool:
        return self.priority >= PRIORITY_PINNED


def _pinned(component: Component, kind: SegmentKind, text: str, ids: tuple[str, ...], why: str) -> _Draft:
    return _Draft(component, kind, text, ids, PRIORITY_PINNED, 0, why)


def _history(items: tuple[HistoryItem, ...]) -> Iterator[_Draft]:
    # The result the agent acts on now: the newest plain live one (protected results are pinned
    # anyway, recovered copies have a priority of their own).
    newest_live = max(
        (
            i
            for i, item in enumerate(items)
            if item.result.state == "live"
            and not item.withheld
            and not item.protected
            and item.result.recovered_from is None
        ),
        default=None,
    )
    for i, item in enumerate(items):
        r = item.result
        ids = (r.result_id,)
        text = item.rendered + "\n"
        age = len(items) - i  # 1 = newest
        if item.withheld:
            yield _Draft("history", "withheld_result", text, ids, PRIORITY_STUB, age, "withheld marker")
        elif r.state == "archived":
            yield _Draft("history", "archived_stub", text, ids, PRIORITY_STUB, age, "archived stub")
        elif item.protected:
            yield _pinned("history", "protected_result", text, ids, f"protected class {r.policy_class}")
        elif r.recovered_from is not None:
            yield _Draft(
                "history",
                "recovered_copy",
                text,
                (*ids, r.recovered_from),
                PRIORITY_RECOVERED,
                age,
                "recovered copy",
            )
        elif i == newest_live:
            yield _Draft("history", "live_result", text, ids, PRIORITY_NEWEST_LIVE, 0, "newest live result")
        else:
            yield _Draft("history", "live_result", text, ids, PRIORITY_LIVE, age, "live result")


def _drafts(material: ContextMaterial) -> Iterator[_Draft]:
    """Every candidate segment, in the order the context shows them."""
    if material.instructions:
        yield _pinned(
            "instructions", "instructions", render.instructions(material.instructions), (), "instructions"
        )
    if material.tools:
        yield _pinned("tools", "tools", render.tools(material.tools), (), "tool definitions")
    state = material.task_state
    conflicts = material.cited_conflicts
    if material.task_state_withheld:
        marker = render.withheld_task_state(material.session_id)
        yield _pinned("task_state", "withheld_task_state", marker, (), "task state withheld")
    if state is not None:
        ids = (f"task_state@{state.version}",)
        if state.constraints:
            yield _pinned("task_state", "constraints", render.constraints(state), ids, "task constraints")
        cited = tuple(f"{f.evidence_id}" for f in state.confirmed)
        conflicted = frozenset((c.cited_as, c.cited_version) for c in conflicts)
        yield _pinned(
            "task_state", "task_state", render.task_state(state, conflicted), ids + cited, "task state"
        )
    yield from _history(material.history)
    shown = {c.evidence_id for c in conflicts}
    for c in conflicts:
        sides = (c.cited_version,) if c.current_version is None else (c.cited_version, c.current_version)
        # Pinned: one side of it (the confirmed fact) is pinned, so the other must be too.
        yield _pinned(
            "evidence",
            "evidence_conflict",
            render.evidence_conflict(c),
            tuple(f"{c.evidence_id}@{v}" for v in sides),
            "cited version conflict",
        )
    disagreements = dict(material.memory_disagreements)
    for item in material.evidence:
        if item.evidence_id in shown:
            continue  # already side by side in its conflict
        ids = (f"{item.evidence_id}@{item.version}",)
        found = disagreements.get(item.evidence_id)
        if found is not None:
            other = (f"{item.evidence_id}@{found.other.version}",)
            yield _Draft(
                "evidence",
                "memory_conflict",
                render.memory_conflict(item.evidence_id, found),
                ids + other,
                PRIORITY_EVIDENCE,
                item.rank,
                "memory conflict (retrieved)",
            )
        else:
            yield _Draft(
                "evidence",
                "evidence",
                render.evidence(item),
                ids,
                PRIORITY_EVIDENCE,
                item.rank,
                "retrieved evidence",
            )


def check_budget(budget_tokens: object, output_reserve: object) -> tuple[int, int]:
    for name, value in (("budget_tokens", budget_tokens), ("output_reserve", output_reserve)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(name, f"must be a non-negative integer, got {value!r}")
    assert isinstance(budget_tokens, int) and isinstance(output_reserve, int)
    if budget_tokens == 0:
        raise InvalidInput("budget_tokens", "must be positive")
    if output_reserve >= budget_tokens:
        raise InvalidInput(
            "output_reserve",
            f"{output_reserve} tokens leaves nothing of the budget of {budget_tokens} for the context",
        )
    return budget_tokens, output_reserve


def assemble(
    material: ContextMaterial,
    *,
    budget_tokens: int,
    output_reserve: int,
    counter: TokenCounter,
    candidate_min_tokens: int = DEFAULT_CANDIDATE_MIN_TOKENS,
) -> AssembledContext:
    """Order, count and fit the material (see the module docstring). Raises InvalidInput for a
    bad budget and ContextOverBudget when the pinned segments alone do not fit."""
    budget, reserve = check_budget(budget_tokens, output_reserve)
    available = budget - reserve
    drafts = list(_drafts(material))
    counted = [
        Segment(d.component, d.kind, d.text, counter.count(d.text), d.ids, d.pinned, d.priority, d.why)
        for d in drafts
    ]
    pinned = [i for i, d in enumerate(drafts) if d.pinned]
    used = sum(counted[i].tokens for i in pinned)
    if used > available:
        raise ContextOverBudget(
            budget_tokens=budget,
            output_reserve=reserve,
            pinned_tokens=used,
            pinned={
                kind: sum(counted[i].tokens for i in pinned if counted[i].kind == kind)
                for kind in sorted({counted[i].kind for i in pinned})
            },
        )
    kept = set(pinned)
    left_out: list[LeftOut] = []
    for i in sorted(
        (i for i, d in enumerate(drafts) if not d.pinned),
        key=lambda i: (-drafts[i].priority, drafts[i].rank, i),
    ):
        seg = counted[i]
        if used + seg.tokens <= available:
            kept.add(i)
            used += seg.tokens
        else:
            left_out.append(
                LeftOut(
                    seg.component,
                    seg.kind,
                    seg.ids,
                    seg.tokens,
                    seg.priority,
                    f"over budget: {seg.tokens} tokens, {available - used} of {available} left after "
                    f"pinned segments and higher priorities ({seg.why})",
                )
            )
    segments = tuple(counted[i] for i in sorted(kept))
    totals: dict[str, int] = {c: sum(s.tokens for s in segments if s.component == c) for c in COMPONENTS}
    totals["output_reserve"] = reserve
    dropped = {x.ids for x in left_out}
    candidates = tuple(
        ArchiveCandidate(
            item.result.result_id,
            item.result.tool_name,
            seg.tokens,
            item.result.observed_at,
            item.result.recovered_from,
            seg.ids in dropped,
        )
        for item, seg in _history_segments(material.history, counted, drafts)
        if seg.kind in ("live_result", "recovered_copy") and seg.tokens >= candidate_min_tokens
    )
    return AssembledContext(
        session_id=material.session_id,
        tokenizer=counter.name,
        exact=counter.exact,
        budget_tokens=budget,
        output_reserve=reserve,
        segments=segments,
        left_out=tuple(left_out),
        candidates=candidates,
        task_state_version=None if material.task_state is None else material.task_state.version,
        totals=totals,
    )


def _history_segments(
    items: tuple[HistoryItem, ...], counted: list[Segment], drafts: list[_Draft]
) -> Iterator[tuple[HistoryItem, Segment]]:
    """Each history item with its counted segment, in session order (oldest first)."""
    history = [seg for seg, d in zip(counted, drafts, strict=True) if d.component == "history"]
    yield from zip(items, history, strict=True)
