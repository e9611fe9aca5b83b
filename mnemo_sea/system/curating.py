"""`Mnemo.curate` and `Mnemo.recall`: curation an agent or a harness gets without scripting it.

`curate` applies the automatic policy (mnemo_sea/curation/policy.py) to a session: it sizes
each live result as the model is sent it, picks what to set aside by size, age and class, and
archives those results in one batch, each with its automatic note (curation/notes.py).

`recall` answers a need phrased as a query: it reads every result of the session the caller
may read (live ones, an excerpt's copy in view included, and archived originals), checks which
hold the need (curation/recall.py; a word no result holds is the asker's paraphrase, left out
while two terms remain), and picks the best holder: most of the need, then the one whose call
(tool, arguments, note) names it over one that merely mentions its words, then the window's
share, then one already in view (it costs nothing), then the newest. A live best answers "in
view"; an archived one's excerpt is recovered: a short original whole, a long one's window of
lines that carries most of the need. None holds it: "not found", with what was checked; never
a guess. The session's own originals are read directly (a session holds dozens of results, not
millions): exact, and current the moment they are archived.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mnemo_sea.archive import (
    DEFAULT_AROUND,
    ArchiveReceipt,
    Forbidden,
    IntegrityFailure,
    Principal,
    Recovered,
    ResultIndexId,
    Role,
    ToolResult,
    parse_index_id,
)
from mnemo_sea.archive.rules.excerpts import check_span
from mnemo_sea.curation import automatic_note
from mnemo_sea.curation.policy import CurationPolicy, Decision, LiveResult, plan
from mnemo_sea.curation.recall import Holding, Need, Reading, holding_of, read

if TYPE_CHECKING:
    from mnemo_sea.system.mnemo import Mnemo


@dataclass(frozen=True)
class ArchivedByPolicy:
    result_id: str
    reason: str  # "large": a large result the agent moved past; "budget": the oldest, to fit
    tokens: int
    note: str


@dataclass(frozen=True)
class CurationReport:
    session_id: str
    archived: tuple[ArchivedByPolicy, ...]
    live_tokens_before: int
    live_tokens_after: int
    receipt: ArchiveReceipt | None  # None when nothing was due
    recall: RecallResult | None = None  # what `need` brought back, when one was given


RecallStatus = Literal["recovered", "in_view", "ambiguous", "not_found"]


@dataclass(frozen=True)
class RecallResult:
    """What a recall found. `recovered`: the excerpt appended to the session (`recovered`), lines
    `lines` of `result_id` (all of a short original); `in_view`: a live result holds the need
    already (`result_id`, `lines`); `ambiguous`: lines of an archived result far apart hold it
    alike, too many to bring back (`lines` spans them; nothing recovered: say what singles the
    need out); `not_found`: no result holds it. `checked` lists every
    result looked at, in order (a binary original, or one failing its hash, holds nothing);
    `score` is the share of the need's terms the result carries."""

    query: str
    status: RecallStatus
    checked: tuple[str, ...]
    result_id: str | None = None
    lines: tuple[int, int] | None = None
    score: float | None = None
    recovered: Recovered | None = None


def curate(
    mnemo: Mnemo,
    principal: Principal,
    session_id: str,
    policy: CurationPolicy,
    idempotency_key: str | None,
    keep: frozenset[str] = frozenset(),
) -> CurationReport:
    """`keep`: results to leave in view whatever the policy says (what a recall just brought)."""
    principal.require(Role.AGENT, "curating a session")
    view = mnemo.live_view(principal, session_id)
    protected = mnemo.archive.policy.is_protected
    copies = any(i.result.recovered_from is not None and i.result.state == "live" for i in view.items)
    cited = _cited_results(mnemo, principal, session_id) if copies else frozenset()
    live = [
        LiveResult(
            i.result.result_id,
            mnemo.token_counter.count(i.rendered),
            protected(i.result.policy_class) or i.result.result_id in keep,
            principal.can_read(i.result.sensitivity),
            i.result.recovered_from is not None and not {i.result.result_id, i.result.recovered_from} & cited,
        )
        for i in view.items
        if i.result.state == "live"
    ]
    decided = plan(live, policy)
    if not decided.archive:
        return CurationReport(session_id, (), decided.live_tokens_before, decided.live_tokens_after, None)
    by_id = {i.result.result_id: i.result for i in view.items}
    archived = tuple(_noted(mnemo, principal, session_id, d, by_id[d.result_id]) for d in decided.archive)
    targets = [(a.result_id, a.note) for a in archived]
    # The key stands for this batch: a retry that plans the same batch replays it; once it is
    # archived, a retry plans nothing and archives nothing (a key never meets another batch).
    key = part_key(idempotency_key, "curate", json.dumps(targets, ensure_ascii=False))
    receipt = mnemo.archive_results(principal, session_id, targets, idempotency_key=key)
    return CurationReport(
        session_id, archived, decided.live_tokens_before, decided.live_tokens_after, receipt
    )


def _cited_results(mnemo: Mnemo, principal: Principal, session_id: str) -> frozenset[str]:
    """The session's results its current task state cites (`result:<session>/<rN>`), by id.
    A task state above the caller's clearance cites nothing it may know of."""
    try:
        state = mnemo.archive.task_state(principal, session_id)
    except Forbidden:
        return frozenset()
    named = [parse_index_id(f.evidence_id) for f in (() if state is None else state.confirmed)]
    return frozenset(
        n.result_id for n in named if isinstance(n, ResultIndexId) and n.session_id == session_id
    )


def _noted(
    mnemo: Mnemo, principal: Principal, session_id: str, decision: Decision, result: ToolResult
) -> ArchivedByPolicy:
    _, _, content = mnemo.archive.read_result(principal, session_id, decision.result_id)
    note = automatic_note(result.tool_name, result.arguments, content or b"", result.media_type)
    return ArchivedByPolicy(decision.result_id, decision.reason, decision.tokens, note)


def recall(
    mnemo: Mnemo,
    principal: Principal,
    session_id: str,
    query: str,
    around: int,
    idempotency_key: str | None,
) -> RecallResult:
    principal.require(Role.AGENT, "recalling evidence")
    check_span(around=around)
    need = Need.of(query)
    listed = mnemo.archive.list_results(principal, session_id)
    # Every live result (an excerpt's copy in view included) and every archived original; an
    # archived excerpt's copy is skipped: its original holds all it holds.
    candidates = [
        r
        for r in listed
        if principal.can_read(r.sensitivity)
        and (r.state == "live" or (r.state == "archived" and r.excerpt is None))
    ]
    checked = [r.result_id for r in candidates]
    # A recovered copy is described as its original is (its note, tool and arguments): the same
    # text, so an original never outranks its own copy in view.
    by_id = {r.result_id: r for r in listed}
    readings = [
        (r, x)
        for r in candidates
        if (x := _read(mnemo, principal, session_id, r, by_id.get(r.recovered_from or "", r), need))
        is not None
    ]
    asked = need.within(frozenset().union(*(x.terms for _, x in readings)))
    # The best holder, live or archived: most of the need, then a call about it (a result that
    # only mentions the need's words loses to the one whose tool and arguments name them), then
    # the window's share, then already in view (it costs nothing), then the newest.
    best: tuple[tuple[float, float, float, bool, int], Holding, ToolResult, Reading] | None = None
    for n, (r, reading) in enumerate(readings):
        held = holding_of(reading, asked, around)
        if held is None:
            continue
        rank = (held.score, asked.weight(reading.described), held.window_score, r.state == "live", n)
        if best is None or rank > best[0]:
            best = (rank, held, r, reading)
    if best is None:
        return RecallResult(query, "not_found", tuple(checked))
    _, held, source, reading = best
    score = need.weight(reading.terms)  # the share of the need as asked, not of the narrowed one
    if source.state == "live":
        # An excerpt's copy shows part of its original: its lines are the original's.
        shift = 0 if source.excerpt is None else source.excerpt.first_line - 1
        span = (held.first_line + shift, held.last_line + shift)
        return RecallResult(query, "in_view", tuple(checked), source.result_id, span, score)
    if held.ambiguous:
        span = (held.first_line, held.last_line)
        return RecallResult(query, "ambiguous", tuple(checked), source.result_id, span, score)
    cut = None if held.whole else (held.first_line, held.last_line)
    # The key stands for this recovery (a retry that finds the same recovers it once).
    key = part_key(idempotency_key, "recover", f"{source.result_id}\x1f{cut}")
    found = mnemo.recover(principal, session_id, source.result_id, lines=cut, idempotency_key=key)
    return RecallResult(
        query,
        "recovered",
        tuple(checked),
        source.result_id,
        (held.first_line, held.last_line),
        score,
        found,
    )


def _described(r: ToolResult) -> str:
    """What describes a result as a whole: its note, tool and arguments."""
    return f"{r.note or ''}\n{r.tool_name}\n{json.dumps(r.arguments, ensure_ascii=False)}"


def part_key(idempotency_key: str | None, part: str, detail: str = "") -> str | None:
    """The key of one part of a call that makes more than one write (curate with a need: a
    recovery and an archive batch): a key stands for one request, so each part gets its own,
    derived from the caller's key, the part's name and what it writes (`detail`), the same on a
    retry that writes the same."""
    if idempotency_key is None:
        return None
    seed = "\x1f".join((idempotency_key, part, detail)).encode("utf-8", "surrogatepass")
    return f"{part}:{hashlib.sha256(seed).hexdigest()[:40]}"


def _read(
    mnemo: Mnemo, principal: Principal, session_id: str, result: ToolResult, described: ToolResult, need: Need
) -> Reading | None:
    """The result's original read for `need`, with the description of `described`; None for a
    binary one (it holds no line) and for one whose bytes fail their hash: recall never quotes
    it, and the other results may still hold the need (the failure is in the audit trail, and
    `recover` or fsck names it)."""
    try:
        _, _, content = mnemo.archive.read_result(principal, session_id, result.result_id)
    except IntegrityFailure:
        return None
    if content is None:
        return None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return read(text, _described(described), need)


__all__ = ["DEFAULT_AROUND", "ArchivedByPolicy", "CurationReport", "RecallResult", "curate", "recall"]
