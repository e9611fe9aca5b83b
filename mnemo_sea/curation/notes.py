"""Automatic notes: what an archived result's stub says, built from its content and its tool.

A note is read on every later turn and is what search over notes finds, so it must say what the
result holds that a later need could ask for, in a few lines. A result's first lines rarely do
(a pytest header, "Running with dbt=...", a report's title page), and three runs of one tool
would get one note. So the note follows the kind of output:

- a test run: its summary line and its FAILED and ERROR lines;
- a log: how many ERROR/FATAL and WARN lines, the distinct ERROR/FATAL lines, and its last line;
- JSON: its shape, its keys, and the values of id-like and status-like keys;
- a code listing: its definitions with their line numbers;
- a document: its title, headings, table and figure captions, table headers, errata;
- anything else: its first meaningful lines.

Every kind adds the lines that hold a digit-bearing token of the call's arguments (an order id,
a date, a pod name): the line a later need is most likely about. No line that reads as an
instruction to the model is copied, nor the lines around it (instructions.py); the note says
how many it left out, so the agent knows to look at the original with care. Deterministic, no
model: the same result always gets the same note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from .instructions import paragraphs, reads_as_instruction, tainted_line

# A note's size: a stub is re-read on every turn (about 4 characters a token).
NOTE_CHARS = 320
_LINE_CHARS = 160
# How much of a line is read at all: a note copies at most _LINE_CHARS of one.
_SCAN_CHARS = 2_000
# The lines screened for instructions whether a note would pick them or not.
SCREENED_LINES = 1_000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ARG_TOKEN = re.compile(r"[^\s\"',;:()\[\]{}=]+")

# ---- what kind of output -----------------------------------------------------------------------

_TEST_SUMMARY = re.compile(
    r"^=+ .*\b(?:passed|failed|errors?|skipped|xfailed|deselected)\b.* =+$"  # pytest
    r"|^(?:Tests?|Test Suites):\s+.*\b(?:passed|failed|total)\b"  # jest
    r"|^test result: (?:ok|FAILED)\."  # cargo
    r"|^Ran \d+ tests? in "  # unittest
    r"|^(?:OK|FAILED)(?: \(.*\))?$"  # unittest's verdict
    r"|^(?:ok|FAIL|---\s+FAIL:?)\s+\S+"  # go test
    r"|\b\d+ (?:passed|failed)(?:, \d+ (?:passed|failed|skipped|errors?))+",
    re.IGNORECASE,
)
_TEST_FAILURE = re.compile(
    r"^(?:FAILED|ERROR|FAIL:|ERROR:|---\s+FAIL|✕|×|\s*●)\s*\S|^E\s{2,}\S|\bAssertionError\b|^\s*\d+\)\s.+failed",
)
_LOG_LEVEL = re.compile(
    r"\b(?:FATAL|CRITICAL|PANIC|ERROR|ERR|SEVERE|EXCEPTION|Traceback)\b|\bE\d{4}\b|错误|异常|失败"
)
_LOG_WARN = re.compile(r"\b(?:WARN|WARNING)\b|警告")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_DEFINITION = re.compile(
    r"^\s*(?:export\s+|pub(?:\([^)]*\))?\s+|public\s+|private\s+|protected\s+|static\s+|async\s+|abstract\s+)*"
    r"(?:def|class|function|func|fn|interface|struct|enum|trait|impl|module|type|CREATE\s+(?:TABLE|VIEW|FUNCTION))\s+"
    r"[A-Za-z_][\w.]*",
    re.IGNORECASE,
)
_HEADING = re.compile(
    r"^\s{0,3}#{1,6}\s+\S"  # markdown
    r"|^\s*(?:\d+(?:\.\d+){0,3}\.?|[IVX]+\.|[A-Z]\.)\s+[A-Z\u4e00-\u9fff][^.!?。]{2,80}$"  # numbered
    r"|^\s*(?:第[一二三四五六七八九十百\d]+[章节条部分]|[一二三四五六七八九十]+、)"  # 第三章, 一、
    r"|^\s*(?:Abstract|Summary|Introduction|Conclusions?|Results|Methods|Discussion|References|Appendix)\s*$"
    r"|^\s*(?:摘要|结论|引言|附录|参考文献)\s*$",
)
_CAPTION = re.compile(
    r"^\s*(?:Table|Tab\.|Figure|Fig\.|Chart|Exhibit|表|图)\s*[\dA-Z一二三四五六七八九十]+[.:：\s]"
)
_ERRATUM = re.compile(
    r"\b(?:errat(?:um|a)|corrigendum|correction|corrected|retract(?:ed|ion)|amended)\b|更正|勘误|修正|撤回"
)
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_RULE_LINE = re.compile(r"^[\s|:+=_*#~.\-]*$")
# The rules a tool draws around a line (`==== 1 failed ====`): no information, many tokens.
_DECORATION = re.compile(r"^[=_*~\-]{3,}\s*|\s*[=_*~\-]{3,}$")
_ID_KEY = re.compile(
    r"(?:^|_)(?:id|uuid|key|name|title|status|state|error|errors|message|code|total|count|version|type|sku|order|date)$",
    re.IGNORECASE,
)


def _kind(tool_name: str, lines: list[str], media_type: str, parsed: object) -> str:
    tool = tool_name.lower()
    if parsed is not None:
        return "json"
    test_tool = re.search(r"pytest|jest|test|spec", tool)
    summary = any(_TEST_SUMMARY.search(line) for line in lines[-60:])
    if (summary or test_tool) and any(_TEST_SUMMARY.search(x) or _TEST_FAILURE.search(x) for x in lines):
        return "test run"
    stamped = sum(1 for line in lines[:400] if _TIMESTAMP.search(line) or _LOG_LEVEL.search(line))
    if "log" in tool or stamped >= max(3, len(lines[:400]) // 3):
        return "log"
    definitions = sum(1 for line in lines[:2000] if _DEFINITION.match(line))
    if definitions >= 2 or (definitions and re.search(r"\.(?:py|js|ts|go|rs|java|c|cc|cpp|rb|sql)\b", tool)):
        return "code"
    if any(_HEADING.match(line) or _CAPTION.match(line) for line in lines[:4000]):
        return "document"
    return "text"


# ---- picking lines ---------------------------------------------------------------------------------


class _Picker:
    """The note's lines, in order of value, each once and never a tainted or empty one.

    Taint is judged only for the lines a note would pick (instructions.tainted_line, which
    looks at their paragraph's neighbours): a 50,000-line log is not screened line by line to
    pick a dozen lines from it."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.paragraph = paragraphs(lines)
        self.instruction: dict[int, bool] = {}
        self.withheld: set[int] = set()
        self.picked: list[str] = []

    def usable(self, i: int) -> bool:
        if _RULE_LINE.match(self.lines[i]):
            return False
        if tainted_line(self.lines, self.paragraph, i, self.instruction):
            self.withheld.add(i)
            return False
        return True

    def add(self, text: str) -> None:
        text = _DECORATION.sub("", " ".join(_CONTROL.sub(" ", text[:_SCAN_CHARS]).split()))
        if not text or reads_as_instruction(text):
            return
        if len(text) > _LINE_CHARS:
            text = text[: _LINE_CHARS - 1] + "…"
        if text not in self.picked:
            self.picked.append(text)

    def lines_where(self, test: Callable[[str], object], limit: int, *, last: bool = False) -> None:
        order = range(len(self.lines) - 1, -1, -1) if last else range(len(self.lines))
        found: list[str] = []
        for i in order:
            if test(self.lines[i]) and self.usable(i):
                found.append(self.lines[i])
                if len(found) >= limit:
                    break
        for line in reversed(found) if last else found:
            self.add(line)


def _argument_tokens(arguments: Mapping[str, Any]) -> list[str]:
    """The digit-bearing tokens of a call's arguments (ids, order numbers, dates, pods)."""
    flat = json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True, default=str)
    out: list[str] = []
    for token in _ARG_TOKEN.findall(flat):
        if len(token) >= 3 and any(ch.isdigit() for ch in token) and token not in out:
            out.append(token)
    return out[:8]


def _template(line: str) -> str:
    """A log line without its times and numbers: lines of one template count once."""
    return re.sub(r"\d+", "#", _TIMESTAMP.sub("", line)).strip()


def _test_run(p: _Picker) -> None:
    p.lines_where(_TEST_SUMMARY.search, 2, last=True)
    p.lines_where(_TEST_FAILURE.search, 5)


def _log(p: _Picker) -> None:
    errors = [i for i, line in enumerate(p.lines) if _LOG_LEVEL.search(line)]
    warnings = sum(1 for line in p.lines if _LOG_WARN.search(line))
    if errors or warnings:
        p.add(f"{len(errors)} error line(s), {warnings} warning(s)")
    seen: set[str] = set()
    for i in errors:
        template = _template(p.lines[i])
        if template in seen or not p.usable(i):
            continue
        seen.add(template)
        p.add(p.lines[i])
        if len(seen) >= 4:
            break
    p.lines_where(lambda line: line.strip(), 1, last=True)


def _code(p: _Picker) -> None:
    shown = 0
    for i, line in enumerate(p.lines):
        if shown >= 8:
            break
        if _DEFINITION.match(line) and p.usable(i):
            p.add(f"L{i + 1} {line.strip().rstrip(':{')}")
            shown += 1


def _document(p: _Picker) -> None:
    p.lines_where(lambda line: line.strip(), 1)  # the title
    p.lines_where(_ERRATUM.search, 2)
    p.lines_where(lambda line: _HEADING.match(line) or _CAPTION.match(line), 8)
    p.lines_where(_TABLE_ROW.match, 1)


def _text(p: _Picker) -> None:
    p.lines_where(lambda line: sum(ch.isalnum() for ch in line) >= 3, 2)


def _json(p: _Picker, parsed: object) -> None:
    if isinstance(parsed, list):
        p.add(f"array of {len(parsed)} item(s)")
        first = next((x for x in parsed if isinstance(x, dict)), None)
        if first is not None:
            p.add("keys: " + ", ".join(list(map(str, first))[:12]))
        values = [_id_values(x) for x in parsed[:20] if isinstance(x, dict)]
        for v in values:
            if v:
                p.add(v)
    elif isinstance(parsed, dict):
        p.add("keys: " + ", ".join(list(map(str, parsed))[:16]))
        p.add(_id_values(parsed))
        for key, value in list(parsed.items())[:16]:
            if isinstance(value, list) and value and isinstance(value[0], dict):
                p.add(f"{key}: {len(value)} item(s)")
                for x in value[:10]:
                    p.add(_id_values(x))


def _id_values(obj: Mapping[str, Any]) -> str:
    """`key=value` for the id-like and status-like keys of one object whose values are short."""
    parts: list[str] = []
    for key, value in obj.items():
        if not _ID_KEY.search(str(key)) or isinstance(value, dict | list):
            continue
        text = str(value)
        if len(text) <= 48 and not reads_as_instruction(text):
            parts.append(f"{key}={text}")
    return ", ".join(parts[:6])


_PICKERS: dict[str, Callable[[_Picker], None]] = {
    "test run": _test_run,
    "log": _log,
    "code": _code,
    "document": _document,
    "text": _text,
}


def automatic_note(
    tool_name: str,
    arguments: Mapping[str, Any],
    content: bytes | str,
    media_type: str = "text/plain; charset=utf-8",
    *,
    max_chars: int = NOTE_CHARS,
) -> str:
    """The note an archived result gets when no agent wrote one (see the module docstring)."""
    data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"binary {media_type.split(';', 1)[0]}, {len(data)} bytes"
    # Lines as the archive counts them (at `\n`), each read as far as a note could use it: a
    # 2 MB line is not matched against every pattern.
    lines = [line[:_SCAN_CHARS] for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    if not any(line.strip() for line in lines):
        return "(empty result)"
    parsed: object = None
    if text.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python recurses
            parsed = None
    kind = _kind(tool_name, lines, media_type, parsed if isinstance(parsed, dict | list) else None)
    picker = _Picker(lines)
    # The head of the result is screened whole, so the note can say what it left out there;
    # further on, only the lines a note would pick are (and counted when refused).
    for i in range(min(len(lines), SCREENED_LINES)):
        picker.usable(i)
    picker.add(f"{kind}, {len(lines)} lines")
    if kind == "json":
        _json(picker, parsed)
    else:
        _PICKERS[kind](picker)
    tokens = _argument_tokens(arguments)
    if tokens:
        picker.lines_where(lambda line: any(t in line for t in tokens), 3)
    if picker.withheld:
        count = len(picker.withheld)
        picker.picked.insert(1, f"[{count} line(s) that read as instructions to the model left out]")
    return _fit(picker.picked, max_chars)


def _fit(parts: list[str], max_chars: int) -> str:
    """The parts, one per line, as many whole ones as fit (the first, cut, if none does)."""
    out: list[str] = []
    used = 0
    for part in parts:
        cost = len(part) + (1 if out else 0)
        if used + cost > max_chars:
            if not out:
                out.append(part[: max_chars - 1] + "…")
            continue
        out.append(part)
        used += cost
    return "\n".join(out)
