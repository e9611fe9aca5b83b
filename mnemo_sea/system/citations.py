"""Citation checks: does each citation of an answer resolve, hold at the answer's time, and say
what it quotes?

A citation names what it cites (`evidence_id`, optionally a `version`), a `quote` from it and
optionally a `locator` (section, page). Every id a search returns can be cited, with the same
verdicts:

- an evidence record's id: the quote is checked against its original;
- `result:<session>/<rN>`, a session's tool result: against the original of a live result, and
  for an archived one its note (what search returns; it exists from the archiving on) or, for a
  principal who may recover it (agent role), its original. Version 1 (the note), or the version
  of a page of its original that a search hit names (2 and up: the quote is then checked
  against the original); locator `<session>/<rN>`;
- `memory:<owner>/<key>`, a memory fact: the version's `key: value` as search shows it, held
  from its write until superseded, valid until its TTL expiry; locator `<owner>/<key>`;
- `sum:<id>`, a summary: its text, from its creation on. Version 1 only; locator its trace_ref.

An evidence record of the id comes first (evidence ids are caller-given and may look like the
others). `check_citations` reads the archive as the given principal and, for each citation,
answers:

- does it resolve for this principal? A missing id, a deleted one and another tenant's id get
  the same answer (`unresolved`), so the check is never an oracle for other tenants' data;
  an id in the principal's tenant it may not read (clearance; another owner's evidence,
  session or summary for a reader; role) is `forbidden`. A `memory:` id of another owner is
  `forbidden` for a reader whether or not the fact exists: the id names the owner, so the
  answer says nothing the id does not;
- which version was checked: the cited one, else the one in force at `answered_at` (the
  archive's `as_of` rule: current in the archive at that time and valid in the world then);
  when none was, the latest version recorded by then (or the first one, if all came later);
- was that version valid at `answered_at`, and has it been retracted or superseded (before
  the answer, or since)?
- does the quote appear verbatim in the original? Both sides are NFC-normalised and runs of
  whitespace collapse to one space, except next to Chinese/Japanese characters and
  full-width punctuation, where whitespace is dropped (those scripts put no spaces between
  words, so a hard line break inside a Chinese sentence must not break a quote). The match
  is case-sensitive, punctuation is kept as written (full-width and ASCII commas differ),
  and a match must not start or end inside a word or a number (`5 mg` is not in `0.5 mg`);
- does the given locator equal the record's (after the same normalisation)?

Each citation gets one verdict: the first of these that applies, in this order.

    invalid          the citation is malformed (empty quote, malformed id, bad version, unknown field)
    unresolved       nothing with this id (and version) exists for this principal's tenant
    forbidden        it exists, but this principal may not read it
    quote_not_found  the quote is not in the original
    locator_mismatch a locator was given and differs from the record's
    retracted        the checked version was withdrawn (before or after the answer)
    stale_version    the checked version had already been superseded when the answer was given
    invalid_at_time  the checked version was not valid at the answer's time (outside valid_from
                     .. valid_until, or recorded only after the answer)
    superseded       it held at the answer's time, but a newer version has replaced it since
    ok               resolves, holds at the answer's time, unchanged since, and says the quote

Content problems come before time problems: a quote that is not in the source is a
fabrication whatever the record's state. Every individual finding is also reported field by
field, so a caller can weigh them differently. Citation precision = ok / total.

Bad input: the container must be a list or tuple (anything else raises InvalidInput: that is
the caller's bug). A malformed *item* — what a model wrote — gets the verdict `invalid` and
counts against precision, because a broken citation is the answer's failure. A `Citation`
object is validated when it is built (its constructor raises InvalidInput). A store that is
unavailable raises (StoreUnavailable) and a corrupt original raises (IntegrityFailure): neither
is ever turned into a verdict.

`load_citations_jsonl(path)` reads a file of answers, one JSON object per line:
`{"id": "a1", "answered_at": "2026-10-20T09:00:00+00:00", "citations": [{...}, ...]}`
(`id` and `answered_at` optional, other keys ignored; the tenant always comes from the
principal, never from the file). Malformed lines raise MalformedCitationsFile listing every
bad line with its number; it also carries the good lines for callers that accept partial input.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal, get_args

from mnemo_sea.archive import (
    Archive,
    ContentTooLarge,
    EvidenceRecord,
    Forbidden,
    InvalidInput,
    NotFound,
    Principal,
    ToolResult,
    limits,
)
from mnemo_sea.archive.rules.checks import aware
from mnemo_sea.archive.rules.clock import utcnow
from mnemo_sea.archive.rules.in_force import in_force, valid_at
from mnemo_sea.archive.rules.original_pages import page_count, page_of_version
from mnemo_sea.archive.rules.refs import (
    SUMMARY_PREFIX,
    MemoryIndexId,
    ResultIndexId,
    check_evidence_id,
    parse_index_id,
)
from mnemo_sea.system.json_text import JsonTooDeep, parse_json

Verdict = Literal[
    "ok",
    "invalid",
    "unresolved",
    "forbidden",
    "quote_not_found",
    "locator_mismatch",
    "retracted",
    "stale_version",
    "invalid_at_time",
    "superseded",
]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
VersionSource = Literal["given", "in_force", "fallback"]

MAX_CITATIONS = limits.CITATIONS
QUOTE_LIMIT = limits.QUOTE_CHARS
LOCATOR_LIMIT = limits.LOCATOR_CHARS
JSONL_LIMIT = 64 * 1024 * 1024
_FIELDS = ("evidence_id", "version", "quote", "locator")


# ---- text normalisation and quote matching --------------------------------------------------------

_SPACE = re.compile(r"[\s\u200b\u2060\ufeff]+")
# Scripts written without spaces between words, plus their punctuation and full-width forms.
# Hangul is left out on purpose: Korean separates words with spaces.
_UNSPACED = re.compile(
    "[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u31a0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f]"
)


def _unspaced(ch: str) -> bool:
    return _UNSPACED.match(ch) is not None


def normalise_text(text: str) -> str:
    """NFC, whitespace runs collapsed to one space (dropped next to CJK characters), trimmed."""
    text = unicodedata.normalize("NFC", text)

    def join(m: re.Match[str]) -> str:
        start, end = m.start(), m.end()
        if start == 0 or end == len(text) or _unspaced(text[start - 1]) or _unspaced(text[end]):
            return ""
        return " "

    return _SPACE.sub(join, text)


def _wordy(ch: str) -> bool:
    return ch.isalnum() and not _unspaced(ch)


def _starts_inside(text: str, start: int, first: str) -> bool:
    if start == 0:
        return False
    if _wordy(text[start - 1]) and _wordy(first):
        return True
    # "5 mg" inside "0.5 mg" or "1,5 mg": the match would begin inside a number.
    return first.isdigit() and start >= 2 and text[start - 1] in ".," and text[start - 2].isdigit()


def _ends_inside(text: str, end: int, last: str) -> bool:
    if end == len(text):
        return False
    if _wordy(text[end]) and _wordy(last):
        return True
    return last.isdigit() and end + 1 < len(text) and text[end] in ".," and text[end + 1].isdigit()


def quote_in_text(quote: str, text: str) -> bool:
    """Whether `quote` appears verbatim in `text` after `normalise_text` on both, starting and
    ending on word (and number) boundaries; Chinese text has no word boundaries to respect."""
    q, t = normalise_text(quote), normalise_text(text)
    if not q:
        return False
    start = t.find(q)
    while start != -1:
        if not _starts_inside(t, start, q[0]) and not _ends_inside(t, start + len(q), q[-1]):
            return True
        start = t.find(q, start + 1)
    return False


# ---- citations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Citation:
    """One citation of an answer. Validated when built: InvalidInput names the bad field.

    An empty or whitespace-only `locator` means "no locator given".
    """

    evidence_id: str
    quote: str
    version: int | None = None
    locator: str | None = None

    def __post_init__(self) -> None:
        check_evidence_id(self.evidence_id)
        if not isinstance(self.quote, str):
            raise InvalidInput("quote", f"must be a string, got {type(self.quote).__name__}")
        if not normalise_text(self.quote):
            raise InvalidInput("quote", "must not be empty")
        if len(self.quote) > QUOTE_LIMIT:
            raise InvalidInput("quote", f"is {len(self.quote)} characters; the limit is {QUOTE_LIMIT}")
        if self.version is not None and (
            isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1
        ):
            raise InvalidInput("version", f"must be a positive integer, got {self.version!r}")
        if self.locator is not None:
            if not isinstance(self.locator, str):
                raise InvalidInput("locator", f"must be a string, got {type(self.locator).__name__}")
            if len(self.locator) > LOCATOR_LIMIT:
                raise InvalidInput("locator", f"is longer than {LOCATOR_LIMIT} characters")
            if not normalise_text(self.locator):
                object.__setattr__(self, "locator", None)

    @classmethod
    def parse(cls, value: object) -> Citation:
        """A Citation from a Citation or a mapping with the fields evidence_id, quote, version, locator."""
        if isinstance(value, Citation):
            return value
        if not isinstance(value, Mapping):
            raise InvalidInput(
                "citation", f"must be an object with {', '.join(_FIELDS)}, got {type(value).__name__}"
            )
        unknown = sorted(str(k) for k in value if k not in _FIELDS)
        if unknown:
            raise InvalidInput(
                "citation", f"unknown field(s) {', '.join(map(repr, unknown))}; expected {', '.join(_FIELDS)}"
            )
        for required in ("evidence_id", "quote"):
            if required not in value:
                raise InvalidInput(required, "is required")
        return cls(
            evidence_id=value["evidence_id"],
            quote=value["quote"],
            version=value.get("version"),
            locator=value.get("locator"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence_id": self.evidence_id,
            "version": self.version,
            "quote": self.quote,
            "locator": self.locator,
        }


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


@dataclass(frozen=True)
class CitationCheck:
    """The findings for one citation. Fields that could not be determined are None."""

    index: int
    verdict: Verdict
    reason: str
    citation: Citation | None  # None when the item was malformed
    resolves: bool = False
    version_checked: int | None = None
    version_source: VersionSource | None = None
    status: str | None = None  # the checked version's status now: active | superseded | retracted
    ended_at: datetime | None = None  # when it stopped being the current version
    superseded_by: int | None = None
    valid_at_answer: bool | None = None  # in force and valid at answered_at (the archive's as_of rule)
    changed_since_answer: bool | None = None  # superseded or retracted after answered_at
    quote_found: bool | None = None
    locator_matches: bool | None = None
    record_locator: str | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "verdict": self.verdict,
            "reason": self.reason,
            "citation": None if self.citation is None else self.citation.to_dict(),
            "resolves": self.resolves,
            "version_checked": self.version_checked,
            "version_source": self.version_source,
            "status": self.status,
            "ended_at": _iso(self.ended_at),
            "superseded_by": self.superseded_by,
            "valid_at_answer": self.valid_at_answer,
            "changed_since_answer": self.changed_since_answer,
            "quote_found": self.quote_found,
            "locator_matches": self.locator_matches,
            "record_locator": self.record_locator,
        }


def _summary(checks: Sequence[CitationCheck]) -> dict[str, Any]:
    counts = Counter(c.verdict for c in checks)
    total, ok = len(checks), counts["ok"]
    return {
        "total": total,
        "ok": ok,
        "precision": None if total == 0 else ok / total,
        "counts": {v: counts[v] for v in VERDICTS},
    }


@dataclass(frozen=True)
class CitationReport:
    """The checks of one answer's citations, in order, and their precision (None with no citations)."""

    answered_at: datetime
    checked_at: datetime
    checks: tuple[CitationCheck, ...]

    @property
    def total(self) -> int:
        return len(self.checks)

    @property
    def ok(self) -> int:
        return sum(c.ok for c in self.checks)

    @property
    def precision(self) -> float | None:
        return None if not self.checks else self.ok / len(self.checks)

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = _summary(self.checks)["counts"]
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "answered_at": _iso(self.answered_at),
            "checked_at": _iso(self.checked_at),
            **_summary(self.checks),
            "citations": [c.to_dict() for c in self.checks],
        }


@dataclass(frozen=True)
class _Cited:
    """The version a citation resolved to, whatever its kind: what the verdicts read.

    `recorded_at`/`ended_at` are transaction time (when it entered the archive, when it stopped
    being current), `valid_from`/`valid_until` valid time; `text` is what the quote must be in
    (None: not text, `media_type` says what it is instead).
    """

    name: str  # for reasons: "policy:x@2", "memory:u-1/pet@1"
    version: int
    status: str  # active | superseded | retracted
    recorded_at: datetime
    ended_at: datetime | None
    valid_from: datetime | None
    valid_until: datetime | None
    superseded_by: int | None
    locator: str
    text: str | None
    media_type: str = "text/plain; charset=utf-8"

    def in_force(self, at: datetime) -> bool:
        # Transaction time, as in the archive's as_of reads: the archive's current version then.
        return in_force(self.recorded_at, self.ended_at, at)

    def valid_at(self, at: datetime) -> bool:
        return valid_at(self.valid_from, self.valid_until, at)


def _evidence(rec: EvidenceRecord, content: bytes | None) -> _Cited:
    return _Cited(
        name=f"{rec.evidence_id}@{rec.version}",
        version=rec.version,
        status=rec.status,
        recorded_at=rec.recorded_at,
        ended_at=rec.ended_at,
        valid_from=rec.valid_from,
        valid_until=rec.valid_until,
        superseded_by=rec.version + 1 if rec.status == "superseded" else None,
        locator=rec.locator,
        text=None if content is None else _decode(content, rec.media_type),
        media_type=rec.media_type,
    )


def _resolve_evidence(
    archive: Archive, principal: Principal, citation: Citation, at: datetime
) -> tuple[_Cited, VersionSource]:
    eid = citation.evidence_id
    if citation.version is not None:
        rec, content = archive.get_evidence(principal, eid, version=citation.version, with_content=True)
        return _evidence(rec, content), "given"
    try:
        rec, content = archive.get_evidence(principal, eid, as_of=at, with_content=True)
        return _evidence(rec, content), "in_force"
    except NotFound:
        # Nothing answered at that time. Check what the answer most plausibly saw: the latest
        # version recorded by then (it may have been retracted, or outside its valid time),
        # else the first one (recorded only after the answer).
        history = archive.evidence_history(principal, eid)
        before = [r for r in history if r.recorded_at <= at]
        pick = before[-1] if before else history[0]
        rec, content = archive.get_evidence(principal, eid, version=pick.version, with_content=True)
        return _evidence(rec, content), "fallback"


def _only_version_one(citation: Citation, what: str) -> None:
    if citation.version not in (None, 1):
        raise NotFound(what, f"{citation.evidence_id}@{citation.version}")


def _resolve_result(
    archive: Archive, principal: Principal, citation: Citation, at: datetime
) -> tuple[_Cited, VersionSource]:
    """`result:<session>/<rN>`: the quote may come from what the principal can read under that
    id: the original of a live result; an archived one's note (what search returns, written when
    it was archived) or, for an agent who may recover it, its original."""
    named = parse_index_id(citation.evidence_id)
    assert isinstance(named, ResultIndexId)  # _derived_resolver chose this resolver by the id
    session_id, rid = named.session_id, named.result_id
    result, archived_at, content = archive.read_result(principal, session_id, rid)
    # The index's versions of a result: 1 its note, 2 and up the pages of its original.
    page = None if citation.version is None else page_of_version(citation.version)
    # A recovered copy has no pages of its own (its source's original is indexed).
    copy = result.recovered_from is not None
    if page is not None and (archived_at is None or copy or page >= page_count(result.size)):
        raise NotFound("result", f"{citation.evidence_id}@{citation.version}")
    original = None if content is None else _decode(content, result.media_type)
    texts: list[tuple[str, datetime]] = []
    if original is not None:
        # A page exists from the archiving on, as the note does; a live result's original always.
        since = archived_at if page is not None and archived_at is not None else result.recorded_at
        texts.append((original, since))
    if page is None and archived_at is not None and result.note is not None:
        texts.append((result.note, archived_at))  # the note exists from its archiving on
    # The text holding the quote; without one, the note when there is one (what search showed).
    match = next((x for x in texts if quote_in_text(citation.quote, x[0])), None)
    text, since = match or (texts[-1] if texts else (None, result.recorded_at))
    version = citation.version or 1
    cited = _Cited(
        name=f"{citation.evidence_id}@{version}",
        version=version,
        status="active",
        recorded_at=since,
        ended_at=None,
        valid_from=None,
        valid_until=None,
        superseded_by=None,
        locator=_result_locator(session_id, result),
        text=text,
        media_type="text/plain; charset=utf-8" if text is not None else result.media_type,
    )
    return cited, "given" if citation.version is not None else "in_force"


def _result_locator(session_id: str, result: ToolResult) -> str:
    """Where a cited result's text is: the result, or for an excerpt's copy the lines and bytes of
    the original it shows (the copy is cited, its text is the original's)."""
    if result.excerpt is None:
        return f"{session_id}/{result.result_id}"
    return f"{session_id}/{result.recovered_from} {result.excerpt.describe()}"


def _resolve_memory(
    archive: Archive, principal: Principal, citation: Citation, at: datetime
) -> tuple[_Cited, VersionSource]:
    """`memory:<owner>/<key>`: a fact version, read as search shows it (`key: value`), valid
    from its write until superseded, and not after its TTL expiry. For a principal that may not
    act for the owner the answer is forbidden whether or not the fact exists: the id itself names
    the owner, so the answer reveals nothing beyond it."""
    named = parse_index_id(citation.evidence_id)
    assert isinstance(named, MemoryIndexId)  # _derived_resolver chose this resolver by the id
    owner, key = named.owner, named.key
    history = archive.memory_history(principal, owner, key)
    if not history:
        raise NotFound("memory", citation.evidence_id)
    # A version stops being current when the next one is written (the same instant).
    ended = {fact.version: nxt.created_at for fact, nxt in pairwise(history)}
    following = {fact.version: nxt.version for fact, nxt in pairwise(history)}
    source: VersionSource
    if citation.version is not None:
        pick = next((f for f in history if f.version == citation.version), None)
        if pick is None:
            raise NotFound("memory", f"{citation.evidence_id}@{citation.version}")
        source = "given"
    else:
        held = [f for f in history if in_force(f.created_at, ended.get(f.version), at)]
        if held and not held[-1].expired(at):
            pick, source = held[-1], "in_force"
        else:
            before = [f for f in history if f.created_at <= at]
            pick, source = (before[-1] if before else history[0]), "fallback"
    superseded = pick.status == "superseded"
    cited = _Cited(
        name=f"{citation.evidence_id}@{pick.version}",
        version=pick.version,
        status=pick.status,
        recorded_at=pick.created_at,
        ended_at=ended.get(pick.version) if superseded else None,
        valid_from=None,
        valid_until=pick.expires_at,
        superseded_by=following.get(pick.version) if superseded else None,
        locator=f"{owner}/{key}",
        text=f"{pick.key}: {pick.value}",
    )
    return cited, source


def _resolve_summary(
    archive: Archive, principal: Principal, citation: Citation, at: datetime
) -> tuple[_Cited, VersionSource]:
    """A summary id: its text, from its creation on (a summary is never superseded)."""
    _only_version_one(citation, "summary")
    found = archive.get_summary(principal, citation.evidence_id)
    cited = _Cited(
        name=f"{found.summary_id}@1",
        version=1,
        status="active",
        recorded_at=found.created_at,
        ended_at=None,
        valid_from=None,
        valid_until=None,
        superseded_by=None,
        locator=found.trace_ref or "",
        text=found.text,
    )
    return cited, "given" if citation.version is not None else "in_force"


Resolver = Callable[[Archive, Principal, Citation, datetime], tuple[_Cited, VersionSource]]


def _derived_resolver(evidence_id: str) -> Resolver | None:
    """How to read an id that search gives to something other than an evidence record."""
    named = parse_index_id(evidence_id)
    if isinstance(named, ResultIndexId):
        return _resolve_result
    if isinstance(named, MemoryIndexId):
        return _resolve_memory
    if evidence_id.startswith(SUMMARY_PREFIX):
        return _resolve_summary
    return None


def _resolve(
    archive: Archive, principal: Principal, citation: Citation, at: datetime
) -> tuple[_Cited, VersionSource]:
    # An evidence record of that id comes first: evidence ids are caller-given and were citable
    # before derived ids were, so a citation that resolved to evidence still does.
    try:
        return _resolve_evidence(archive, principal, citation, at)
    except NotFound:
        derived = _derived_resolver(citation.evidence_id)
        if derived is None:
            raise
    try:
        return derived(archive, principal, citation, at)
    except InvalidInput:
        # Shaped like a derived id but naming nothing the archive could hold (`memory:/x`).
        raise NotFound("evidence", citation.evidence_id) from None


def _check_one(
    archive: Archive, principal: Principal, index: int, item: object, at: datetime
) -> CitationCheck:
    try:
        citation = Citation.parse(item)
    except InvalidInput as e:
        return CitationCheck(index, "invalid", e.message, None)
    ref = citation.evidence_id if citation.version is None else f"{citation.evidence_id}@{citation.version}"
    try:
        rec, source = _resolve(archive, principal, citation, at)
    except NotFound:
        # One message for missing, deleted and other tenants' ids.
        return CitationCheck(
            index, "unresolved", f"no evidence {ref!r} is visible to this principal", citation
        )
    except Forbidden as e:
        return CitationCheck(index, "forbidden", e.message, citation)

    text = rec.text
    quote_found = text is not None and quote_in_text(citation.quote, text)
    locator_matches = (
        None if citation.locator is None else normalise_text(citation.locator) == normalise_text(rec.locator)
    )
    current_then = rec.in_force(at)
    valid_at_answer = current_then and rec.valid_at(at)
    ended_before = rec.ended_at is not None and rec.ended_at <= at
    changed_since = rec.ended_at is not None and rec.ended_at > at
    superseded_by = rec.superseded_by
    name = rec.name
    when = at.isoformat()
    verdict: Verdict
    if not quote_found:
        verdict = "quote_not_found"
        reason = (
            f"the original of {name} is not text ({rec.media_type}); no quote can match"
            if text is None
            else f"the quote does not appear in {name} (compared after whitespace and Unicode normalisation)"
        )
    elif locator_matches is False:
        verdict = "locator_mismatch"
        reason = f"locator {citation.locator!r} does not match {name}'s locator {rec.locator!r}"
    elif rec.status == "retracted":
        verdict = "retracted"
        side = "before" if ended_before else "after"
        reason = f"{name} was retracted at {_iso(rec.ended_at)}, {side} the answer at {when}"
    elif rec.status == "superseded" and ended_before:
        verdict = "stale_version"
        reason = (
            f"{name} had been superseded by version {superseded_by} at {_iso(rec.ended_at)}, "
            f"before the answer at {when}"
        )
    elif not valid_at_answer:
        verdict = "invalid_at_time"
        if rec.recorded_at > at:
            reason = f"{name} was recorded at {rec.recorded_at.isoformat()}, after the answer at {when}"
        else:
            reason = (
                f"{name} is valid from {_iso(rec.valid_from) or 'the start'} until "
                f"{_iso(rec.valid_until) or 'further notice'}; the answer at {when} is outside that"
            )
    elif rec.status == "superseded":
        verdict = "superseded"
        reason = (
            f"{name} held at the answer's time but was superseded by version {superseded_by} "
            f"at {_iso(rec.ended_at)}"
        )
    else:
        verdict = "ok"
        reason = f"{name} held at {when}, is unchanged since, and contains the quote"
    if source == "fallback":
        reason = (
            f"no version of {citation.evidence_id} was in force at {when}; "
            f"checked version {rec.version}: {reason}"
        )

    return CitationCheck(
        index=index,
        verdict=verdict,
        reason=reason,
        citation=citation,
        resolves=True,
        version_checked=rec.version,
        version_source=source,
        status=rec.status,
        ended_at=rec.ended_at,
        superseded_by=superseded_by,
        valid_at_answer=valid_at_answer,
        changed_since_answer=changed_since,
        quote_found=quote_found,
        locator_matches=locator_matches,
        record_locator=rec.locator,
    )


_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([A-Za-z0-9._:-]+)", re.IGNORECASE)


def _decode(content: bytes, media_type: str) -> str | None:
    """The original as text: in the media type's charset (UTF-8 when none), else None (binary)."""
    m = _CHARSET.search(media_type)
    try:
        return content.decode(m.group(1) if m else "utf-8")
    except (UnicodeDecodeError, LookupError):
        return None


def check_citations(
    archive: Archive,
    principal: Principal,
    citations: Sequence[Citation | Mapping[str, Any]],
    *,
    answered_at: datetime | None = None,
) -> CitationReport:
    """Check every citation of one answer as `principal` would see the archive.

    `answered_at` (time-zone aware) is when the answer was given; None means now. Raises
    InvalidInput when `citations` is not a list or tuple, holds more than MAX_CITATIONS
    items, or `answered_at` is naive; StoreUnavailable / IntegrityFailure from the archive
    propagate. Reads only: the archive's audit chain records denied reads, as for any read.
    """
    if not isinstance(citations, list | tuple):
        raise InvalidInput("citations", f"must be a list of citations, got {type(citations).__name__}")
    if len(citations) > MAX_CITATIONS:
        raise InvalidInput("citations", f"holds {len(citations)} items; the limit is {MAX_CITATIONS}")
    checked_at = utcnow()
    at = aware("answered_at", answered_at) or checked_at
    checks = tuple(_check_one(archive, principal, i, item, at) for i, item in enumerate(citations))
    return CitationReport(answered_at=at, checked_at=checked_at, checks=checks)


# ---- answers from JSONL --------------------------------------------------------------------------


@dataclass(frozen=True)
class CitedAnswer:
    """One answer of a JSONL file: its citations stay raw, so a malformed one gets a verdict."""

    line: int
    citations: tuple[Any, ...]
    answer_id: str | None = None
    answered_at: datetime | None = None


@dataclass(frozen=True)
class LineProblem:
    line: int
    problem: str


class MalformedCitationsFile(InvalidInput):
    """Some lines of a citations file are malformed. `problems` names each; `answers` holds the good lines."""

    code = "malformed_jsonl"

    def __init__(self, path: str, problems: Sequence[LineProblem], answers: Sequence[CitedAnswer]) -> None:
        shown = "; ".join(f"line {p.line}: {p.problem}" for p in problems[:20])
        if len(problems) > 20:
            shown += f"; and {len(problems) - 20} more"
        super().__init__(
            "file",
            f"{path}: {len(problems)} malformed line(s): {shown}",
            path=path,
            lines=[{"line": p.line, "problem": p.problem} for p in problems],
        )
        self.problems = tuple(problems)
        self.answers = tuple(answers)


def _parse_line(number: int, raw: bytes) -> CitedAnswer:
    """One line as a CitedAnswer; ValueError with the problem when it is malformed."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 (byte {e.start})") from None
    try:
        obj = parse_json(text, f"line {number}")
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at column {e.colno})") from None
    except JsonTooDeep as e:
        raise ValueError(e.problem) from None
    if not isinstance(obj, dict):
        raise ValueError(f"must be a JSON object, got {type(obj).__name__}")
    if "citations" not in obj:
        raise ValueError("has no 'citations' list")
    cites = obj["citations"]
    if not isinstance(cites, list):
        raise ValueError(f"'citations' must be a list, got {type(cites).__name__}")
    if len(cites) > MAX_CITATIONS:
        raise ValueError(f"'citations' holds {len(cites)} items; the limit is {MAX_CITATIONS}")
    answer_id = obj.get("id")
    if answer_id is not None and (isinstance(answer_id, bool) or not isinstance(answer_id, str | int)):
        raise ValueError(f"'id' must be a string or integer, got {type(answer_id).__name__}")
    answered_at = None
    if obj.get("answered_at") is not None:
        raw_at = obj["answered_at"]
        if not isinstance(raw_at, str):
            raise ValueError("'answered_at' must be an ISO-8601 string with a time zone")
        try:
            parsed = datetime.fromisoformat(raw_at)
        except ValueError:
            raise ValueError(f"'answered_at' {raw_at!r} is not an ISO-8601 date-time") from None
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            raise ValueError(f"'answered_at' {raw_at!r} has no time zone (add Z or +00:00)")
        answered_at = parsed
    return CitedAnswer(
        line=number,
        citations=tuple(cites),
        answer_id=None if answer_id is None else str(answer_id),
        answered_at=answered_at,
    )


def load_citations_jsonl(path: str | os.PathLike[str], *, max_bytes: int = JSONL_LIMIT) -> list[CitedAnswer]:
    """Read answers with citations, one JSON object per line (blank lines skipped).

    Raises InvalidInput for a missing or unreadable file, ContentTooLarge past `max_bytes`,
    and MalformedCitationsFile naming every malformed line (with the good ones attached).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise InvalidInput("file", f"{p}: not a regular file")
        if size > max_bytes:
            raise ContentTooLarge("file", size, max_bytes)
        data = p.read_bytes()
    except FileNotFoundError:
        raise InvalidInput("file", f"{p}: no such file") from None
    except PermissionError:
        raise InvalidInput("file", f"{p}: permission denied") from None
    data = data.removeprefix(b"\xef\xbb\xbf")
    answers: list[CitedAnswer] = []
    problems: list[LineProblem] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        raw = line.removesuffix(b"\r")
        if not raw.strip():
            continue
        try:
            answers.append(_parse_line(number, raw))
        except ValueError as e:
            problems.append(LineProblem(number, str(e)))
    if problems:
        raise MalformedCitationsFile(str(p), problems, answers)
    return answers


@dataclass(frozen=True)
class CitationEval:
    """Reports for many answers; precision is over all their citations (None with none)."""

    answers: tuple[CitedAnswer, ...]
    reports: tuple[CitationReport, ...]
    checks: tuple[CitationCheck, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", tuple(c for r in self.reports for c in r.checks))

    @property
    def precision(self) -> float | None:
        precision: float | None = _summary(self.checks)["precision"]
        return precision

    def to_dict(self) -> dict[str, Any]:
        return {
            "answers": len(self.answers),
            **_summary(self.checks),
            "results": [
                {"line": a.line, "id": a.answer_id, **r.to_dict()}
                for a, r in zip(self.answers, self.reports, strict=True)
            ],
        }


def check_answers(archive: Archive, principal: Principal, answers: Sequence[CitedAnswer]) -> CitationEval:
    """`check_citations` for each answer (as from `load_citations_jsonl`), with overall precision."""
    reports = tuple(
        check_citations(archive, principal, list(a.citations), answered_at=a.answered_at) for a in answers
    )
    return CitationEval(answers=tuple(answers), reports=reports)
