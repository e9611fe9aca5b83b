"""The messages of a session that are not tool results: what the model wrote and what the
curation tools replied. They are part of every prompt that follows them, in every arm.

An agent's request list holds more than the results the assembler places: the model's own tool
calls (a `tool_use` block naming the tool and its arguments), its answers, and, for an archiving
agent, its calls to the curation tools (an `archive_results` call carries its notes) with their
replies (a receipt, a recall's status, a search's hits). Leaving them out would make the arms
that make more calls look cheaper than they are. They are rendered as one compact JSON line each
(the shape of a provider's message, not its exact bytes: what matters is that every arm pays the
same price for the same message) and placed among the session's results where they were said
(`interleave`), so a prompt that only grows still only appends, as a provider's cache sees it.

What is not here: the work the harness does without asking the model (`curate` in the library's
own arm, masking's clearing); it costs no request, and its effect is in the assembled context.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mnemo_sea.context.segments import Segment

MessageKind = Literal["assistant", "tool_reply"]
# The kinds of a prompt record the trace itself asks for; the others are requests an arm adds.
TURN_EVENTS = frozenset({"tool_call", "need", "answer", "task"})
_AFTER_HISTORY = frozenset({"evidence", "output_reserve"})


@dataclass(frozen=True)
class Message:
    kind: MessageKind
    text: str
    tokens: int
    after: int  # the number of the session's newest result when it was said (0: none yet)


Shown = tuple[str, str, int]  # (kind, text, tokens) of one piece of a prompt, in order


def result_number(result_id: str) -> int:
    """`r12` -> 12 (the archive numbers a session's results in the order they were added)."""
    return int(result_id.removeprefix("r"))


def interleave(segments: Sequence[Segment], messages: Sequence[Message]) -> list[Shown]:
    """The prompt's pieces in order: each message just before the first result of the history
    added after it was said, or, said after them all, at the end of the history (before the
    retrieved evidence, which follows the session's observations)."""
    out: list[Shown] = []
    waiting = list(messages)  # in the order said, so `after` never decreases

    def flush(before: int | None) -> None:
        while waiting and (before is None or waiting[0].after < before):
            m = waiting.pop(0)
            out.append((m.kind, m.text, m.tokens))

    for s in segments:
        if s.component == "history":
            flush(result_number(s.ids[0]))
        elif s.component in _AFTER_HISTORY:
            flush(None)
        out.append((s.kind, s.text, s.tokens))
    flush(None)
    return out


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def tool_use(name: str, arguments: dict[str, Any]) -> str:
    """The model's call of a tool, as its message carries it."""
    return _line({"role": "assistant", "tool_use": {"name": name, "input": arguments}})


def said(text: str) -> str:
    """Text the model wrote (an answer, a remark between calls)."""
    return _line({"role": "assistant", "text": text})


def said_texts(message: Message) -> list[str]:
    """Every text a message carries, decoded from its JSON (a note, a query, an answer): what a
    check for injected text reads, since the JSON line escapes quotes and line breaks."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(json.loads(message.text))
    return out


def reply(name: str, content: dict[str, Any]) -> str:
    """A curation tool's reply (the results of the trace's own tools are in the assembled context)."""
    return _line({"role": "tool", "name": name, "content": content})
