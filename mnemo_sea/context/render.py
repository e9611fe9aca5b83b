"""How each part of a context is written out.

Every segment opens with a tag and ends with a newline. Two things follow from that: BPE
tokenisers never merge across the boundary (the last piece of a segment ends in a newline and
the next one starts with `<`), so the tokens of the whole context are exactly the sum of its
segments' tokens; and a segment's text depends on nothing but its own content, so the same
state renders byte-identically and a provider's prompt cache keeps its prefix.

Caller-written text inside the task state and evidence is escaped like tool output (it cannot
close or forge a tag); instructions and tool definitions are the caller's own and go verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mnemo_sea.archive import InvalidInput, MemoryFact, TaskState, escape_attr, escape_text

from .material import CitedVersionConflict, EvidenceItem, MemoryDisagreement

TASK_STATE_LABEL = "derived task state (not original evidence)"


def _tag(name: str, body: str, **attrs: object) -> str:
    shown = "".join(f' {k}="{escape_attr(str(v))}"' for k, v in attrs.items() if v is not None)
    return f"<{name}{shown}>\n{body}\n</{name}>\n"


def instructions(text: str) -> str:
    return _tag("instructions", text)


def tool_definition(tool: Mapping[str, Any] | str) -> str:
    """A tool definition as canonical JSON (sorted keys): the same tools, the same bytes."""
    if isinstance(tool, str):
        return tool
    try:
        return json.dumps(dict(tool), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise InvalidInput("tools", f"a tool definition must be JSON-serialisable: {e}") from None


def tools(definitions: tuple[str, ...]) -> str:
    return _tag("tools", "\n".join(definitions))


def _cited(evidence_id: str, version: int | None) -> str:
    return evidence_id if version is None or "@" in evidence_id else f"{evidence_id}@{version}"


def _items(title: str, items: tuple[str, ...]) -> list[str]:
    return [f"{title}:"] + ([f"- {escape_text(i)}" for i in items] or ["- (none)"])


def constraints(state: TaskState) -> str:
    """The constraints alone, without the state's version: unchanged constraints render the same
    bytes across task state versions, so a prompt cache keeps the prefix up to them."""
    body = "\n".join(f"- {escape_text(c)}" for c in state.constraints)
    return _tag("task_constraints", body, session=state.session_id)


def task_state(state: TaskState, conflicted: frozenset[tuple[str, int]]) -> str:
    """Goal and confirmed state; a fact resting on a version no longer current is marked
    (`conflicted` holds the (evidence_id as cited, version) of each such fact)."""
    lines = [f"goal: {escape_text(state.goal)}", "confirmed:"]
    for fact in state.confirmed:
        mark = ""
        if fact.version is not None and (fact.evidence_id, fact.version) in conflicted:
            mark = " [conflict: that version is no longer current; see evidence_conflict below]"
        # The citation first: text after it cannot pass for the citation.
        lines.append(
            f"- [{escape_text(_cited(fact.evidence_id, fact.version))}]{mark} {escape_text(fact.fact)}"
        )
    if not state.confirmed:
        lines.append("- (none)")
    lines += _items("unresolved", state.unresolved)
    lines += _items("pending operations", state.pending_operations)
    return _tag(
        "task_state",
        "\n".join(lines),
        session=state.session_id,
        version=state.version,
        label=TASK_STATE_LABEL,
        trace_ref=state.trace_ref,
    )


def withheld_task_state(session_id: str) -> str:
    return _tag(
        "withheld_task_state",
        "[this session's task state is above your clearance or repeats another owner's data]",
        session=session_id,
    )


def evidence(item: EvidenceItem) -> str:
    return _tag(
        "evidence",
        escape_text(item.text),
        id=item.evidence_id,
        version=item.version,
        kind=item.kind,
        source=item.source,
        scope=item.scope,
        locator=item.locator,
        label=item.label,
    )


def evidence_conflict(conflict: CitedVersionConflict) -> str:
    cited = f"{conflict.evidence_id}@{conflict.cited_version}"
    if conflict.withheld:
        current = f"current: a newer version of {conflict.evidence_id} exists above your clearance"
    elif conflict.current_version is None:
        current = f"current: none ({conflict.evidence_id} has no active version: it was retracted)"
    else:
        where = ", ".join(
            f"{k} {v}"
            for k, v in (
                ("source", conflict.source),
                ("scope", conflict.scope),
                ("locator", conflict.locator),
            )
            if v
        )
        current = (
            f"current: {conflict.evidence_id}@{conflict.current_version} ({escape_text(where)}): "
            f"{escape_text(conflict.current_text or '')}"
        )
    body = "\n".join(
        [
            f"the task state confirms: {escape_text(conflict.fact)} "
            f"[{escape_text(cited)}, no longer current]",
            current,
            "two versions of one evidence record are in this context; nothing here decides which "
            "applies: check before relying on either",
        ]
    )
    return _tag("evidence_conflict", body, id=conflict.evidence_id, status="unresolved")


def _memory_line(fact: MemoryFact, role: str) -> str:
    source = fact.derived_from or fact.provenance
    return (
        f"v{fact.version} ({escape_text(fact.provenance)}, from {escape_text(source)}, "
        f"written {fact.created_at.isoformat()}, {role}): {escape_text(fact.value)}"
    )


def memory_conflict(evidence_id: str, disagreement: MemoryDisagreement) -> str:
    body = "\n".join(
        [
            _memory_line(disagreement.current, "current"),
            _memory_line(disagreement.other, "superseded by another source"),
            "two sources disagree on this memory key; nothing here decides which is right: confirm "
            "with the user or the system of record",
        ]
    )
    return _tag("memory_conflict", body, id=evidence_id, status="unresolved")
