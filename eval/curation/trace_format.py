"""Reading and writing traces of format `mnemo-sea/context-trace/1` (the types are in trace.py).

`parse_trace` validates everything before it returns, so a replay never meets a trace that
cannot be replayed: the format string, every field's presence and type (unknown fields are
refused, since a misspelt key would silently change a run), unique tool call labels, every
`source`/`label` naming an earlier tool call, archive and recover decisions that follow the
archive's rules (only a live, unprotected result is archived; only an archived one recovered),
a need's quote and a recover's match being exact substrings of their source's original
(generated content is generated to check), policy class syntax, times with a zone, known
generators and fault kinds.

An error is a `TraceError` naming the origin, the event (index and type) and the field:
`traces/f2.json: events[7] (need): quote "MDR1 mut/mut" is not in the original of lab_mdr1`.

`trace_to_json` is canonical (fixed keys, optional fields written out, but for a recover's
`match` and a call's `reread`, which came later) and round-trips:
`parse_trace(trace_to_json(t)) == t`. `trace_digest` hashes that JSON together with every
generated original and re-run output, so a frozen test set also notices a generator whose
output changed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

from mnemo_sea.archive import (
    DEFAULT_PROTECTED_CLASSES,
    DERIVED_ID_PREFIXES,
    ArchiveError,
    InvalidInput,
    check_evidence_id,
    check_identifier,
    check_policy_class,
)

from .generators import check_generated, original
from .trace import (
    EVIDENCE_SOURCE,
    TRACE_FORMAT,
    TRACE_FORMAT_1_1,
    TRACE_FORMATS,
    Answer,
    Archive,
    Citation,
    Clock,
    Event,
    Evidence,
    Fault,
    FaultKind,
    Generated,
    Need,
    Recover,
    Released,
    Reread,
    Said,
    State,
    StateFact,
    Summary,
    Task,
    ToolCall,
    ToolCalls,
    Trace,
)

FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
EVENT_TYPES = (
    "tool_call",
    "tool_calls",
    "assistant",
    "archive",
    "recover",
    "need",
    "answer",
    "clock",
    "task",
    "evidence",
    "state",
    "summary",
    "fault",
)
MAX_NOTE_CHARS = 2_000  # the archive's default limit (ArchivePolicy.max_note_chars)
# The envelope escapes these in every rendered result; a quote holding one is matched in its
# escaped form (format 1.1; a /1 trace holding one is refused, as /1 readers refuse it).
_ESCAPED = ("&", "<", ">")


class TraceError(InvalidInput):
    """A trace is malformed; `detail` has origin, index and type of the event (None for the
    trace's own fields), field and problem."""

    code = "invalid_trace"

    def __init__(
        self, origin: str, field: str, problem: str, index: int | None = None, kind: str | None = None
    ):
        where = origin if index is None else f"{origin}: events[{index}] ({kind or '?'})"
        ArchiveError.__init__(
            self,
            f"{where}: {field} {problem}",
            origin=origin,
            index=index,
            type=kind,
            field=field,
            problem=problem,
        )
        self.field = field
        self.problem = problem
        self.origin = origin
        self.index = index
        self.kind = kind


class _Reader:
    """Reads one JSON object (the trace or one event) and raises TraceError naming where."""

    def __init__(self, obj: Mapping[str, Any], origin: str, index: int | None, kind: str | None):
        self.obj, self.origin, self.index, self.kind = obj, origin, index, kind

    def fail(self, field: str, problem: str) -> TraceError:
        return TraceError(self.origin, field, problem, self.index, self.kind)

    def only(self, allowed: set[str] | frozenset[str]) -> None:
        extra = sorted(set(self.obj) - allowed)
        if extra:
            raise self.fail(extra[0], f"is not a field of this event; allowed: {', '.join(sorted(allowed))}")

    def value(self, key: str, default: Any = ..., *, label: str | None = None) -> Any:
        if key not in self.obj:
            if default is ...:
                raise self.fail(label or key, "is required")
            return default
        return self.obj[key]

    def text(self, key: str, *, empty: bool = False, default: Any = ..., label: str | None = None) -> str:
        name = label or key
        v = self.value(key, default, label=name)
        if not isinstance(v, str):
            raise self.fail(name, f"must be a string, got {_kind(v)}")
        if not empty and not v.strip():
            raise self.fail(name, "must not be empty")
        if "\x00" in v:
            raise self.fail(name, "must not contain NUL")
        return v

    def texts(self, key: str, *, default: Any = ..., nonempty: bool = False) -> tuple[str, ...]:
        v = self.value(key, default)
        if not isinstance(v, list):
            raise self.fail(key, f"must be a list of strings, got {_kind(v)}")
        if nonempty and not v:
            raise self.fail(key, "must not be empty")
        for i, item in enumerate(v):
            if not isinstance(item, str) or not item.strip():
                raise self.fail(f"{key}[{i}]", f"must be a non-empty string, got {_kind(item)}")
        return tuple(v)

    def objects(self, key: str, *, default: Any = ...) -> list[_Reader]:
        v = self.value(key, default)
        if not isinstance(v, list):
            raise self.fail(key, f"must be a list of objects, got {_kind(v)}")
        out: list[_Reader] = []
        for i, item in enumerate(v):
            if not isinstance(item, dict):
                raise self.fail(f"{key}[{i}]", f"must be an object, got {_kind(item)}")
            out.append(_Nested(item, self, f"{key}[{i}]"))
        return out


class _Nested(_Reader):
    """A sub-object (a citation, a state fact, a generator): field names get its path."""

    def __init__(self, obj: Mapping[str, Any], parent: _Reader, path: str):
        super().__init__(obj, parent.origin, parent.index, parent.kind)
        self.path = path

    def fail(self, field: str, problem: str) -> TraceError:
        return super().fail(f"{self.path}.{field}", problem)


def _kind(v: object) -> str:
    return "null" if v is None else type(v).__name__


def _identifier(r: _Reader, key: str) -> str:
    v = r.text(key)
    try:
        return check_identifier(key, v)
    except InvalidInput as e:
        raise r.fail(key, e.problem) from None


def _time(r: _Reader, key: str) -> datetime:
    v = r.text(key)
    try:
        when = datetime.fromisoformat(v)
    except ValueError:
        raise r.fail(key, f"{v!r} is not an ISO-8601 time") from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise r.fail(key, f"{v!r} has no zone; write it like 2026-11-30T09:00:00+08:00")
    return when


def _quote(r: _Reader, key: str, source: ToolCall, what: str) -> str:
    quote = r.text(key)
    if quote not in original(source.content):
        raise r.fail(key, f"{_show(quote)} is not in the original of {source.label}{what}")
    return quote


def _content(r: _Reader) -> str | Generated:
    """A tool call's output, given (`content`) or generated (`generator`): exactly one."""
    if ("content" in r.obj) == ("generator" in r.obj):
        raise r.fail("content", "give exactly one of content and generator")
    if "content" in r.obj:
        content = r.text("content", empty=True)
        if not content:
            raise r.fail("content", "must not be empty (the archive refuses empty results)")
        return content
    spec = r.value("generator")
    if not isinstance(spec, dict):
        raise r.fail("generator", f"must be an object, got {_kind(spec)}")
    g = _Nested(spec, r, "generator")
    g.only({"name", "size", "seed", "params"})
    params = g.value("params", {})
    if not isinstance(params, dict):
        raise g.fail("params", f"must be an object, got {_kind(params)}")
    generated = Generated(g.text("name"), g.value("size"), g.value("seed"), params)
    try:
        check_generated(generated)
    except InvalidInput as e:
        raise g.fail(e.field, e.problem) from None
    return generated


def _reread(r: _Reader) -> Reread:
    value = r.value("reread")
    if value == "stable":
        return Reread()
    if not isinstance(value, dict):
        raise r.fail("reread", f'must be "stable" or an object with content or generator, got {_kind(value)}')
    current = _Nested(value, r, "reread")
    current.only({"content", "generator"})
    return Reread(_content(current))


_CALL_KEYS = frozenset(
    {
        "label",
        "tool",
        "arguments",
        "content",
        "generator",
        "policy_class",
        "observed_at",
        "note",
        "reread",
        "injected",
        "supersedes",
    }
)


def _show(text: str) -> str:
    return json.dumps(text if len(text) <= 80 else text[:80] + "…", ensure_ascii=False)


class _Parser:
    def __init__(self, origin: str):
        self.origin = origin
        self.calls: dict[str, ToolCall] = {}
        self.archived: set[str] = set()
        self.evidence_ids: set[str] = set()

    def call(self, r: _Reader, key: str, value: object | None = None, field: str | None = None) -> ToolCall:
        label = r.text(key) if value is None else value
        if not isinstance(label, str) or label not in self.calls:
            raise r.fail(field or key, f"{label!r} names no earlier tool call")
        return self.calls[label]

    def event(self, obj: object, index: int) -> Event:
        if not isinstance(obj, dict):
            raise TraceError(self.origin, f"events[{index}]", f"must be an object, got {_kind(obj)}")
        kind = obj.get("type")
        if kind not in EVENT_TYPES:
            raise TraceError(
                self.origin,
                "type",
                f"{kind!r} is not an event type; known: {', '.join(EVENT_TYPES)}",
                index,
                "?",
            )
        r = _Reader(obj, self.origin, index, kind)
        method = getattr(self, f"_{kind}")
        event: Event = method(r)
        return event

    def _tool_calls(self, r: _Reader) -> ToolCalls:
        r.only({"type", "calls"})
        calls = r.objects("calls")
        if not calls:
            raise r.fail("calls", "must not be empty")
        return ToolCalls(tuple(self._call(c) for c in calls))

    def _assistant(self, r: _Reader) -> Said:
        r.only({"type", "text"})
        return Said(r.text("text"))

    def _tool_call(self, r: _Reader) -> ToolCall:
        return self._call(r, {"type"})

    def _call(self, r: _Reader, extra: set[str] | None = None) -> ToolCall:
        """One tool call's fields (an event of its own, or one of a `tool_calls` event's)."""
        r.only(_CALL_KEYS | (extra or set()))
        label = r.text("label")
        try:
            check_identifier("label", label)
        except InvalidInput as e:
            raise r.fail("label", e.problem) from None
        if label in self.calls:
            raise r.fail("label", f"{label!r} is already the label of an earlier tool call")
        tool = r.text("tool")
        arguments = r.value("arguments", {})
        if not isinstance(arguments, dict):
            raise r.fail("arguments", f"must be an object, got {_kind(arguments)}")
        content = _content(r)
        policy_class = r.value("policy_class", "default")
        try:
            check_policy_class(policy_class)
        except InvalidInput as e:
            raise r.fail("policy_class", e.problem) from None
        note = r.value("note", None)
        if note is not None:
            note = r.text("note")
            if len(note) > MAX_NOTE_CHARS:
                raise r.fail("note", f"is {len(note)} characters; the archive's limit is {MAX_NOTE_CHARS}")
        reread = _reread(r) if "reread" in r.obj else None
        injected = r.texts("injected", default=[])
        for i, text in enumerate(injected):
            if text not in original(content):
                raise r.fail(f"injected[{i}]", f"{_show(text)} is not in the call's original")
        supersedes = None
        if "supersedes" in r.obj:
            supersedes = self.call(r, "supersedes").label
        call = ToolCall(
            label,
            tool,
            arguments,
            content,
            policy_class,
            _time(r, "observed_at"),
            note,
            reread,
            injected,
            supersedes,
        )
        self.calls[label] = call
        return call

    def _archive(self, r: _Reader) -> Archive:
        r.only({"type", "labels"})
        labels = r.texts("labels", nonempty=True)
        if len(set(labels)) != len(labels):
            raise r.fail("labels", "names a tool call twice")
        for i, label in enumerate(labels):
            call = self.call(r, "labels", label, f"labels[{i}]")
            if label in self.archived:
                raise r.fail(f"labels[{i}]", f"{label!r} is archived already (recover it first)")
            if call.policy_class in DEFAULT_PROTECTED_CLASSES:
                raise r.fail(
                    f"labels[{i}]", f"{label!r} is {call.policy_class}, a protected class never archived"
                )
            if call.note is None:
                raise r.fail(f"labels[{i}]", f"{label!r} has no note; an archived result needs one")
        self.archived.update(labels)
        return Archive(labels)

    def _recover(self, r: _Reader) -> Recover:
        r.only({"type", "label", "match"})
        call = self.call(r, "label")
        match = r.value("match", None)
        if match is not None:
            match = r.text("match")
            if match not in original(call.content):
                raise r.fail("match", f"{_show(match)} is not in the original of {call.label}")
        if call.label not in self.archived:
            raise r.fail(
                "label", f"{call.label!r} is not archived at this point, so there is nothing to recover"
            )
        # A recovered copy is live again; scripting its archive again is what re-archiving after use is.
        self.archived.discard(call.label)
        return Recover(call.label, match)

    def _need(self, r: _Reader) -> Need:
        r.only({"type", "fact", "quote", "source", "sources", "query"})
        if ("source" in r.obj) == ("sources" in r.obj):
            raise r.fail("source", "give exactly one of source and sources")
        if "source" in r.obj:
            labels: tuple[str, ...] = (self.call(r, "source").label,)
        else:
            labels = r.texts("sources", nonempty=True)
            if len(set(labels)) != len(labels):
                raise r.fail("sources", "names a tool call twice")
            for i, label in enumerate(labels):
                self.call(r, "sources", label, f"sources[{i}]")
        quote = r.text("quote")
        for i, label in enumerate(labels):
            if quote not in original(self.calls[label].content):
                where = "quote" if len(labels) == 1 else f"quote (sources[{i}])"
                raise r.fail(where, f"{_show(quote)} is not in the original of {label}")
        return Need(r.text("fact"), quote, labels[0], r.text("query"), labels[1:])

    def _answer(self, r: _Reader) -> Answer:
        r.only({"type", "text", "citations"})
        text = r.text("text")
        citations = []
        for c in r.objects("citations", default=[]):
            c.only({"source", "quote"})
            # A citation's quote may be wrong on purpose (the checker must catch it), so only its
            # source is checked here.
            citation = Citation(c.text("source"), c.text("quote"))
            cited = self._cited_evidence(c, citation)
            if cited is None:
                self.call(c, "source")
            citations.append(citation)
        return Answer(text, tuple(citations))

    def _cited_evidence(self, c: _Reader, citation: Citation) -> tuple[str, int | None] | None:
        """The knowledge record a citation names (`evidence:<id>[@<version>]`), checked to be an
        earlier evidence event; None for a tool call's label."""
        if not citation.source.startswith(EVIDENCE_SOURCE):
            return None
        shape = f"must be {EVIDENCE_SOURCE}<id> or {EVIDENCE_SOURCE}<id>@<version>"
        try:
            cited = citation.evidence
        except ValueError:
            raise c.fail("source", f"{shape}, got {citation.source!r}") from None
        if cited is None or (cited[1] is not None and cited[1] < 1):
            raise c.fail("source", f"{shape} (a version from 1), got {citation.source!r}")
        if cited[0] not in self.evidence_ids:
            raise c.fail("source", f"{citation.source!r} names no earlier evidence event")
        return cited

    def _clock(self, r: _Reader) -> Clock:
        r.only({"type", "hours"})
        hours = r.value("hours")
        if (
            isinstance(hours, bool)
            or not isinstance(hours, int | float)
            or not math.isfinite(hours)
            or hours <= 0
        ):
            raise r.fail("hours", f"must be a positive number, got {hours!r}")
        return Clock(float(hours))

    def _task(self, r: _Reader) -> Task:
        r.only({"type", "goal", "constraints"})
        return Task(r.text("goal"), r.texts("constraints", default=[]))

    def _evidence(self, r: _Reader) -> Evidence:
        r.only({"type", "evidence_id", "body", "statement", "source", "scope", "locator", "supersedes"})
        evidence_id = r.text("evidence_id")
        try:
            check_evidence_id(evidence_id)
        except InvalidInput as e:
            raise r.fail("evidence_id", e.problem) from None
        if evidence_id.startswith(DERIVED_ID_PREFIXES):
            raise r.fail("evidence_id", f"{evidence_id!r} starts with a prefix kept for derived ids")
        statement = r.value("statement", None)
        if statement is not None:
            statement = r.text("statement")
        body = r.text("body")
        supersedes = None
        if "supersedes" in r.obj:
            supersedes = r.text("supersedes")
            if supersedes not in self.evidence_ids or supersedes == evidence_id:
                raise r.fail("supersedes", f"{supersedes!r} names no other earlier evidence event")
        evidence = Evidence(
            evidence_id,
            body,
            statement,
            r.text("source"),
            r.text("scope", default="default"),
            r.text("locator", default="", empty=True),
            supersedes,
        )
        self.evidence_ids.add(evidence_id)
        return evidence

    def _state(self, r: _Reader) -> State:
        r.only({"type", "confirmed", "unresolved", "pending_operations", "release"})
        confirmed = []
        for f in r.objects("confirmed", default=[]):
            f.only({"fact", "source"})
            fact, source = f.text("fact"), f.text("source")
            if source.startswith("evidence:"):
                if source.removeprefix("evidence:") not in self.evidence_ids:
                    raise f.fail("source", f"{source!r} names no earlier evidence event")
            else:
                self.call(f, "source")
            confirmed.append(StateFact(fact, source))
        release = []
        for x in r.objects("release", default=[]):
            x.only({"item", "reason"})
            release.append(Released(x.text("item"), x.text("reason")))
        return State(
            tuple(confirmed),
            r.texts("unresolved", default=[]),
            r.texts("pending_operations", default=[]),
            tuple(release),
        )

    def _summary(self, r: _Reader) -> Summary:
        r.only({"type", "text", "sources"})
        text = r.text("text")
        sources = r.texts("sources", nonempty=True)
        for i, label in enumerate(sources):
            self.call(r, "sources", label, f"sources[{i}]")
        return Summary(text, sources)

    def _fault(self, r: _Reader) -> Fault:
        r.only({"type", "kind"})
        kind = r.value("kind")
        if kind not in FAULT_KINDS:
            raise r.fail("kind", f"{kind!r} is not a fault kind; known: {', '.join(FAULT_KINDS)}")
        return Fault(kind)


def parse_trace(obj: object, origin: str = "<trace>") -> Trace:
    """Validate one trace (a decoded JSON object) and return it; raises TraceError."""
    if not isinstance(obj, dict):
        raise TraceError(origin, "trace", f"must be a JSON object, got {_kind(obj)}")
    r = _Reader(obj, origin, None, None)
    fmt = r.value("format")
    if fmt not in TRACE_FORMATS:
        raise r.fail("format", f"must be one of {', '.join(map(repr, TRACE_FORMATS))}, got {fmt!r}")
    r.only(
        {
            "format",
            "trace_id",
            "family",
            "tenant",
            "session_id",
            "owner",
            "instructions",
            "goal",
            "constraints",
            "events",
        }
    )
    trace_id = _identifier(r, "trace_id")
    family = r.text("family")
    tenant, session_id, owner = (
        _identifier(r, "tenant"),
        _identifier(r, "session_id"),
        _identifier(r, "owner"),
    )
    instructions = r.text("instructions", empty=True, default="")
    goal = r.text("goal")
    constraints = r.texts("constraints", default=[])
    events = r.value("events")
    if not isinstance(events, list) or not events:
        raise r.fail("events", f"must be a non-empty list, got {_kind(events)}")
    parser = _Parser(origin)
    parsed = tuple(parser.event(e, i) for i, e in enumerate(events))
    trace = Trace(trace_id, family, tenant, session_id, owner, instructions, goal, constraints, parsed)
    if fmt == TRACE_FORMAT and needs_1_1(trace):  # a /1 reader would refuse what it does not know
        raise r.fail(
            "format",
            f"is {TRACE_FORMAT!r} but the trace uses what 1.1 added (parallel tool_calls, assistant, "
            f"injected, supersedes, sources, evidence citations or quotes with & < >); "
            f"write {TRACE_FORMAT_1_1!r}",
        )
    return trace


def load_traces(path: str | Path) -> list[Trace]:
    """Traces from a .json file (one trace or a list of them) or a folder of .json files (in name
    order). Raises TraceError for a malformed file or a trace_id used twice."""
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.iterdir() if p.suffix == ".json" and p.is_file())
        if not files:
            raise TraceError(str(root), "path", "is a folder without .json files")
    elif root.is_file():
        files = [root]
    else:
        raise TraceError(str(root), "path", "does not exist")
    traces: list[Trace] = []
    seen: dict[str, str] = {}
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TraceError(str(file), "json", f"is not valid UTF-8 JSON: {e}") from None
        items = data if isinstance(data, list) else [data]
        for i, item in enumerate(items):
            origin = f"{file}[{i}]" if isinstance(data, list) else str(file)
            trace = parse_trace(item, origin)
            if trace.trace_id in seen:
                raise TraceError(
                    origin, "trace_id", f"{trace.trace_id!r} is also the id of {seen[trace.trace_id]}"
                )
            seen[trace.trace_id] = origin
            traces.append(trace)
    return traces


def _content_json(content: str | Generated) -> dict[str, Any]:
    if isinstance(content, Generated):
        g = content
        return {"generator": {"name": g.name, "size": g.size, "seed": g.seed, "params": g.params}}
    return {"content": content}


def _call_json(e: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {"label": e.label, "tool": e.tool, "arguments": e.arguments}
    out |= _content_json(e.content)
    out |= {"policy_class": e.policy_class, "observed_at": e.observed_at.isoformat(), "note": e.note}
    # The fields that came later are written only when set, so older traces keep their digests.
    if e.reread is not None:
        out["reread"] = "stable" if e.reread.current is None else _content_json(e.reread.current)
    if e.injected:
        out["injected"] = list(e.injected)
    if e.supersedes is not None:
        out["supersedes"] = e.supersedes
    return out


def _event_json(e: Event) -> dict[str, Any]:
    if isinstance(e, ToolCall):
        return {"type": "tool_call", **_call_json(e)}
    if isinstance(e, ToolCalls):
        return {"type": "tool_calls", "calls": [_call_json(c) for c in e.calls]}
    if isinstance(e, Said):
        return {"type": "assistant", "text": e.text}
    if isinstance(e, Archive):
        return {"type": "archive", "labels": list(e.labels)}
    if isinstance(e, Recover):
        # `match` came after traces were frozen: written only when set, so their digests stay.
        out: dict[str, Any] = {"type": "recover", "label": e.label}
        return out if e.match is None else out | {"match": e.match}
    if isinstance(e, Need):
        where = {"source": e.source} if not e.also else {"sources": list(e.sources)}
        return {"type": "need", "fact": e.fact, "quote": e.quote, **where, "query": e.query}
    if isinstance(e, Answer):
        cites = [{"source": c.source, "quote": c.quote} for c in e.citations]
        return {"type": "answer", "text": e.text, "citations": cites}
    if isinstance(e, Clock):
        return {"type": "clock", "hours": e.hours}
    if isinstance(e, Task):
        return {"type": "task", "goal": e.goal, "constraints": list(e.constraints)}
    if isinstance(e, Evidence):
        record = {
            "type": "evidence",
            "evidence_id": e.evidence_id,
            "body": e.body,
            "statement": e.statement,
            "source": e.source,
            "scope": e.scope,
            "locator": e.locator,
        }
        return record if e.supersedes is None else record | {"supersedes": e.supersedes}
    if isinstance(e, State):
        return {
            "type": "state",
            "confirmed": [{"fact": f.fact, "source": f.source} for f in e.confirmed],
            "unresolved": list(e.unresolved),
            "pending_operations": list(e.pending_operations),
            "release": [{"item": x.item, "reason": x.reason} for x in e.release],
        }
    if isinstance(e, Summary):
        return {"type": "summary", "text": e.text, "sources": list(e.sources)}
    return {"type": "fault", "kind": e.kind}


def trace_to_json(trace: Trace) -> dict[str, Any]:
    """The canonical JSON object of a trace: every field written, keys in a fixed order."""
    return {
        "format": TRACE_FORMAT_1_1 if needs_1_1(trace) else TRACE_FORMAT,
        "trace_id": trace.trace_id,
        "family": trace.family,
        "tenant": trace.tenant,
        "session_id": trace.session_id,
        "owner": trace.owner,
        "instructions": trace.instructions,
        "goal": trace.goal,
        "constraints": list(trace.constraints),
        "events": [_event_json(e) for e in trace.events],
    }


def needs_1_1(trace: Trace) -> bool:
    """Whether the trace uses anything format 1.1 added (then it is written as 1.1)."""
    for e in trace.events:
        if isinstance(e, ToolCalls | Said):
            return True
        if isinstance(e, ToolCall) and (e.injected or e.supersedes is not None):
            return True
        if isinstance(e, Evidence) and e.supersedes is not None:
            return True
        if isinstance(e, Need) and (e.also or any(ch in e.quote for ch in _ESCAPED)):
            return True
        if isinstance(e, Answer) and any(
            c.evidence is not None or any(ch in c.quote for ch in _ESCAPED) for c in e.citations
        ):
            return True
    return False


def canonical_bytes(trace: Trace) -> bytes:
    """The trace's canonical JSON as bytes: sorted keys, no spaces, UTF-8."""
    text = json.dumps(trace_to_json(trace), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8")


def trace_digest(trace: Trace) -> str:
    """sha256 of the canonical JSON followed by the sha256 of every generated original, in event
    order: a trace is the same only if its JSON and the text its generators produce are."""
    h = hashlib.sha256(canonical_bytes(trace))
    for e in trace.calls().values():
        # A re-run's generated output after the call's own (traces without one keep their digest).
        rerun = e.reread.current if e.reread is not None else None
        for content in (e.content, rerun):
            if isinstance(content, Generated):
                h.update(
                    b"\n" + hashlib.sha256(original(content).encode("utf-8")).hexdigest().encode("ascii")
                )
    return h.hexdigest()
