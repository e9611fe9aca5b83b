"""The arms of the context-curation experiment: what each one shows of the session's tool results.

Every arm records every tool call in the archive (so citations are checked the same way for all of
them) and renders every prompt through the context assembler; they differ only in the history
they put in front of the model:

- `full`: every result live, in its envelope;
- `window`: the last `window_k` results verbatim, older ones absent (no placeholder) except the
  protected classes, which stay in view (pinned, as masking and the archive keep them);
- `summary`: the last `window_k` verbatim, each older one replaced by its extractive summary
  (`extract_note`) in the envelope of a `summary` pseudo-result, the protected classes verbatim;
  originals are not recoverable;
- `masking`: Anthropic's `clear_tool_uses_20250919` semantics: when the prompt exceeds
  `trigger_tokens`, every result except the newest `keep` and the protected classes is replaced in
  place by `[tool result cleared]`, for good;
- `window+reread`, `masking+reread`: those baselines at their best: at a need whose quote is out
  of view, and before an answer for each cited source out of view, a call the trace marks
  read-only (`reread`) is run again (a request) and its output
  appended as a new result: the original for a stable tool, what the trace says a run returns
  now for another (a moved log, today's stock), which may no longer hold the quote;
- `archive_scripted`: the trace's own archive/recover decisions, applied through the archive;
- `archive_heuristic`: after a tool call, when the prompt exceeds `trigger_tokens`, archive every
  live non-protected result older than the newest `keep` of at least `min_result_tokens`, with an
  extractive note; at a need whose quote is out of view, search the archived notes with the need's
  query, recover the best hit of the session and re-archive the copy after the turn that follows;
- `archive_no_notes`: the heuristic with every note `(set aside)` (ablation: notes are what search
  finds, so without them recovery is blind);
- `archive_auto`: the library's own policy and nothing else: after each tool call `Mnemo.curate`
  with its defaults (automatic notes), and at a need whose quote is out of view `Mnemo.recall`
  with the need's query (a request), which brings back only the excerpt holding it.

The parameters are the published defaults (K=5 from the issue; Anthropic's trigger of 100,000
input tokens and keep=3; 2,000 tokens from the paper's "large result"); they are parameters only so
a tiny test trace can lower them, never tuned on the test set.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from mnemo_sea.archive import InvalidInput

FULL = "full"
WINDOW = "window"
SUMMARY = "summary"
MASKING = "masking"
WINDOW_REREAD = "window+reread"
MASKING_REREAD = "masking+reread"
REREAD_SUFFIX = "+reread"
ARCHIVE_SCRIPTED = "archive_scripted"
ARCHIVE_HEURISTIC = "archive_heuristic"
ARCHIVE_NO_NOTES = "archive_no_notes"
ARCHIVE_AUTO = "archive_auto"
ARM_NAMES: tuple[str, ...] = (
    FULL,
    WINDOW,
    WINDOW_REREAD,
    SUMMARY,
    MASKING,
    MASKING_REREAD,
    ARCHIVE_SCRIPTED,
    ARCHIVE_HEURISTIC,
    ARCHIVE_NO_NOTES,
    ARCHIVE_AUTO,
)

CLEARED_PLACEHOLDER = "[tool result cleared]"
NO_NOTE = "(set aside)"
# Lines of a note or summary must be one-line text the archive accepts: no control characters
# other than tab and newline (the archive's own rule for notes).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ARG_TOKEN = re.compile(r"[^\s\"',;:()\[\]{}=]+")


def _tool(name: str, description: str, input_schema: dict[str, Any]) -> str:
    return json.dumps(
        {"name": name, "description": description, "input_schema": input_schema},
        sort_keys=True,
        separators=(",", ":"),
    )


# What an archiving agent has that the others do not: its tools, paid for in every prompt.
ARCHIVE_RESULTS = "archive_results"
RECOVER_RESULT = "recover_result"
SEARCH_ARCHIVE = "search_archive"
RECALL = "recall"
_TOOL_DEFINITIONS = {
    ARCHIVE_RESULTS: _tool(
        ARCHIVE_RESULTS,
        "Set aside tool results, each replaced in place by your note; originals stay recoverable.",
        {"targets": [{"id": "rN", "note": "what the result held"}]},
    ),
    RECOVER_RESULT: _tool(
        RECOVER_RESULT,
        "Append the exact original of an archived result, labelled historical.",
        {"id": "rN"},
    ),
    SEARCH_ARCHIVE: _tool(
        SEARCH_ARCHIVE,
        "Search the notes of the session's archived results; answers their ids, best first.",
        {"query": "words"},
    ),
    RECALL: _tool(
        RECALL,
        "Find the lines of the session's results that hold what you need, and bring them back.",
        {"query": "what you need, in words"},
    ),
}


@dataclass(frozen=True)
class ArmParams:
    """The fixed parameters of every arm (published defaults; see the module docstring)."""

    window_k: int = 5
    trigger_tokens: int = 100_000  # masking and the heuristic: the same trigger
    keep: int = 3
    min_result_tokens: int = 2_000
    summary_lines: int = 2
    summary_chars: int = 300

    def __post_init__(self) -> None:
        for name in ("window_k", "trigger_tokens", "min_result_tokens", "summary_chars"):
            if getattr(self, name) < 1:
                raise InvalidInput(name, f"must be at least 1, got {getattr(self, name)!r}")
        for name in ("keep", "summary_lines"):
            if getattr(self, name) < 0:
                raise InvalidInput(name, f"must not be negative, got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, int]:
        return {
            "window_k": self.window_k,
            "trigger_tokens": self.trigger_tokens,
            "keep": self.keep,
            "min_result_tokens": self.min_result_tokens,
            "summary_lines": self.summary_lines,
            "summary_chars": self.summary_chars,
        }


@dataclass(frozen=True)
class Arm:
    name: str
    params: ArmParams = field(default_factory=ArmParams)

    def __post_init__(self) -> None:
        if self.name not in ARM_NAMES:
            raise InvalidInput("arms", f"{self.name!r} is not an arm; the arms are {', '.join(ARM_NAMES)}")

    @property
    def shows(self) -> str:
        """The arm whose history it shows (a `+reread` arm shows its baseline's)."""
        return self.name.removesuffix(REREAD_SUFFIX)

    @property
    def rereads(self) -> bool:
        """Whether a need out of view runs a read-only call again."""
        return self.name.endswith(REREAD_SUFFIX)

    @property
    def uses_archive(self) -> bool:
        """Whether its prompt is the archive's live view (stubs, recovered copies)."""
        return self.name in (ARCHIVE_SCRIPTED, ARCHIVE_HEURISTIC, ARCHIVE_NO_NOTES, ARCHIVE_AUTO)

    @property
    def heuristic(self) -> bool:
        return self.name in (ARCHIVE_HEURISTIC, ARCHIVE_NO_NOTES)

    @property
    def tools(self) -> tuple[str, ...]:
        """The definitions of the curation tools the arm's model calls, in every prompt: the
        scripted agent archives and recovers, the heuristic searches too, and the library's arm
        only recalls (its archiving is `curate`, run by the harness, not asked for)."""
        if self.name == ARCHIVE_AUTO:
            names: tuple[str, ...] = (RECALL,)
        elif self.heuristic:
            names = (ARCHIVE_RESULTS, RECOVER_RESULT, SEARCH_ARCHIVE)
        elif self.name == ARCHIVE_SCRIPTED:
            names = (ARCHIVE_RESULTS, RECOVER_RESULT)
        else:
            names = ()
        return tuple(_TOOL_DEFINITIONS[n] for n in names)


def parse_arms(text: str | None, params: ArmParams | None = None) -> tuple[Arm, ...]:
    """`a,b,c` as arms in the canonical order (full first, since ratios are against it); None or
    empty: every arm. `full` is always included: every ratio is taken against it."""
    chosen = set(ARM_NAMES) if not text else {p.strip() for p in text.split(",") if p.strip()}
    unknown = sorted(chosen - set(ARM_NAMES))
    if unknown:
        raise InvalidInput(
            "arms", f"unknown arm(s) {', '.join(unknown)}; the arms are {', '.join(ARM_NAMES)}"
        )
    chosen.add(FULL)
    p = params or ArmParams()
    return tuple(Arm(name, p) for name in ARM_NAMES if name in chosen)


def _argument_tokens(arguments: dict[str, Any]) -> list[str]:
    """The digit-bearing tokens of a call's arguments (ids, order numbers, dates, pods)."""
    flat = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    out: list[str] = []
    for token in _ARG_TOKEN.findall(flat):
        if any(ch.isdigit() for ch in token) and token not in out:
            out.append(token)
    return out


def extract_note(content: str, arguments: dict[str, Any], *, lines: int = 2, max_chars: int = 300) -> str:
    """A deterministic extractive summary, no model: the first `lines` lines, then every later
    line holding a digit-bearing token of the call's arguments, in order, cut at `max_chars`.

    It is what the `summary` arm shows in place of an old result and what the heuristic writes
    as an archive note; an empty result gives `(empty result)` (a note must say something).
    """
    all_lines = [_CONTROL.sub(" ", line).strip() for line in content.splitlines()]
    all_lines = [line for line in all_lines if line]
    tokens = _argument_tokens(arguments)
    picked = all_lines[:lines]
    picked += [line for line in all_lines[lines:] if any(t in line for t in tokens)]
    text = "\n".join(picked)[:max_chars].strip()
    return text or "(empty result)"
