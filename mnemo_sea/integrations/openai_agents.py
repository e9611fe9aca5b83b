"""OpenAI Agents SDK: `MnemoSession`, a `Session` whose history is a mnemo-sea session archive.

    session = MnemoSession("chat-42", mnemo.as_(agent))              # in process, blocking handle
    session = MnemoSession("chat-42", AsyncMnemoClient(url, api_key=...))   # remote, awaited
    agent = Agent(name="helper", tools=[..., session.recover_tool()])
    result = await Runner.run(agent, "hello", session=session)

Every item the Runner adds is a result of the archive session `<session_id>@<generation>`
(`record`, never rewritten): a tool output of type function_call_output, custom_tool_call_output
or local_shell_call_output is recorded as its output (text, or the JSON of a list) with the rest
of the item as the call's arguments, and any other item as its JSON (media type
`application/vnd.mnemo-sea.agents-item+json`, tool name its `type`), so the console and
`live_view` show a tool output as what it is, and `recover(lines=...)` cuts its lines.

A tool output over `large_output_bytes` is archived right after it is recorded (`archive_results`,
with a note made from the call: tool, call id, size, first line): `get_items` then shows it as a
stub naming its result id and the recover tool, so a long conversation does not carry every
bulky output into every prompt. `recover_output(result_id)` (and `recover_tool()`, the same as an
Agents SDK `FunctionTool`) gives back the exact original output, hash-checked by the archive.
`recover` also appends a labelled copy to the archive session; such copies belong to the tool
call that asked for them (its output is an item of its own), so `get_items` never lists them.

The archive is append-only, so the session's other transitions are marks, recorded as results too
(media type `application/vnd.mnemo-sea.agents-mark+json`, read from the listing without content):

- `add_items` validates the whole batch (JSON, sizes, names) before its first write, records the
  items, archives the large outputs, then records one *commit* mark naming the batch's result ids.
  Items are shown only once committed: a batch that failed half-way (the store went down, a
  server's policy refused an item) stays in the archive, audited, and never appears.
- `pop_item` records a *pop* mark hiding the newest shown item and returns that item as it was
  added (its original output, not its stub); the original stays recoverable and audited.
- `clear_session` deletes the archive session (`delete_session`: admin only) and keeps the signed
  receipt on `last_receipt` (check it with the handle's `verify_deleted`). A handle that is not
  an admin's gets Forbidden and nothing is deleted or hidden. A deleted archive session keeps a
  tombstone and its id is never reused, so the next items go to `<session_id>@<generation + 1>`;
  the generation is the number of clears, each one a result of the session `<session_id>@clears`
  (a line saying which generation was cleared; no item content). So after a clear, the same
  session id starts empty, and nothing of the cleared items is left in the archive's tables.

The tenant is the handle's (its principal, or its API key), never the session id's: two tenants
using the same session id share nothing. A session id follows the archive's identifier rules
(letters, digits and . _ : @ -, starting with a letter or digit) and is at most 120 characters.

Each operation is written once, as a *plan* (a generator yielding the handle calls it needs); an
async handle (`AsyncMnemo`, `AsyncMnemoClient`) runs it natively, a blocking one (`mnemo.as_(p)`,
`MnemoClient`) in a worker thread, so the event loop never waits on SQL or HTTP.
A session object keeps each item's original once read (a result is never rewritten), so the
Runner's read of the whole history on every turn fetches only the new items' originals; the
listing of the session's results (without content, 500 a call) is read each time.

Limits: the SDK's resume-after-failure reconciliation compares the session's tail with the items
it wrote; an archived output reads back as its stub, so a run resumed in the middle of writing a
large output cannot confirm that write (the SDK then raises UserError instead of duplicating).
A pop racing another pop may hide one item and return it twice.

Needs the `[openai-agents]` extra (openai-agents).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from mnemo_sea.archive import (
    DeletionReceipt,
    InvalidInput,
    NotFound,
    StateConflict,
    ToolResult,
    arguments_fit,
    check_identifier,
    check_tool_result,
    json_text,
)
from mnemo_sea.integrations.handles import check_handle
from mnemo_sea.integrations.plans import HandleCall, Plan, arun_plan
from mnemo_sea.integrations.search import framework_missing

try:
    from agents import FunctionTool, function_tool
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ImportError as e:
    raise framework_missing("openai_agents", "openai-agents", "openai-agents", e) from e

ITEM_MEDIA_TYPE = "application/vnd.mnemo-sea.agents-item+json"
TEXT_OUTPUT_MEDIA_TYPE = "text/vnd.mnemo-sea.agents-output; charset=utf-8"
JSON_OUTPUT_MEDIA_TYPE = "application/vnd.mnemo-sea.agents-output+json"
MARK_MEDIA_TYPE = "application/vnd.mnemo-sea.agents-mark+json"
_ITEM_MEDIA = frozenset({ITEM_MEDIA_TYPE, TEXT_OUTPUT_MEDIA_TYPE, JSON_OUTPUT_MEDIA_TYPE})
_OUTPUT_MEDIA = frozenset({TEXT_OUTPUT_MEDIA_TYPE, JSON_OUTPUT_MEDIA_TYPE})

# The tool outputs whose `output` may be a string (or a list of content parts) in the Responses
# input schema: only those can stand as a stub. Others (a computer screenshot, a shell call's
# list of runs) are kept whole, since a string in their place would not be a valid input item.
STUBBABLE_OUTPUT_TYPES = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)

# About 2,000 tokens of English, the size from which the archive's curation sets a result aside.
DEFAULT_LARGE_OUTPUT_BYTES = 8_192

SESSION_ID_CHARS = 120  # the archive's 128, less "@clears" and "@<generation>"
CLEARS_SUFFIX = "@clears"
_PAGE = 500  # results read per listing when walking the session back from its newest
_NOTE_HEAD_CHARS = 120
_NOTE_PART_CHARS = 100
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")

Item: TypeAlias = dict[str, Any]


# ---- what an item becomes -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    """One item as it will be recorded; `note` is set for an output to archive behind a stub."""

    tool_name: str
    content: str
    media_type: str
    arguments: dict[str, Any] | None
    note: str | None


def _clean(text: str, limit: int) -> str:
    """`text` on one line without control characters, at most `limit` characters."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _note(item: Mapping[str, Any], output: str, size: int, names: Mapping[str, str]) -> str:
    """What an archived output's stub says of it, from the output alone (deterministic): the tool,
    the call, its size and how it begins."""
    call_id = str(item.get("call_id", "?"))
    tool = names.get(call_id) or str(item.get("type"))
    first = next((line for line in output.splitlines() if line.strip()), "")
    head = _clean(first, _NOTE_HEAD_CHARS) or "(blank)"
    lines = output.count("\n") + 1
    return (
        f"{_clean(tool, _NOTE_PART_CHARS)} output of call {_clean(call_id, _NOTE_PART_CHARS)}: "
        f"{size} bytes, {lines} lines; begins: {head}"
    )


def _call_names(items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """call_id -> tool name, from the calls of the batch (the Runner adds a call and its output
    together)."""
    return {
        str(item["call_id"]): str(item["name"])
        for item in items
        if "call_id" in item and isinstance(item.get("name"), str)
    }


def _prepare(items: object, large_output_bytes: int) -> list[_Prepared]:
    """Every item as it will be recorded; InvalidInput (naming the item) or ContentTooLarge
    before anything is written."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidInput("items", f"must be a list of input items (dicts), got {type(items).__name__}")
    listed = list(items)
    for i, item in enumerate(listed):
        if not isinstance(item, Mapping):
            raise InvalidInput(f"items[{i}]", f"must be an input item (a dict), got {type(item).__name__}")
    names = _call_names(listed)
    prepared: list[_Prepared] = []
    for i, item in enumerate(listed):
        where = f"items[{i}]"
        kind = item.get("type", "message")
        tool_name = kind if isinstance(kind, str) else ""  # refused by _check_recordable
        whole = json_text(dict(item), where)
        output = item.get("output")
        rest = {k: v for k, v in item.items() if k != "output"}
        as_output = tool_name in STUBBABLE_OUTPUT_TYPES and isinstance(output, str | list)
        if as_output and arguments_fit(rest):
            if isinstance(output, str):
                content, media = output, TEXT_OUTPUT_MEDIA_TYPE
            else:
                content, media = json_text(output, f"{where}.output"), JSON_OUTPUT_MEDIA_TYPE
            size = len(content.encode("utf-8"))
            note = _note(item, content, size, names) if size > large_output_bytes else None
            prepared.append(_Prepared(tool_name, content, media, rest, note))
        else:
            prepared.append(_Prepared(tool_name, whole, ITEM_MEDIA_TYPE, None, None))
        recorded = prepared[-1]  # as `record` will take it, checked before the batch's first write
        check_tool_result(
            recorded.tool_name,
            recorded.content,
            media_type=recorded.media_type,
            arguments=recorded.arguments,
            where=where,
        )
    return prepared


def _number(result_id: str) -> int:
    return int(result_id[1:])


def _ranges(numbers: Sequence[int]) -> list[list[int]]:
    """[3, 4, 5, 9] -> [[3, 5], [9, 9]]: a commit mark's ids, compact whatever the batch size."""
    out: list[list[int]] = []
    for n in sorted(numbers):
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def _stub(session: str, result: ToolResult) -> str:
    """What an archived output shows in the history: its note, and how to get it back."""
    return (
        f"[archived tool output: result {result.result_id} of mnemo-sea session {session}, "
        f"{result.size} bytes; note: {result.note or ''}. The exact original is kept: call "
        f'recover_output(result_id="{result.result_id}") to read it (first_line and last_line '
        "for a part).]"
    )


# ---- the session ----------------------------------------------------------------------------------


class MnemoSession:
    """An Agents SDK `Session` kept in mnemo-sea's session archive (see the module docstring).

    `session_id`: the conversation's id (archive identifier rules, at most 120 characters);
    `handle`: who acts (`mnemo.as_(principal)`, `AsyncMnemo`, `MnemoClient`, `AsyncMnemoClient`),
    whose tenant the session is in; `session_settings`: the SDK's settings (a default `limit`
    for `get_items`); `large_output_bytes`: the size (UTF-8 bytes of the output text) over which a
    tool output is archived behind a stub. InvalidInput for a bad id or size, TypeError for
    something that is not a handle.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        handle: object,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        large_output_bytes: int = DEFAULT_LARGE_OUTPUT_BYTES,
    ) -> None:
        check_identifier("session_id", session_id)
        if len(session_id) > SESSION_ID_CHARS:
            raise InvalidInput(
                "session_id", f"is {len(session_id)} characters; a session's id is at most {SESSION_ID_CHARS}"
            )
        if (
            isinstance(large_output_bytes, bool)
            or not isinstance(large_output_bytes, int)
            or large_output_bytes < 1
        ):
            raise InvalidInput(
                "large_output_bytes", f"must be a positive integer, got {large_output_bytes!r}"
            )
        self.session_id = session_id
        self.handle = check_handle(handle, "MnemoSession")
        self.session_settings = (
            SessionSettings() if session_settings is None else coerce_session_settings(session_settings)
        )
        self.large_output_bytes = large_output_bytes
        self.last_receipt: DeletionReceipt | None = None
        # Each item's original text once read, by (archive session, result id): a result is never
        # rewritten, and the Runner reads the whole history on every turn.
        self._originals: dict[tuple[str, str], str] = {}

    def __repr__(self) -> str:
        return f"MnemoSession({self.session_id!r}, {type(self.handle).__name__})"

    async def _run(self, plan: Plan[Any]) -> Any:
        return await arun_plan(self.handle, plan)

    # ---- the Session protocol ----

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest `limit` shown items (default: `session_settings.limit`, else all), oldest
        first; a large output as its stub. InvalidInput for a negative limit."""
        want = resolve_session_limit(limit, self.session_settings)
        if want is not None and (isinstance(want, bool) or not isinstance(want, int) or want < 0):
            raise InvalidInput("limit", f"must be a non-negative integer or None, got {want!r}")
        if want == 0:
            return []
        items: list[TResponseInputItem] = await self._run(self._read(want))
        return items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append `items` as one batch, shown all together or not at all; large tool outputs are
        archived behind stubs. InvalidInput/ContentTooLarge (nothing written) for a bad item."""
        prepared = _prepare(items, self.large_output_bytes)
        if prepared:
            await self._run(self._add(prepared))

    async def pop_item(self) -> TResponseInputItem | None:
        """Hide the newest shown item and return it as it was added; None when nothing is shown."""
        item: TResponseInputItem | None = await self._run(self._pop())
        return item

    async def clear_session(self) -> None:
        """Delete every item of the session (admin handle only: Forbidden, and nothing deleted,
        otherwise); the receipt is `last_receipt` (None when there was nothing to delete)."""
        self.last_receipt = await self._run(self._clear())

    # ---- recovery ----

    async def recover_output(self, result_id: str, lines: tuple[int, int] | None = None) -> str:
        """The exact original of an archived tool output (its text, or the JSON of a list
        output), hash-checked by the archive; with `lines` (first, last; 1-based, inclusive) that
        part of it. InvalidInput for a malformed id, NotFound for an id not issued in this session,
        StateConflict for an output that is not archived, InvalidSpan for lines out of range."""
        if not isinstance(result_id, str) or not re.fullmatch(r"r[1-9][0-9]{0,8}", result_id):
            raise InvalidInput(
                "result_id", f"{str(result_id)[:40]!r} is malformed: result ids look like r1, r2, ..."
            )
        text: str = await self._run(self._recover(result_id, lines))
        return text

    def recover_tool(self) -> FunctionTool:
        """`recover_output` as an Agents SDK tool, to give the agent whose history holds stubs."""

        async def recover_output(
            result_id: str, first_line: int | None = None, last_line: int | None = None
        ) -> str:
            """Bring back the exact original of an archived tool output, named by its stub.

            Args:
                result_id: The result id the stub names, like r7.
                first_line: The first line to bring back (1-based); omit for the whole output.
                last_line: The last line to bring back (inclusive); omit for first_line alone.
            """
            lines = (
                None if first_line is None else (first_line, first_line if last_line is None else last_line)
            )
            return await self.recover_output(result_id, lines)

        return function_tool(recover_output)

    async def archive_session(self) -> str:
        """The archive session holding the items now (`<session_id>@<generation>`)."""
        name: str = await self._run(self._current())
        return name

    # ---- plans ----

    def _current(self) -> Plan[Any]:
        """The archive session of the current generation: the number of clears so far."""
        try:
            info = yield HandleCall("session_info", (self.session_id + CLEARS_SUFFIX,))
            generation = int(info.results)
        except NotFound:
            generation = 0
        return f"{self.session_id}@{generation}"

    def _shown(self, session: str, want: int | None) -> Plan[Any]:
        """The results shown as items, oldest first, the newest `want` of them (all for None).

        Read from the newest back, a page at a time: the marks come after the items they name,
        so each item's commit and pop are known when it is reached."""
        try:
            info = yield HandleCall("session_info", (session,))
        except NotFound:
            return []
        committed: set[int] = set()
        hidden: set[int] = set()
        shown: list[ToolResult] = []
        end = int(info.results)
        while end > 0 and (want is None or len(shown) < want):
            start = max(0, end - _PAGE)
            page: list[ToolResult] = yield HandleCall(
                "list_results", (session,), {"offset": start, "limit": end - start}
            )
            for result in reversed(page):
                if result.recovered_from is not None:
                    continue
                if result.media_type == MARK_MEDIA_TYPE:
                    mark = result.arguments
                    if mark.get("op") == "commit":
                        for first, last in mark.get("ranges", []):
                            committed.update(range(int(first), int(last) + 1))
                    elif mark.get("op") == "pop":
                        hidden.add(int(mark.get("result", 0)))
                elif result.media_type in _ITEM_MEDIA:
                    number = _number(result.result_id)
                    if number in committed and number not in hidden:
                        shown.append(result)
            end = start
        shown.reverse()
        return shown if want is None else shown[-want:]

    def _item(self, session: str, result: ToolResult, *, original: bool = False) -> Plan[Any]:
        """The item `result` stands for; an archived output as its stub unless `original`."""
        if result.media_type in _OUTPUT_MEDIA and result.state == "archived" and not original:
            return {**result.arguments, "output": _stub(session, result)}
        text = self._originals.get((session, result.result_id))
        if text is None:
            _, content = yield HandleCall("get_result", (session, result.result_id), {"with_content": True})
            text = self._originals[(session, result.result_id)] = bytes(content).decode("utf-8")
        if result.media_type == ITEM_MEDIA_TYPE:
            item: Item = json.loads(text)
            return item
        output = text if result.media_type == TEXT_OUTPUT_MEDIA_TYPE else json.loads(text)
        return {**result.arguments, "output": output}

    def _read(self, want: int | None) -> Plan[Any]:
        session = yield from self._current()
        shown = yield from self._shown(session, want)
        items = []
        for result in shown:
            items.append((yield from self._item(session, result)))
        return items

    def _add(self, prepared: list[_Prepared]) -> Plan[Any]:
        session = yield from self._current()
        try:
            first = yield self._record(session, prepared[0])
        except StateConflict:
            # Cleared, but the clear's line was not written (it failed after the deletion): write
            # it, so that this and every later writer move on to the next generation.
            yield from self._log_clear(session)
            session = yield from self._current()
            first = yield self._record(session, prepared[0])
        recorded: list[ToolResult] = [first]
        for one in prepared[1:]:
            recorded.append((yield self._record(session, one)))
        targets = [
            (r.result_id, p.note) for r, p in zip(recorded, prepared, strict=True) if p.note is not None
        ]
        if targets:
            yield HandleCall("archive_results", (session, targets))
        mark = {"op": "commit", "ranges": _ranges([_number(r.result_id) for r in recorded])}
        yield HandleCall(
            "record",
            (session, "mnemo-sea.commit", json_text(mark, "mark")),
            {"media_type": MARK_MEDIA_TYPE, "arguments": mark},
        )
        return None

    @staticmethod
    def _record(session: str, one: _Prepared) -> HandleCall:
        return HandleCall(
            "record",
            (session, one.tool_name, one.content),
            {"media_type": one.media_type, "arguments": one.arguments},
        )

    def _pop(self) -> Plan[Any]:
        session = yield from self._current()
        shown = yield from self._shown(session, 1)
        if not shown:
            return None
        (newest,) = shown
        item = yield from self._item(session, newest, original=True)
        mark = {"op": "pop", "result": _number(newest.result_id)}
        yield HandleCall(
            "record",
            (session, "mnemo-sea.pop", json_text(mark, "mark")),
            {"media_type": MARK_MEDIA_TYPE, "arguments": mark},
        )
        return item

    def _clear(self) -> Plan[Any]:
        session = yield from self._current()
        try:
            receipt: DeletionReceipt = yield HandleCall("delete_session", (session,))
        except NotFound:
            return None  # nothing was ever added in this generation: nothing to delete
        self._originals.clear()  # the next generation is another archive session
        yield from self._log_clear(session)
        return receipt

    def _log_clear(self, session: str) -> Plan[Any]:
        """One line in the clears session per cleared generation (its count is the generation):
        the same request under the same idempotency key, so a repeated write adds nothing."""
        generation = int(session.rsplit("@", 1)[1])
        line = {"op": "cleared", "generation": generation}
        yield HandleCall(
            "record",
            (self.session_id + CLEARS_SUFFIX, "mnemo-sea.cleared", json_text(line, "mark")),
            {
                "media_type": MARK_MEDIA_TYPE,
                "arguments": line,
                "idempotency_key": f"mnemo-sea-agents-clear:{self.session_id}:{generation}",
            },
        )

    def _recover(self, result_id: str, lines: tuple[int, int] | None) -> Plan[Any]:
        session = yield from self._current()
        recovered = yield HandleCall("recover", (session, result_id), {"lines": lines})
        if recovered.original.media_type not in _OUTPUT_MEDIA:
            raise InvalidInput("result_id", f"{result_id} is not a tool output of this session")
        text: str = bytes(recovered.content).decode("utf-8")
        return text


__all__ = [
    "DEFAULT_LARGE_OUTPUT_BYTES",
    "ITEM_MEDIA_TYPE",
    "JSON_OUTPUT_MEDIA_TYPE",
    "MARK_MEDIA_TYPE",
    "STUBBABLE_OUTPUT_TYPES",
    "TEXT_OUTPUT_MEDIA_TYPE",
    "MnemoSession",
]
