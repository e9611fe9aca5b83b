"""The rules a task state update must keep, as pure functions: no database, no clock.

`parse_proposal` turns what a caller passed into a `Proposal` and lists every problem of its
shape (wrong types are problems, never exceptions); `check_update` lists every problem of the
proposal as the next version after the current one, given what each cited evidence id resolved
to (task_state.py resolves them in the writing transaction). Problems are dicts: `field`
(`confirmed[2].evidence_id`, `constraints`, ...), `item` (the caller's text it is about),
`problem` (a code) and `message` (how to fix the call).

The codes:
- shape: `wrong_type`, `empty`, `too_long`, `invalid_text`, `too_many`, `duplicate`,
  `unknown_field`, `reason_required`, `evidence_required`, `invalid_evidence_id`;
- evidence (task_state.py): `evidence_not_found`, `evidence_forbidden`, `evidence_retracted` (a
  new citation of a retracted version), `derived_not_evidence`;
- against the previous version: `constraint_dropped` (a constraint gone without a release),
  `open_item_dropped` (an unresolved item or pending operation gone from both lists without a
  fact that settles it with evidence, or a release: an edit of its text is a drop),
  `open_item_made_definite` (such an item listed in a definite list: a constraint, or the text of
  a confirmed fact that does not name it in `resolves`; whether or not it is still open too),
  `confirmed_reworded` (a confirmed fact replaced by another text citing the same evidence,
  without a release; dropping a fact is allowed, rewording it is not),
  `unknown_item` (a release or `resolves` naming what the previous version did not hold),
  `released_but_kept`, `resolved_but_kept`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import limits
from .principal import Sensitivity
from .records import ConfirmedFact, ReleasedItem, TaskState
from .refs import (
    EVIDENCE_ID,
    MemoryIndexId,
    ResultIndexId,
    evidence_ref,
    memory_ref,
    parse_index_id,
    session_prefix,
)

TEXT_LIMIT = limits.TASK_TEXT_CHARS  # the goal, every item, every reason
MAX_ITEMS = limits.TASK_ITEMS  # per list
TRACE_REF_LIMIT = limits.TRACE_REF_CHARS
# Items are single lines of text: a control character, a format character (bidi overrides,
# zero-width), a line separator or a lone surrogate (not storable as UTF-8) would let an item
# break or disguise the context it is rendered into.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# `version`, `ref` and `kind` are accepted so a state read back can be passed again; the archive
# sets them.
_CONFIRMED_FIELDS = frozenset({"fact", "evidence_id", "resolves", "version", "ref"})
_RELEASE_FIELDS = frozenset({"item", "reason", "kind"})
_KIND_OF_LIST = {"unresolved": "unresolved", "pending_operations": "pending_operation"}
_DROPPED_OPEN = (
    "an unknown state cannot become definite without evidence: settle it with a confirmed fact that "
    "names it in `resolves` and cites evidence, or release it with a reason"
)
_MADE_DEFINITE = (
    "an unknown state cannot become definite without evidence, and listing it here makes it one: keep "
    "it in `{listed}` until a confirmed fact that names it in `resolves` settles it with evidence, or "
    "release it with a reason (a constraint that follows from the answer is a new item in its own words)"
)

# ---- problems ------------------------------------------------------------------------------


def _shown(value: object) -> str | None:
    """An item as a problem names it: the caller's own text, shortened, always encodable."""
    if not isinstance(value, str):
        return None
    text = value.encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= 200 else text[:200] + "..."


def _problem(field: str, item: object, code: str, message: str) -> dict[str, Any]:
    return {"field": field, "item": _shown(item), "problem": code, "message": message}


def _text_problem(value: object, limit: int) -> tuple[str, str] | None:
    """(code, message) of what is wrong with a text field, or None."""
    if not isinstance(value, str):
        return "wrong_type", f"must be text, got {type(value).__name__}"
    if not value.strip():
        return "empty", "must not be empty"
    if len(value) > limit:
        return "too_long", f"is {len(value)} characters; the limit is {limit}"
    if any(unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in value):
        return (
            "invalid_text",
            "must be one line of text: no control or format characters (bidi overrides, zero-width), line "
            "separators or lone surrogates",
        )
    return None


# ---- the proposal (pure) -------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """A confirmed fact as the writer gave it. `evidence_id` is None when it was missing or
    malformed (its problem is listed)."""

    index: int
    fact: str
    evidence_id: str | None
    resolves: str | None


@dataclass(frozen=True)
class Release:
    index: int
    item: str
    reason: str


@dataclass(frozen=True)
class Proposal:
    """A task state update after parsing. Text that failed a check is kept when it is text (so
    the rules on the previous version judge what the writer meant); non-text values are left out."""

    goal: str
    confirmed: tuple[Claim, ...]
    unresolved: tuple[str, ...]
    constraints: tuple[str, ...]
    pending_operations: tuple[str, ...]
    trace_ref: str | None
    release: tuple[Release, ...]

    def request(self) -> dict[str, Any]:
        """What an idempotency key names: every field that shapes the write."""
        return {
            "goal": self.goal,
            "confirmed": [[c.fact, c.evidence_id, c.resolves] for c in self.confirmed],
            "unresolved": list(self.unresolved),
            "constraints": list(self.constraints),
            "pending_operations": list(self.pending_operations),
            "trace_ref": self.trace_ref,
            "release": [[r.item, r.reason] for r in self.release],
        }

    @property
    def open_items(self) -> set[str]:
        return set(self.unresolved) | set(self.pending_operations)


def _sequence(field: str, value: object, problems: list[dict[str, Any]]) -> list[object] | None:
    """The items of a list field, or None (its problem listed) when it is not a list of at most
    MAX_ITEMS items."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        problems.append(_problem(field, None, "wrong_type", f"must be a list, got {type(value).__name__}"))
        return None
    if len(value) > MAX_ITEMS:
        problems.append(
            _problem(field, None, "too_many", f"{len(value)} items; at most {MAX_ITEMS} per list")
        )
        return None
    return list(value)


def _texts(field: str, value: object, problems: list[dict[str, Any]]) -> tuple[str, ...]:
    items = _sequence(field, value, problems)
    if items is None:
        if isinstance(value, list | tuple):  # too many: its text still meets the rules, unchecked
            return tuple(dict.fromkeys(x for x in value if isinstance(x, str)))
        return ()
    out: list[str] = []
    for i, item in enumerate(items):
        wrong = _text_problem(item, TEXT_LIMIT)
        if wrong is not None:
            problems.append(_problem(f"{field}[{i}]", item, *wrong))
        if not isinstance(item, str):
            continue
        if item in out:
            problems.append(_problem(f"{field}[{i}]", item, "duplicate", "appears twice in the list"))
            continue
        out.append(item)
    return tuple(out)


def _evidence_id(field: str, value: object, problems: list[dict[str, Any]]) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        problems.append(
            _problem(
                field,
                None,
                "evidence_required",
                "a confirmed fact must cite the evidence it rests on (an evidence id, X@version, "
                "result:<session>/<rN> or memory:<owner>/<key>); keep what has none as unresolved",
            )
        )
        return None
    if not isinstance(value, str):
        problems.append(_problem(field, None, "wrong_type", f"must be text, got {type(value).__name__}"))
        return None
    if not EVIDENCE_ID.fullmatch(value):
        problems.append(
            _problem(
                field,
                value,
                "invalid_evidence_id",
                "is not an id the archive could hold (1-256 characters: letters, digits and . _ : / @ # -)",
            )
        )
        return None
    return value


def _claims(value: object, problems: list[dict[str, Any]]) -> tuple[Claim, ...]:
    items = _sequence("confirmed", value, problems)
    if items is None:
        return ()
    out: list[Claim] = []
    seen: set[tuple[str, str | None]] = set()
    for i, raw in enumerate(items):
        field = f"confirmed[{i}]"
        fact: object
        eid: object
        resolves: object
        if isinstance(raw, ConfirmedFact):
            # `version` is the archive's to set: it resolves the id, or keeps a carried fact's.
            fact, eid, resolves = raw.fact, raw.evidence_id, raw.resolves
        elif isinstance(raw, Mapping):
            unknown = sorted(str(k) for k in raw if k not in _CONFIRMED_FIELDS)
            if unknown:
                problems.append(
                    _problem(
                        field,
                        None,
                        "unknown_field",
                        f"unknown field(s) {', '.join(unknown)}; "
                        "a confirmed fact has fact, evidence_id, resolves",
                    )
                )
            fact, eid, resolves = raw.get("fact"), raw.get("evidence_id"), raw.get("resolves")
        else:
            problems.append(
                _problem(
                    field,
                    None,
                    "wrong_type",
                    f"must be {{fact, evidence_id, resolves?}}, got {type(raw).__name__}",
                )
            )
            continue
        wrong = _text_problem(fact, TEXT_LIMIT)
        if wrong is not None:
            problems.append(_problem(f"{field}.fact", fact, *wrong))
        evidence_id = _evidence_id(f"{field}.evidence_id", eid, problems)
        if resolves is not None:
            wrong = _text_problem(resolves, TEXT_LIMIT)
            if wrong is not None:
                problems.append(_problem(f"{field}.resolves", resolves, *wrong))
        fact_text = fact if isinstance(fact, str) else ""
        key = (fact_text, evidence_id)
        if key in seen:
            problems.append(
                _problem(field, fact_text, "duplicate", "the same fact with the same evidence appears twice")
            )
            continue
        seen.add(key)
        out.append(Claim(i, fact_text, evidence_id, resolves if isinstance(resolves, str) else None))
    return tuple(out)


def _releases(value: object, problems: list[dict[str, Any]]) -> tuple[Release, ...]:
    items = _sequence("release", value, problems)
    if items is None:
        return ()
    out: list[Release] = []
    for i, raw in enumerate(items):
        field = f"release[{i}]"
        item: object
        reason: object
        if isinstance(raw, ReleasedItem):
            item, reason = raw.item, raw.reason  # the kind is inferred from the previous version
        elif isinstance(raw, Mapping):
            unknown = sorted(str(k) for k in raw if k not in _RELEASE_FIELDS)
            if unknown:
                problems.append(
                    _problem(
                        field,
                        None,
                        "unknown_field",
                        f"unknown field(s) {', '.join(unknown)}; a release has item, reason",
                    )
                )
            item, reason = raw.get("item"), raw.get("reason")
        else:
            problems.append(
                _problem(field, None, "wrong_type", f"must be {{item, reason}}, got {type(raw).__name__}")
            )
            continue
        wrong = _text_problem(item, TEXT_LIMIT)
        if wrong is not None:
            problems.append(_problem(f"{field}.item", item, *wrong))
        wrong = _text_problem(reason, TEXT_LIMIT)
        if wrong is not None:
            code, message = wrong
            if code == "empty" or reason is None:
                code, message = "reason_required", "say why the item is let go of"
            problems.append(_problem(f"{field}.reason", item, code, message))
        if not isinstance(item, str):
            continue
        if any(r.item == item for r in out):
            problems.append(_problem(f"{field}.item", item, "duplicate", "is released twice"))
            continue
        out.append(Release(i, item, reason if isinstance(reason, str) else ""))
    return tuple(out)


def parse_proposal(
    *,
    goal: object,
    confirmed: object = (),
    unresolved: object = (),
    constraints: object = (),
    pending_operations: object = (),
    trace_ref: object = None,
    release: object = (),
) -> tuple[Proposal, list[dict[str, Any]]]:
    """The update as the archive will judge it, and every problem of its shape (pure).

    Wrong types are problems, never exceptions."""
    problems: list[dict[str, Any]] = []
    wrong = _text_problem(goal, TEXT_LIMIT)
    if wrong is not None:
        problems.append(_problem("goal", goal, *wrong))
    claims = _claims(confirmed, problems)
    open_unresolved = _texts("unresolved", unresolved, problems)
    kept_constraints = _texts("constraints", constraints, problems)
    pending = _texts("pending_operations", pending_operations, problems)
    if trace_ref is not None:
        wrong = _text_problem(trace_ref, TRACE_REF_LIMIT)
        if wrong is not None:
            problems.append(_problem("trace_ref", trace_ref, *wrong))
    proposal = Proposal(
        goal=goal if isinstance(goal, str) else "",
        confirmed=claims,
        unresolved=open_unresolved,
        constraints=kept_constraints,
        pending_operations=pending,
        trace_ref=trace_ref if isinstance(trace_ref, str) else None,
        release=_releases(release, problems),
    )
    return proposal, problems


# ---- the rules against the previous version (pure) -----------------------------------------


@dataclass(frozen=True)
class Resolution:
    """What a cited id resolved to for the writer: the normalised ref (`evidence:<id>`,
    `result:<session>/<rN>`, `memory:<owner>/<key>`), the evidence version, the sensitivity; or
    the problem (`evidence_not_found`, `evidence_forbidden`, `derived_not_evidence`)."""

    ref: str | None = None
    version: int | None = None
    sensitivity: Sensitivity = Sensitivity.INTERNAL
    problem: str | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.problem is None


def _previous_open(previous: TaskState | None) -> dict[str, str]:
    """The previous version's open items and the list each was in (the first, if in both)."""
    found: dict[str, str] = {}
    if previous is not None:
        for item in previous.pending_operations:
            found[item] = "pending_operations"
        for item in previous.unresolved:
            found[item] = "unresolved"
    return found


def release_kind(previous: TaskState | None, item: str) -> str | None:
    """What a released item was in the previous version: constraint, unresolved,
    pending_operation or confirmed (a fact, named by its text); None when it was none of them."""
    if previous is None:
        return None
    if item in previous.constraints:
        return "constraint"
    listed = _previous_open(previous).get(item)
    if listed is not None:
        return _KIND_OF_LIST[listed]
    return "confirmed" if any(c.fact == item for c in previous.confirmed) else None


def _definite_listings(previous: TaskState | None, proposal: Proposal) -> dict[str, str]:
    """Where the proposal lists each text in a definite list (the field of its first listing):
    `constraints[i]`, or `confirmed[i].fact` of a fact that does not name that text in
    `resolves`. A constraint, or a confirmed fact with the same evidence, the previous version
    already held is no new listing: a state written before this rule could hold an item both as
    open and as definite, and carrying it over unchanged must not refuse every later write (it
    is released as a constraint, or dropped as a fact, as usual)."""
    held = set(previous.constraints) if previous is not None else set()
    held_claims = {(c.fact, c.evidence_id) for c in previous.confirmed} if previous is not None else set()
    found: dict[str, str] = {}
    for i, item in enumerate(proposal.constraints):
        if item not in held:
            found.setdefault(item, f"constraints[{i}]")
    for claim in proposal.confirmed:
        if claim.resolves != claim.fact and (claim.fact, claim.evidence_id) not in held_claims:
            found.setdefault(claim.fact, f"confirmed[{claim.index}].fact")
    return found


def check_update(
    previous: TaskState | None, proposal: Proposal, resolved: Mapping[int, Resolution]
) -> list[dict[str, Any]]:
    """Every problem of `proposal` as the next version after `previous` (None: the first), given
    what each confirmed fact's evidence id resolved to (by claim index; a claim with no entry had
    no usable id, a problem already listed). Pure: no database, no clock."""
    problems: list[dict[str, Any]] = []
    for claim in proposal.confirmed:
        found = resolved.get(claim.index)
        if found is not None and found.problem is not None:
            problems.append(
                _problem(
                    f"confirmed[{claim.index}].evidence_id", claim.evidence_id, found.problem, found.message
                )
            )

    prev_open = _previous_open(previous)
    prev_constraints = set(previous.constraints) if previous is not None else set()
    carried = (
        {(c.fact, c.evidence_id): c.resolves for c in previous.confirmed} if previous is not None else {}
    )
    prev_facts = {c.fact for c in previous.confirmed} if previous is not None else set()
    now_claims = {(c.fact, c.evidence_id) for c in proposal.confirmed}
    kept_facts = (
        {c.fact for c in previous.confirmed if (c.fact, c.evidence_id) in now_claims} if previous else set()
    )
    now_open = proposal.open_items
    now_everywhere = now_open | set(proposal.constraints) | kept_facts
    released = {r.item for r in proposal.release}

    for r in proposal.release:
        if r.item not in prev_constraints and r.item not in prev_open and r.item not in prev_facts:
            problems.append(
                _problem(
                    f"release[{r.index}].item",
                    r.item,
                    "unknown_item",
                    "was not a constraint, unresolved item, pending operation or confirmed fact of the "
                    "previous version (released items are named exactly as they were written)",
                )
            )
        elif r.item in now_everywhere:
            problems.append(
                _problem(
                    f"release[{r.index}].item",
                    r.item,
                    "released_but_kept",
                    "is released and still listed: drop it from the lists, or do not release it",
                )
            )

    settled_by: dict[str, list[int]] = {}
    for claim in proposal.confirmed:
        if claim.resolves is None:
            continue
        key = (claim.fact, claim.evidence_id)
        if claim.evidence_id is not None and key in carried and carried[key] == claim.resolves:
            continue  # carried over with what it settled in an earlier version: judged then
        field = f"confirmed[{claim.index}].resolves"
        if claim.resolves not in prev_open:
            problems.append(
                _problem(
                    field,
                    claim.resolves,
                    "unknown_item",
                    "was not an unresolved item or pending operation of the previous version (name it "
                    "exactly as it was written; constraints are released, not resolved)",
                )
            )
        elif claim.resolves in now_open:
            problems.append(
                _problem(
                    field,
                    claim.resolves,
                    "resolved_but_kept",
                    "is settled by this fact and still listed as open: drop it from the open lists",
                )
            )
        else:
            settled_by.setdefault(claim.resolves, []).append(claim.index)

    if previous is not None:
        for item in previous.constraints:
            if item not in proposal.constraints and item not in released:
                problems.append(
                    _problem(
                        "constraints",
                        item,
                        "constraint_dropped",
                        "a constraint of the previous version is missing: keep it word for word, or "
                        "release it with a reason",
                    )
                )
        # Compression may shed a confirmed fact, but not reword it: a new text under the same
        # evidence ("delivery status unknown", then "delivery failed", both citing the timed-out
        # query) would turn what the evidence said into something else unnoticed.
        previous_claims = {(c.fact, c.evidence_id) for c in previous.confirmed}
        cited_now = {
            c.evidence_id for c in proposal.confirmed if (c.fact, c.evidence_id) not in previous_claims
        }
        for fact in previous.confirmed:
            if (
                (fact.fact, fact.evidence_id) not in now_claims
                and fact.evidence_id in cited_now
                and fact.fact not in released
            ):
                problems.append(
                    _problem(
                        "confirmed",
                        fact.fact,
                        "confirmed_reworded",
                        f"a confirmed fact of the previous version citing {fact.evidence_id} is replaced by "
                        "another text citing the same evidence: keep it word for word, or release it (by its "
                        "text) with a reason and state the new fact",
                    )
                )
    definite = _definite_listings(previous, proposal)
    for item, listed in prev_open.items():
        if item in released:
            continue  # a release that keeps it anywhere is `released_but_kept`, above
        where = definite.get(item)
        if where is not None:
            problems.append(
                _problem(where, item, "open_item_made_definite", _MADE_DEFINITE.format(listed=listed))
            )
            continue
        if item in now_open:
            continue
        settling = settled_by.get(item, [])
        if any(resolved.get(i) is not None and resolved[i].ok for i in settling):
            continue
        if settling:
            shown = ", ".join(f"confirmed[{i}]" for i in settling)
            message = (
                f"the fact that settles it ({shown}) cites evidence that does not resolve; fix that "
                "citation, or release the item with a reason"
            )
        else:
            message = _DROPPED_OPEN
        problems.append(_problem(listed, item, "open_item_dropped", message))
    return problems


# ---- what a task state cites (its resolution reads the database; its deletion cascade too) ----

_VERSIONED = re.compile(r"^(?P<base>.+)@(?P<version>[1-9][0-9]{0,8})$")


def split_versioned(evidence_id: str) -> tuple[str, int] | None:
    m = _VERSIONED.fullmatch(evidence_id)
    if m is None or not EVIDENCE_ID.fullmatch(m.group("base")):
        return None
    return m.group("base"), int(m.group("version"))


def cited_memory(evidence_id: str) -> MemoryIndexId | None:
    named = parse_index_id(evidence_id)
    return named if isinstance(named, MemoryIndexId) else None


def cited_result(evidence_id: str) -> ResultIndexId | None:
    named = parse_index_id(evidence_id)
    return named if isinstance(named, ResultIndexId) else None


def cited_refs(body_json: str) -> set[str]:
    """Every ref a body's confirmed facts may name: the stored normalised ref and what the cited
    id itself names (for `verify_deleted`: a body written by hand may lack the stored ref)."""
    found: set[str] = set()
    for c in json.loads(body_json).get("confirmed", []):
        if isinstance(c.get("ref"), str):
            found.add(c["ref"])
        eid = c.get("evidence_id")
        if not isinstance(eid, str):
            continue
        memory = cited_memory(eid)
        if cited_result(eid) is not None:
            found.add(eid)
        elif memory is not None:
            found.add(memory_ref(memory.owner, memory.key))
        else:
            found.add(evidence_ref(eid))
            versioned = split_versioned(eid)
            if versioned is not None:
                found.add(evidence_ref(versioned[0]))
    return found


def deleted_ref(ref: str, refs: Collection[str], sessions: Iterable[str]) -> bool:
    """Whether `ref` names something deleted: one of `refs`, or a result of a deleted session."""
    return ref in refs or any(ref.startswith(session_prefix(s)) for s in sessions)
