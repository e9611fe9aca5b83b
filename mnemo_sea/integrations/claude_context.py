"""Context editing for a Messages API conversation, reversible: old tool results become archived stubs.

    edit = clear_tool_results(handle, "conv-42", messages, trigger_tokens=30_000, keep=3)
    client.messages.create(..., messages=edit.messages, tools=[*tools, RECOVER_TOOL])
    # when Claude calls recover_tool_result: answer = recover_tool_result(handle, "conv-42", block.input)

Anthropic's context editing (`clear_tool_uses_20250919`) clears old tool results server-side:
once the input passes `trigger`, every tool result but the newest `keep` tool uses' is replaced
by a placeholder, unless its tool is in `exclude_tools`, and only if at least `clear_at_least`
tokens go. The text is gone for good. `clear_tool_results` applies the same policy to the
conversation you hold, but keeps what it clears: each cleared result is recorded in the session
`session_id` of the handle's tenant (`record`, tool name and input kept) and archived with a note
(`archive_results`, one batch), and its block's content becomes a stub naming the result id.
`RECOVER_TOOL` is the tool definition that lets Claude ask for it back, and
`recover_tool_result` its handler: the exact original, hash-verified, or the lines asked for.

Invariants:
- The input is never changed: the edited conversation is a copy (`ContextEdit.messages`).
- Idempotent: a block that is a stub already is never archived again, so a second run over the
  edited conversation changes nothing; and each result is recorded under an idempotency key of
  its tool_use_id, so a run retried after a failure records nothing twice.
- Nothing is written unless the edit goes ahead: the trigger and `clear_at_least` are decided
  on the conversation with every stub in place first, and every result to clear is checked
  as `record` takes it (its tool name, its size) before the first is recorded. A tool input
  over the archive's size for a call's arguments is not kept with its result (the
  conversation's tool_use block still holds it).
- A tool result whose content is not text (an image, a document) is never cleared. Content
  given as a list of text blocks is archived as that list's JSON (application/json) and comes
  back as that JSON.

Tokens are counted by `count_tokens(messages)`; the default is an estimate (a token per four
characters of the messages' JSON), good enough to decide when to clear. Pass an exact counter
for exact figures (the Messages API's count_tokens endpoint, or mnemo-sea's BPE counter,
`Mnemo.token_counter.count` over the JSON), at the cost of what it loads.

Framework-free: it reads and writes plain message dicts, so it needs no extra.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mnemo_sea.archive import InvalidInput, arguments_fit, check_tool_result
from mnemo_sea.integrations.handles import check_blocking_handle, check_handle, is_async_handle
from mnemo_sea.integrations.plans import HandleCall, Plan, arun_plan, run_plan

if TYPE_CHECKING:
    from mnemo_sea.integrations.handles import AsyncHandle, Handle

Message = dict[str, Any]
TokenCount = Callable[[Sequence[Mapping[str, Any]]], int]

STUB_PREFIX = "[tool result cleared and archived as "
RECOVER_TOOL_NAME = "recover_tool_result"
NOTE_PREVIEW_CHARS = 160
RECOVER_TOOL: dict[str, Any] = {
    "name": RECOVER_TOOL_NAME,
    "description": (
        "Read again a tool result that was cleared from this conversation to save context. "
        "A cleared result reads '[tool result cleared and archived as <result_id> ...]'. "
        "Returns the exact original, or only the lines asked for."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "result_id": {"type": "string", "description": "The result id the cleared block names, e.g. r3."},
            "lines": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1},
                "minItems": 2,
                "maxItems": 2,
                "description": "Optional: [first, last] line numbers (from 1, both included) to read.",
            },
        },
        "required": ["result_id"],
        "additionalProperties": False,
    },
}


def estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """A token per four characters of the messages' JSON: an estimate, not the model's count."""
    return math.ceil(len(json.dumps(list(messages), ensure_ascii=False)) / 4)


@dataclass(frozen=True)
class ClearedResult:
    """One tool result set aside: where it was, and where it is now."""

    tool_use_id: str
    tool_name: str
    result_id: str
    note: str


@dataclass(frozen=True)
class ContextEdit:
    """The edited conversation, what was cleared, the tokens before and after, and, when
    nothing was cleared, why (`skipped`: under_trigger, nothing_to_clear, below_clear_at_least)."""

    messages: list[Message]
    cleared: tuple[ClearedResult, ...]
    tokens_before: int
    tokens_after: int
    skipped: str | None = None


@dataclass(frozen=True)
class _Candidate:
    message: int
    block: int
    tool_use_id: str
    tool_name: str
    arguments: Mapping[str, Any] | None
    body: str
    media_type: str


def _is_stub(content: object) -> bool:
    return isinstance(content, str) and content.startswith(STUB_PREFIX)


def _stub(session_id: str, result_id: str, note: str) -> str:
    return (
        f"{STUB_PREFIX}{result_id} in session {session_id}: {note}] "
        f"Call {RECOVER_TOOL_NAME} with result_id {result_id!r} to read it again."
    )


def _body(content: object) -> tuple[str, str] | None:
    """What is archived for a result's content, with its media type; None when it is not text."""
    if isinstance(content, str):
        return content, "text/plain"
    if isinstance(content, list) and all(
        isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in content
    ):
        return json.dumps(content, ensure_ascii=False), "application/json"
    return None


def _note(candidate: _Candidate, tokens: int) -> str:
    preview = " ".join(candidate.body.split())[:NOTE_PREVIEW_CHARS]
    return f"{candidate.tool_name} result, about {tokens} tokens, begins: {preview}"


def _tool_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int, Mapping[str, Any]]]:
    """(message index, block index, block) of every tool_result block, in order."""
    found = []
    for m, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput("messages", f"message {m} is a {type(message).__name__}, not an object")
        content = message.get("content")
        if isinstance(content, list):
            found += [
                (m, b, block)
                for b, block in enumerate(content)
                if isinstance(block, Mapping) and block.get("type") == "tool_result"
            ]
    return found


def _tool_uses(messages: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    uses: dict[str, Mapping[str, Any]] = {}
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    uses[str(block.get("id"))] = block
    return uses


def _candidates(
    messages: Sequence[Mapping[str, Any]], keep: int, exclude_tools: Collection[str]
) -> list[_Candidate]:
    results = _tool_results(messages)
    uses = _tool_uses(messages)
    older = results[: max(0, len(results) - keep)]  # the newest `keep` stay, cleared or not
    found = []
    for m, b, block in older:
        tool_use_id = block.get("tool_use_id")
        if not isinstance(tool_use_id, str) or _is_stub(block.get("content")):
            continue
        use = uses.get(tool_use_id, {})
        name = use.get("name")
        tool_name = name if isinstance(name, str) else "unknown_tool"
        body = _body(block.get("content"))
        if tool_name in exclude_tools or body is None:
            continue
        arguments = use.get("input")
        kept = arguments if isinstance(arguments, Mapping) and arguments_fit(arguments) else None
        found.append(_Candidate(m, b, tool_use_id, tool_name, kept, *body))
    return found


def _with_stubs(messages: Sequence[Mapping[str, Any]], stubs: Mapping[tuple[int, int], str]) -> list[Message]:
    edited: list[Message] = copy.deepcopy([dict(m) for m in messages])
    for (m, b), stub in stubs.items():
        edited[m]["content"][b] = {**edited[m]["content"][b], "content": stub}
    return edited


def _check(trigger_tokens: int, keep: int, clear_at_least: int) -> None:
    for name, value in (
        ("trigger_tokens", trigger_tokens),
        ("keep", keep),
        ("clear_at_least", clear_at_least),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidInput(name, f"must be a whole number of 0 or more, got {value!r}")


def _key(session_id: str, *parts: str) -> str:
    digest = hashlib.sha256("\x00".join((session_id, *parts)).encode()).hexdigest()[:48]
    return f"claude-context:{digest}"


def _clear(
    session_id: str,
    messages: Sequence[Mapping[str, Any]],
    trigger_tokens: int,
    keep: int,
    clear_at_least: int,
    exclude_tools: Collection[str],
    count_tokens: TokenCount,
) -> Plan[ContextEdit]:
    _check(trigger_tokens, keep, clear_at_least)
    before = count_tokens(messages)
    if before <= trigger_tokens:
        return ContextEdit(copy.deepcopy([dict(m) for m in messages]), (), before, before, "under_trigger")
    candidates = _candidates(messages, keep, exclude_tools)
    if not candidates:
        return ContextEdit(copy.deepcopy([dict(m) for m in messages]), (), before, before, "nothing_to_clear")
    sizes = {c.tool_use_id: count_tokens([{"role": "user", "content": c.body}]) for c in candidates}
    notes = {c.tool_use_id: _note(c, sizes[c.tool_use_id]) for c in candidates}
    # Decided with provisional stubs (a result id is a few characters): nothing is written for
    # an edit that does not go ahead.
    draft = _with_stubs(
        messages, {(c.message, c.block): _stub(session_id, "r0", notes[c.tool_use_id]) for c in candidates}
    )
    if before - count_tokens(draft) < clear_at_least:
        return ContextEdit(
            copy.deepcopy([dict(m) for m in messages]), (), before, before, "below_clear_at_least"
        )
    for c in candidates:  # as `record` takes them: a bad block stops the edit before any write
        check_tool_result(
            c.tool_name,
            c.body,
            media_type=c.media_type,
            arguments=c.arguments,
            where=f"messages[{c.message}].content[{c.block}]",
        )
    result_ids: dict[str, str] = {}
    for c in candidates:
        recorded = yield HandleCall(
            "record",
            (session_id, c.tool_name, c.body),
            {
                "arguments": c.arguments,
                "media_type": c.media_type,
                "idempotency_key": _key(session_id, "record", c.tool_use_id),
            },
        )
        result_ids[c.tool_use_id] = recorded.result_id
    targets = [(result_ids[c.tool_use_id], notes[c.tool_use_id]) for c in candidates]
    yield HandleCall(
        "archive_results",
        (session_id, targets),
        {"idempotency_key": _key(session_id, "archive", *(rid for rid, _ in targets))},
    )
    edited = _with_stubs(
        messages,
        {
            (c.message, c.block): _stub(session_id, result_ids[c.tool_use_id], notes[c.tool_use_id])
            for c in candidates
        },
    )
    cleared = tuple(
        ClearedResult(c.tool_use_id, c.tool_name, result_ids[c.tool_use_id], notes[c.tool_use_id])
        for c in candidates
    )
    return ContextEdit(edited, cleared, before, count_tokens(edited))


def clear_tool_results(
    handle: Handle,
    session_id: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    trigger_tokens: int = 100_000,
    keep: int = 3,
    clear_at_least: int = 0,
    exclude_tools: Collection[str] = (),
    count_tokens: TokenCount = estimate_tokens,
) -> ContextEdit:
    """The conversation with its old tool results archived and stubbed (see the module docstring).

    `trigger_tokens`: clear only when the conversation counts more; `keep`: the newest tool
    results that always stay; `clear_at_least`: clear only if that many tokens go;
    `exclude_tools`: tools whose results always stay. Raises InvalidInput for a malformed
    conversation or setting, and the archive's errors (Forbidden for a principal that may not
    archive: an agent is needed), before any stub is placed."""
    checked = check_blocking_handle(handle, "clear_tool_results")
    plan = _clear(session_id, messages, trigger_tokens, keep, clear_at_least, exclude_tools, count_tokens)
    return run_plan(checked, plan)


async def aclear_tool_results(
    handle: AsyncHandle,
    session_id: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    trigger_tokens: int = 100_000,
    keep: int = 3,
    clear_at_least: int = 0,
    exclude_tools: Collection[str] = (),
    count_tokens: TokenCount = estimate_tokens,
) -> ContextEdit:
    """`clear_tool_results` on an awaited handle (AsyncMnemo, AsyncMnemoClient)."""
    checked = check_handle(handle, "aclear_tool_results")
    if not is_async_handle(checked):
        raise TypeError(
            "aclear_tool_results needs an awaited handle: use clear_tool_results for a blocking one"
        )
    plan = _clear(session_id, messages, trigger_tokens, keep, clear_at_least, exclude_tools, count_tokens)
    return await arun_plan(checked, plan)


def _recover(session_id: str, tool_input: Mapping[str, Any]) -> Plan[str]:
    if not isinstance(tool_input, Mapping) or not isinstance(tool_input.get("result_id"), str):
        raise InvalidInput(
            "result_id", "give the result id the cleared block names, e.g. {'result_id': 'r3'}"
        )
    lines = tool_input.get("lines")
    span: tuple[int, int] | None = None
    if lines is not None:
        if not (
            isinstance(lines, list)
            and len(lines) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
        ):
            raise InvalidInput("lines", f"must be [first, last], two line numbers; got {lines!r}")
        span = (lines[0], lines[1])
    recovered = yield HandleCall("recover", (session_id, tool_input["result_id"]), {"lines": span})
    text: str = recovered.content.decode("utf-8", errors="replace")
    return text


def recover_tool_result(handle: Handle, session_id: str, tool_input: Mapping[str, Any]) -> str:
    """The answer to a `recover_tool_result` call: the cleared result's exact original (or the
    lines asked for), hash-verified; the archive appends the recovered copy to the session.
    Raises InvalidInput for a malformed input, NotFound for a result the session does not hold,
    InvalidSpan for lines the original does not have."""
    return run_plan(check_blocking_handle(handle, "recover_tool_result"), _recover(session_id, tool_input))


async def arecover_tool_result(handle: AsyncHandle, session_id: str, tool_input: Mapping[str, Any]) -> str:
    """`recover_tool_result` on an awaited handle."""
    return await arun_plan(check_handle(handle, "arecover_tool_result"), _recover(session_id, tool_input))


__all__ = [
    "RECOVER_TOOL",
    "RECOVER_TOOL_NAME",
    "STUB_PREFIX",
    "ClearedResult",
    "ContextEdit",
    "aclear_tool_results",
    "arecover_tool_result",
    "clear_tool_results",
    "estimate_tokens",
    "recover_tool_result",
]
