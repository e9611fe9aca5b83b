"""What one version of a task state changed against the version before it, as the task state
page shows under each version: the goal, what each list gained, and what it lost and how (released
with a reason, settled by a confirmed fact, or gone without either: a deletion's cascade removes a
fact that cited deleted data).

The archive keeps what a version released (`TaskState.released`) and which open item a fact
settles (`ConfirmedFact.resolves`); the rest is the difference of the two versions' lists, which
this module computes (pure functions, no reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mnemo_sea.archive import ConfirmedFact, TaskState

# The lists of a version, in the order the page shows them, with the names it gives them.
LISTS = (
    ("confirmed", "confirmed facts"),
    ("unresolved", "unresolved"),
    ("constraints", "constraints"),
    ("pending_operations", "pending operations"),
)
# How the kinds of a released item (ReleasedItem.kind) name the list it left.
_RELEASED_FROM = {
    "confirmed": "confirmed",
    "unresolved": "unresolved",
    "constraint": "constraints",
    "pending_operation": "pending_operations",
}

How = Literal["released", "settled", "recited", "dropped"]


@dataclass(frozen=True)
class Removed:
    """An item of the previous version this one no longer holds, and how it went: released (`why`
    the reason), settled (`why` the fact that settles it), recited (a confirmed fact that now
    cites other evidence) or dropped (no reason recorded)."""

    field: str
    item: str
    how: How
    why: str = ""


@dataclass(frozen=True)
class Changes:
    """One version against `against`, the version before it that the reader may read (None for
    the first). `skipped` when versions between them are above the reader's clearance, so the
    changes span them too."""

    against: int | None
    skipped: bool
    goal_before: str | None  # the previous goal when this version changed it
    added: dict[str, tuple[str, ...]]
    removed: tuple[Removed, ...]

    @property
    def none(self) -> bool:
        return self.goal_before is None and not any(self.added.values()) and not self.removed


def _fact_text(fact: ConfirmedFact) -> str:
    return f"{fact.fact} [{fact.evidence_id}]"


def _items(state: TaskState, field: str) -> tuple[str, ...]:
    if field == "confirmed":
        return tuple(_fact_text(f) for f in state.confirmed)
    items: tuple[str, ...] = getattr(state, field)
    return items


def _new(now: tuple[str, ...], before: tuple[str, ...]) -> tuple[str, ...]:
    kept = set(before)
    return tuple(item for item in now if item not in kept)


def changes(state: TaskState, previous: TaskState | None) -> Changes:
    """What `state` changed against `previous` (the readable version before it, or None)."""
    if previous is None:
        return Changes(None, state.version > 1, None, {f: _items(state, f) for f, _ in LISTS}, ())
    released = {(_RELEASED_FROM.get(r.kind, r.kind), r.item): r.reason for r in state.released}
    # A confirmed fact is released by its text, not by the citation the page shows beside it.
    facts = {_fact_text(f): f.fact for f in previous.confirmed}
    settled = {f.resolves: f.fact for f in state.confirmed if f.resolves is not None}
    still_held = {f.fact for f in state.confirmed}
    removed: list[Removed] = []
    added: dict[str, tuple[str, ...]] = {}
    for field, _ in LISTS:
        now, before = _items(state, field), _items(previous, field)
        added[field] = _new(now, before)
        for item in _new(before, now):
            plain = facts.get(item, item) if field == "confirmed" else item
            if (field, plain) in released:
                removed.append(Removed(field, item, "released", released[(field, plain)]))
            elif plain in settled and field != "confirmed":
                removed.append(Removed(field, item, "settled", settled[plain]))
            elif field == "confirmed" and plain in still_held:
                removed.append(Removed(field, item, "recited"))
            else:
                removed.append(Removed(field, item, "dropped"))
    goal_before = previous.goal if previous.goal != state.goal else None
    skipped = previous.version != state.version - 1
    return Changes(previous.version, skipped, goal_before, added, tuple(removed))


def history_changes(history: list[TaskState]) -> dict[int, Changes]:
    """Each version's changes against the readable version before it, by version number."""
    return {state.version: changes(state, history[n - 1] if n else None) for n, state in enumerate(history)}
