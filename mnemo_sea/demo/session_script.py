"""The demo's session script: its format, the records it reads into, and the parser.

A script (`sessions.json`, format `mnemo-sea/session-script/1`) lists per tenant the agent the
demo acts as, its sessions tool call by tool call (what `Archive.record` is given, plus the note
an agent would leave when archiving) and memory facts in write order. A call's `content` is text,
or `{"generator": name, ...arguments}` for a long output built by `mnemo_sea.demo.tool_outputs`.
The parser checks every field and raises InvalidInput naming the place of the first problem
(`tenants[0].sessions[1].calls[2].observed_at`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from mnemo_sea.archive import InvalidInput, Provenance, check_identifier, check_policy_class, parse_provenance
from mnemo_sea.demo.tool_outputs import GENERATORS

SCRIPT_FORMAT = "mnemo-sea/session-script/1"
_T = TypeVar("_T")


def _one(items: tuple[_T, ...], wanted: Callable[[_T], bool], missing: str) -> _T:
    """The item `wanted` picks out of `items`; KeyError(`missing`) when there is none."""
    for item in items:
        if wanted(item):
            return item
    raise KeyError(missing)


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call of a demo session: what `Archive.record` is given, plus the archiving note."""

    label: str  # names the call within its session (result ids are issued by the archive)
    tool: str
    arguments: Mapping[str, Any]
    content: str
    policy_class: str
    observed_at: datetime
    media_type: str | None = None
    sensitivity: str = "internal"
    archive_note: str | None = None


@dataclass(frozen=True)
class ScriptedSession:
    session_id: str
    owner: str
    title: str
    calls: tuple[ScriptedCall, ...]

    def call(self, label: str) -> ScriptedCall:
        missing = f"session {self.session_id!r} has no call labelled {label!r}"
        return _one(self.calls, lambda c: c.label == label, missing)


@dataclass(frozen=True)
class ScriptedFact:
    """A memory write, in order: a later one for the same owner and key supersedes the earlier."""

    owner: str
    key: str
    value: str
    provenance: Provenance


@dataclass(frozen=True)
class TenantScript:
    tenant: str
    agent: str  # the subject the demo acts as in this tenant
    sessions: tuple[ScriptedSession, ...]
    memory: tuple[ScriptedFact, ...]

    def session(self, session_id: str) -> ScriptedSession:
        missing = f"tenant {self.tenant!r} has no session {session_id!r}"
        return _one(self.sessions, lambda s: s.session_id == session_id, missing)


@dataclass(frozen=True)
class SessionScript:
    tenants: tuple[TenantScript, ...]

    def tenant(self, name: str) -> TenantScript:
        return _one(self.tenants, lambda t: t.tenant == name, f"the script has no tenant {name!r}")


class _Reader:
    """Typed access to one JSON object, naming the place of any problem (`tenants[0].sessions[1]`)."""

    def __init__(self, value: object, where: str) -> None:
        if not isinstance(value, dict):
            raise InvalidInput(where, f"must be an object, got {type(value).__name__}")
        self.obj: dict[str, Any] = value
        self.where = where

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def text(self, key: str, *, required: bool = True) -> str | None:
        value = self.obj.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(self.at(key), f"must be a non-empty string, got {value!r:.60}")
        return value

    def str_(self, key: str) -> str:
        value = self.text(key)
        assert value is not None  # required
        return value

    def items(self, key: str) -> list[_Reader]:
        value = self.obj.get(key, [])
        if not isinstance(value, list):
            raise InvalidInput(self.at(key), f"must be a list, got {type(value).__name__}")
        return [_Reader(v, f"{self.at(key)}[{i}]") for i, v in enumerate(value)]


def _content(r: _Reader) -> str:
    value = r.obj.get("content")
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        args = dict(value)
        name = args.pop("generator", None)
        generator = GENERATORS.get(name) if isinstance(name, str) else None
        if generator is None:
            raise InvalidInput(r.at("content.generator"), f"{name!r} is not one of {', '.join(GENERATORS)}")
        try:
            return generator(**args)
        except TypeError as e:
            raise InvalidInput(r.at("content"), f"bad generator arguments: {e}") from None
    raise InvalidInput(r.at("content"), "must be text or {'generator': name, ...arguments}")


def _call(r: _Reader) -> ScriptedCall:
    arguments = r.obj.get("arguments", {})
    if not isinstance(arguments, dict):
        raise InvalidInput(r.at("arguments"), f"must be an object, got {type(arguments).__name__}")
    observed = r.str_("observed_at")
    try:
        observed_at = datetime.fromisoformat(observed)
    except ValueError:
        raise InvalidInput(r.at("observed_at"), f"{observed!r} is not an ISO-8601 date-time") from None
    if observed_at.utcoffset() is None:
        raise InvalidInput(r.at("observed_at"), f"{observed!r} has no time zone")
    try:
        policy_class = check_policy_class(r.str_("policy_class"))
    except InvalidInput as e:
        raise InvalidInput(r.at("policy_class"), e.problem) from None
    return ScriptedCall(
        label=r.str_("label"),
        tool=r.str_("tool"),
        arguments=arguments,
        content=_content(r),
        policy_class=policy_class,
        observed_at=observed_at,
        media_type=r.text("media_type", required=False),
        sensitivity=r.text("sensitivity", required=False) or "internal",
        archive_note=r.text("archive_note", required=False),
    )


def _session(r: _Reader) -> ScriptedSession:
    calls = tuple(_call(c) for c in r.items("calls"))
    labels = [c.label for c in calls]
    duplicates = sorted({x for x in labels if labels.count(x) > 1})
    if duplicates:
        raise InvalidInput(r.at("calls"), f"duplicate label(s) {', '.join(duplicates)}")
    return ScriptedSession(
        session_id=check_identifier(r.at("session_id"), r.str_("session_id")),
        owner=check_identifier(r.at("owner"), r.str_("owner")),
        title=r.str_("title"),
        calls=calls,
    )


def _fact(r: _Reader) -> ScriptedFact:
    provenance = parse_provenance(r.str_("provenance"), r.at("provenance"))
    return ScriptedFact(
        owner=check_identifier(r.at("owner"), r.str_("owner")),
        key=r.str_("key"),
        value=r.str_("value"),
        provenance=provenance,
    )


def parse_session_script(data: bytes, shown: str = "sessions.json") -> SessionScript:
    """A session script from its JSON bytes; InvalidInput names the place of the first problem."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidInput(shown, f"is not a JSON document: {e}") from None
    top = _Reader(raw, "")
    if top.obj.get("format") != SCRIPT_FORMAT:
        raise InvalidInput(
            "format", f"{shown} has format {top.obj.get('format')!r}, expected {SCRIPT_FORMAT!r}"
        )
    tenants = []
    for t in top.items("tenants"):
        tenants.append(
            TenantScript(
                tenant=check_identifier(t.at("tenant"), t.str_("tenant")),
                agent=check_identifier(t.at("agent"), t.str_("agent")),
                sessions=tuple(_session(s) for s in t.items("sessions")),
                memory=tuple(_fact(f) for f in t.items("memory")),
            )
        )
    return SessionScript(tuple(tenants))
