"""The automatic policy: which live results to set aside, decided from their size, age and class.

Two triggers, so a session gets help before it is large, not only past a fixed 100k tokens:

- **size**: a live result of at least `large_result_tokens` is set aside once `keep_recent`
  newer results followed it (an agent reads a 40k-token listing once, then works from notes);
- **budget**: when the live results the policy may set aside together exceed `budget_tokens`,
  the oldest of them are set aside until they fit in half of it (the half keeps the policy from
  archiving again on every turn). The newest and the protected results stay whatever they weigh,
  so they are not counted: a large result just read must not push out old small ones, whose
  archiving would save nothing it costs. Results of at least SMALL_RESULT_TOKENS go first;
  smaller ones only when those were not enough.

Never set aside: a protected class (user-confirmed facts, prescription basis, approvals: the
archive refuses them anyway), a result the caller cannot read, one already archived, and the
`keep_recent` newest results, which the agent is working on. Deterministic, no model: the same
session and the same parameters give the same plan.

A recovered copy was brought back because the agent needed it: until the session's task state
cites it (or its original), it is `awaiting_citation`, which the size trigger leaves alone and
the budget takes last, after every other result. Once cited, it is a result like any other and
goes back by the same rules (its evidence stays in the task state and in the original).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mnemo_sea.archive import InvalidInput

# An archived result is shown as its stub and a note of up to NOTE_CHARS (curation/notes.py),
# about 150 tokens: setting aside a result not much larger saves little and hides its evidence.
SMALL_RESULT_TOKENS = 500


@dataclass(frozen=True)
class CurationPolicy:
    """The automatic policy's parameters (see the module docstring)."""

    budget_tokens: int = 16_000
    large_result_tokens: int = 2_000
    keep_recent: int = 2

    def __post_init__(self) -> None:
        for name, low in (("budget_tokens", 1), ("large_result_tokens", 1), ("keep_recent", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidInput(name, f"must be a whole number of at least {low}, got {value!r}")


@dataclass(frozen=True)
class LiveResult:
    """What the policy knows of one live result of the session, in session order."""

    result_id: str
    tokens: int  # its envelope's, as the model would be sent it
    protected: bool
    readable: bool = True
    awaiting_citation: bool = False  # a recovered copy the task state does not cite yet


@dataclass(frozen=True)
class Decision:
    result_id: str
    tokens: int
    reason: str  # "large" or "budget"


@dataclass(frozen=True)
class CurationPlan:
    """What to set aside now, and the live tokens before and after."""

    archive: tuple[Decision, ...]
    live_tokens_before: int
    live_tokens_after: int


def plan(live: Sequence[LiveResult], policy: CurationPolicy) -> CurationPlan:
    """The results to archive now, oldest first (see the module docstring)."""
    total = sum(r.tokens for r in live)
    recent = {r.result_id for r in live[len(live) - policy.keep_recent :]} if policy.keep_recent else set()
    candidates = [r for r in live if r.readable and not r.protected and r.result_id not in recent]
    chosen: dict[str, Decision] = {}
    for r in candidates:
        if r.tokens >= policy.large_result_tokens and not r.awaiting_citation:
            chosen[r.result_id] = Decision(r.result_id, r.tokens, "large")
    movable = sum(r.tokens for r in candidates if r.result_id not in chosen)
    if movable > policy.budget_tokens:
        # Oldest first, results worth archiving before small ones, copies not yet cited last (a
        # stable sort keeps the age order within each).
        for r in sorted(candidates, key=lambda r: (r.awaiting_citation, r.tokens < SMALL_RESULT_TOKENS)):
            if movable <= policy.budget_tokens // 2:
                break
            if r.result_id not in chosen:
                chosen[r.result_id] = Decision(r.result_id, r.tokens, "budget")
                movable -= r.tokens
    remaining = total - sum(d.tokens for d in chosen.values())
    order = {r.result_id: i for i, r in enumerate(live)}
    decisions = tuple(sorted(chosen.values(), key=lambda d: order[d.result_id]))
    return CurationPlan(decisions, total, remaining)
