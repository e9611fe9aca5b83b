"""Claude's memory tool (`memory_20250818`) kept in the archive: a backend for the Anthropic SDK.

    tool = MnemoMemoryTool(mnemo.as_(principal))            # or MnemoClient(url, api_key=...)
    runner = client.beta.messages.tool_runner(model=..., messages=..., tools=[tool])
    tool = AsyncMnemoMemoryTool(AsyncMnemo(mnemo, principal))  # or AsyncMnemoClient, for async runners

The classes subclass the SDK's `BetaAbstractMemoryTool` / `BetaAsyncAbstractMemoryTool`, so the
SDK dispatches each command Claude sends (`tool.call(input)`) to view, create, str_replace,
insert, delete or rename, and turns the `ToolError` raised for a refused command into a tool
result with `is_error: true` whose text is the error's.

The files are evidence records of the handle's tenant: `/memories/notes.md` is the record
`memories/notes.md` (kind `knowledge`, source `claude-memory`, scope `claude-memory` unless
another is given, locator the path, provenance `model_inference`, text/plain), so a hybrid search
finds them (`search(q, sources=["claude-memory"])`). Invariants:

- Every write (create, str_replace, insert, rename's new path) is a new version of the record,
  whose row says who wrote it and when (`recorded_by`, `recorded_at`), with its audit event: the
  archive appends one `put_evidence` event to the tenant's chain, in the write's transaction,
  naming the version (`evidence:memories/notes.md@3`; a directory's rename is one write, whose
  event names every file's new version). The old versions stay in `evidence_history`. A write
  whose text equals the current version's stores nothing and appends no event. The chain also
  records each deletion (with its receipt) and each refusal (docs/architecture.md, "Audit and
  receipts").
- Directories are not stored: a directory is the files under it. A path is never both a file and
  a directory (a create under a file, or at a directory, is refused).
- delete is the archive's deletion: every version, with a signed receipt (`receipts`, the last
  `keep_receipts`), of each file under a directory. The archive lets only admins delete: for
  another principal the archive refuses (and audits the refusal) and nothing changes.
- rename writes the new path, then deletes the old; everything is checked first (the source
  exists, the destination does not, the principal may delete), so a refused rename changes
  nothing. In process the principal says whether it may delete; a client cannot see its API
  key's roles, so rename through a client needs `admin=True` (given wrongly, the new path is
  written and the old one stays: the error says so).
- Paths stay under /memories: `..` and `.` segments, other roots, backslashes, control
  characters, `~`, empty segments, `%` (percent-encoding is never decoded), names outside
  letters, digits, `.`, `_` and `-` (so no `->`, `@` or other link-like name), and paths over
  MAX_PATH_CHARS are refused with a text saying why, before anything is read.
- The texts are the SDK's local filesystem tool's (`BetaLocalFilesystemMemoryTool`), so a model
  sees the same answers: line numbers right-aligned in 6 columns and a tab; a directory listing
  two levels deep with sizes (a directory's is the total of its files'). `view_range` must name
  lines the file has (`[start, end]`, `end` -1 for the last line): exactly those are shown.

Each command is written once as a plan of handle calls (mnemo_sea/integrations/plans.py) that
a blocking and an awaiting runner both execute. Not atomic across calls: two writers of one file
can lose an update (the archive keeps both versions), and a directory delete that fails half-way
names what it deleted.

Needs the `[anthropic]` extra.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from mnemo_sea.archive import EvidenceInput, Forbidden, NotFound, Role
from mnemo_sea.errors import MnemoError
from mnemo_sea.integrations.handles import check_blocking_handle, check_handle, is_async_handle
from mnemo_sea.integrations.plans import HandleCall, arun_plan, every_item, run_plan
from mnemo_sea.integrations.plans import Plan as _Plan
from mnemo_sea.integrations.search import framework_missing

try:
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
    from anthropic.types.beta import BetaCacheControlEphemeralParam, BetaMemoryTool20250818Command
except ImportError as e:
    raise framework_missing("claude_memory", "anthropic", "anthropic", e) from e

if TYPE_CHECKING:
    from mnemo_sea.archive import DeletionReceipt, EvidenceInfo
    from mnemo_sea.integrations.handles import AsyncHandle, Handle

ROOT = "/memories"
ID_ROOT = "memories"  # the evidence id of /memories/a/b is memories/a/b
SOURCE = "claude-memory"
DEFAULT_SCOPE = "claude-memory"
MEDIA_TYPE = "text/plain"
# The archive's ids are at most 256 characters: "memories/" leaves 247 for the rest of a path.
MAX_PATH_CHARS = len(ROOT) + 248
MAX_LINES = 999_999  # as the SDK's filesystem tool
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
LISTING_DEPTH = 2
_SNIPPET_HEADER = "Here is the snippet showing the change (with line numbers):"
_NAME = re.compile(r"[A-Za-z0-9._-]+")


# ---- paths ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPath:
    """A checked path under /memories: `parts` are its segments after /memories (none for the
    root itself)."""

    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return "/".join((ROOT, *self.parts))

    @property
    def evidence_id(self) -> str:
        return "/".join((ID_ROOT, *self.parts))

    @property
    def is_root(self) -> bool:
        return not self.parts

    def ancestors(self) -> list[MemoryPath]:
        """The directories above it, below the root, nearest last."""
        return [MemoryPath(self.parts[:n]) for n in range(1, len(self.parts))]

    def contains(self, other: MemoryPath) -> bool:
        return other.parts[: len(self.parts)] == self.parts and other != self

    @classmethod
    def of_id(cls, evidence_id: str) -> MemoryPath:
        return cls(tuple(evidence_id.split("/")[1:]))


def parse_path(path: object, parameter: str = "path") -> MemoryPath:
    """`path` as a MemoryPath; ToolError (the text the model reads) naming what is wrong."""
    if not isinstance(path, str):
        raise ToolError(f"Invalid `{parameter}` parameter: it must be a string, got {type(path).__name__}")
    shown = path if len(path) <= 80 else path[:80] + "..."
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ToolError(f"The path {shown!r} contains a control character: memory paths are plain names")
    if "\\" in path:
        raise ToolError(f"The path {shown} contains a backslash: separate folders with /")
    if "%" in path:
        raise ToolError(
            f"The path {shown} contains %: percent-encoding is not decoded in memory paths; "
            "write the name itself"
        )
    if "~" in path:
        raise ToolError(f"The path {shown} contains ~: memory paths start with /memories, not a home folder")
    if len(path) > MAX_PATH_CHARS:
        raise ToolError(f"The path {shown} is {len(path)} characters long; the limit is {MAX_PATH_CHARS}")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with /memories, got: {shown}")
    rest = path[len(ROOT) + 1 :]
    if rest.endswith("/"):  # /memories/notes/ names the folder notes
        rest = rest[:-1]
    parts = tuple(rest.split("/")) if rest else ()
    for part in parts:
        if part in (".", ".."):
            raise ToolError(f"Path {shown} would escape /memories directory")
        if not part:
            raise ToolError(f"The path {shown} has an empty segment (//): name each folder once")
        if not _NAME.fullmatch(part):
            raise ToolError(
                f"The path {shown} has the name {part!r}: memory file and folder names use letters, "
                "digits, '.', '_' and '-' only"
            )
    return MemoryPath(parts)


# ---- plans: each command once, as the handle calls it makes ---------------------------------------


Plan = _Plan[str]


@dataclass
class _Memory:
    """What the plans share: where files go, whether the principal may delete, the receipts."""

    scope: str
    admin: bool
    receipts: deque[DeletionReceipt]


def _read(path: MemoryPath) -> Generator[HandleCall, Any, str | None]:
    """The current text of a file; None when there is none."""
    if path.is_root:
        return None
    try:
        record, content = yield HandleCall("get_evidence", (path.evidence_id,), {"with_content": True})
    except NotFound:
        return None
    if record.status != "active" or content is None:
        return None
    text: str = content.decode("utf-8", errors="replace")
    return text


def _files_under(path: MemoryPath) -> Generator[HandleCall, Any, dict[MemoryPath, int]]:
    """Every file below the directory `path`, in id order, with its size in bytes (one listing:
    no file is read)."""
    prefix = path.evidence_id + "/"
    listed: list[EvidenceInfo] = yield from every_item("list_evidence", prefix=prefix)
    return {
        MemoryPath.of_id(info.evidence_id): info.size
        for info in listed
        if info.status == "active" and info.evidence_id.startswith(prefix)
    }


def _put(memory: _Memory, path: MemoryPath, text: str) -> HandleCall:
    return HandleCall("put_evidence", (_evidence(memory, path, text),))


def _evidence(memory: _Memory, path: MemoryPath, text: str) -> EvidenceInput:
    return EvidenceInput(
        body=text,
        source=SOURCE,
        evidence_id=path.evidence_id,
        scope=memory.scope,
        locator=path.text,
        media_type=MEDIA_TYPE,
        provenance="model_inference",  # what Claude chose to write down
        kind="knowledge",
    )


def _missing(path: MemoryPath) -> ToolError:
    return ToolError(f"The path {path.text} does not exist. Please provide a valid path.")


def _numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{str(first + i).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines))


def _size(n: int) -> str:
    """A size as the SDK's filesystem tool shows it: 0B, 512B, 1.5K, 2M."""
    if n == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((n.bit_length() - 1) // 10, len(units) - 1)
    value = n / 1024**i
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


def view(memory: _Memory, path: MemoryPath, view_range: list[int] | None) -> Plan:
    text = yield from _read(path)
    if text is not None:
        lines = text.split("\n")
        if len(lines) > MAX_LINES:
            raise ToolError(f"File {path.text} exceeds maximum line limit of 999,999 lines.")
        first = 1
        if view_range is not None:
            start, end = view_range
            last = len(lines) if end == -1 else end
            if not 1 <= start <= last <= len(lines):
                raise ToolError(
                    f"Invalid `view_range` parameter: {view_range}. The file has {len(lines)} lines: "
                    f"give [start, end] with 1 <= start <= end <= {len(lines)}, or end -1 for the last line."
                )
            lines, first = lines[start - 1 : last], start
        return f"Here's the content of {path.text} with line numbers:\n" + _numbered(lines, first)
    files = yield from _files_under(path)
    if not files and not path.is_root:
        raise _missing(path)
    if view_range is not None:
        raise ToolError(f"The path {path.text} is a directory: `view_range` applies to files only.")
    sizes: dict[tuple[str, ...], int] = {}
    for file, size in files.items():
        rel = file.parts[len(path.parts) :]
        for n in range(1, len(rel) + 1):  # the file, and each directory it is in
            sizes[rel[:n]] = sizes.get(rel[:n], 0) + size
    is_dir = {rel[:n] for rel in sizes for n in range(1, len(rel))}
    lines = [f"{_size(sum(s for r, s in sizes.items() if len(r) == 1))}\t{path.text}"]
    # Depth first, each directory's entries by name: the order the SDK's tool lists a folder in.
    for rel in sorted(r for r in sizes if len(r) <= LISTING_DEPTH):
        shown = "/".join(rel) + ("/" if rel in is_dir else "")
        lines.append(f"{_size(sizes[rel])}\t{path.text}/{shown}")
    header = f"Here're the files and directories up to 2 levels deep in {path.text}, excluding hidden items:"
    return header + "\n" + "\n".join(lines)


def _refuse_dir_or_file_above(path: MemoryPath) -> Generator[HandleCall, Any, None]:
    """ToolError when `path` is a directory, or a directory above it is a file."""
    if path.is_root or (yield from _files_under(path)):
        raise ToolError(f"The path {path.text} is a directory")
    for above in path.ancestors():
        if (yield from _read(above)) is not None:
            raise ToolError(f"The path {above.text} is a file, so {path.text} cannot be created under it")


def create(memory: _Memory, path: MemoryPath, file_text: str) -> Plan:
    if (yield from _read(path)) is not None:
        raise ToolError(f"File {path.text} already exists")
    yield from _refuse_dir_or_file_above(path)
    yield _put(memory, path, file_text)
    return f"File created successfully at: {path.text}"


def _existing_file(path: MemoryPath) -> Generator[HandleCall, Any, str]:
    text = yield from _read(path)
    if text is None:
        if not path.is_root and (yield from _files_under(path)):
            raise ToolError(f"The path {path.text} is not a file.")
        raise _missing(path)
    return text


def str_replace(memory: _Memory, path: MemoryPath, old_str: str, new_str: str) -> Plan:
    content = yield from _existing_file(path)
    count = content.count(old_str)
    if count == 0:
        raise ToolError(
            f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path.text}."
        )
    if count > 1:
        lines, start = [], 0
        while (pos := content.find(old_str, start)) != -1:
            lines.append(content[:pos].count("\n") + 1)
            start = pos + 1
        raise ToolError(
            f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: "
            f"{', '.join(map(str, lines))}. Please ensure it is unique"
        )
    changed = content[: content.find(old_str)].count("\n")
    new_content = content.replace(old_str, new_str)
    yield _put(memory, path, new_content)
    new_lines = new_content.split("\n")
    start = max(0, changed - 2)
    snippet = _numbered(new_lines[start : min(len(new_lines), changed + 3)], start + 1)
    return (
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
        + (snippet)
    )


def insert(memory: _Memory, path: MemoryPath, insert_line: int, insert_text: str) -> Plan:
    content = yield from _existing_file(path)
    lines = content.split("\n")
    if lines[-1] == "":  # a trailing newline ends the last line, it does not start another
        lines.pop()
    if not 0 <= insert_line <= len(lines):
        raise ToolError(
            f"Invalid `insert_line` parameter: {insert_line}. "
            f"It should be within the range [0, {len(lines)}]."
        )
    lines.insert(insert_line, insert_text.rstrip("\n"))
    new_content = "\n".join(lines)
    if not new_content.endswith("\n"):
        new_content += "\n"
    yield _put(memory, path, new_content)
    return f"The file {path.text} has been edited."


def _delete_all(memory: _Memory, files: Iterable[MemoryPath], shown: str) -> Generator[HandleCall, Any, None]:
    deleted: list[str] = []
    for file in files:
        try:
            receipt = yield HandleCall("delete_evidence", (file.evidence_id,))
        except Forbidden as e:
            raise ToolError(
                f"{shown} was not deleted: the archive lets only admins delete ({e.message})."
                + (
                    f" Deleted before the refusal: {', '.join(deleted)}."
                    if deleted
                    else " Nothing was changed."
                )
            ) from e
        except MnemoError as e:
            if not deleted:
                raise
            raise ToolError(f"Deleting {shown} stopped: {e}. Deleted already: {', '.join(deleted)}.") from e
        memory.receipts.append(receipt)
        deleted.append(file.text)


def delete(memory: _Memory, path: MemoryPath) -> Plan:
    if path.is_root:
        raise ToolError("Cannot delete the /memories directory itself")
    if (yield from _read(path)) is not None:
        files = [path]
    else:
        files = list((yield from _files_under(path)))
        if not files:
            raise ToolError(f"The path {path.text} does not exist")
    yield from _delete_all(memory, files, path.text)
    return f"Successfully deleted {path.text}"


def rename(memory: _Memory, old: MemoryPath, new: MemoryPath) -> Plan:
    if old.is_root:
        raise ToolError("Cannot rename the /memories directory itself")
    if not memory.admin:
        raise ToolError(
            f"{old.text} was not renamed: renaming deletes the old path, and the archive lets only "
            "admins delete. Nothing was changed; create the new file and keep the old one instead."
        )
    text = yield from _read(old)
    moves: list[tuple[MemoryPath, MemoryPath, str]] = []  # (from, to, text)
    if text is not None:
        moves.append((old, new, text))
    else:
        for file in (yield from _files_under(old)):
            content = yield from _read(file)
            if content is not None:
                moves.append((file, MemoryPath(new.parts + file.parts[len(old.parts) :]), content))
        if not moves:
            raise ToolError(f"The path {old.text} does not exist")
    if new.is_root or (yield from _read(new)) is not None or (yield from _files_under(new)):
        raise ToolError(f"The destination {new.text} already exists")
    if old.contains(new):
        raise ToolError(f"Cannot move {old.text} into itself ({new.text})")
    for above in new.ancestors():
        if (yield from _read(above)) is not None:
            raise ToolError(f"The path {above.text} is a file, so {new.text} cannot be created under it")
    # All new versions in one transaction, then the old paths go.
    yield HandleCall("ingest", ([_evidence(memory, to, content) for _, to, content in moves],))
    try:
        yield from _delete_all(memory, [src for src, _, _ in moves], old.text)
    except ToolError as e:
        raise ToolError(f"{new.text} was written, but {e}") from e
    return f"Successfully renamed {old.text} to {new.text}"


# ---- the command's fields, as Claude sent them ----------------------------------------------------
# The SDK builds a command from the model's input without validating it (construct_type_unchecked):
# a field may be missing or of another type, and is checked here before any call.


def _text(command: object, name: str) -> str:
    value = getattr(command, name, None)
    if not isinstance(value, str):
        raise ToolError(f"Invalid `{name}` parameter: it must be a string, got {type(value).__name__}")
    return value


def _line(command: object, name: str) -> int:
    value = getattr(command, name, None)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ToolError(f"Invalid `{name}` parameter: it must be an integer, got {value!r}")
    return value


def _range(command: object) -> list[int] | None:
    value = getattr(command, "view_range", None)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise ToolError(f"Invalid `view_range` parameter: {value!r}. It should be a list of two integers.")
    return [int(value[0]), int(value[1])]


def _plan(memory: _Memory, command: object) -> Plan:
    name = getattr(command, "command", None)
    if name == "view":
        return view(memory, parse_path(_text(command, "path")), _range(command))
    if name == "create":
        return create(memory, parse_path(_text(command, "path")), _text(command, "file_text"))
    if name == "str_replace":
        path = parse_path(_text(command, "path"))
        return str_replace(memory, path, _text(command, "old_str"), _text(command, "new_str"))
    if name == "insert":
        path = parse_path(_text(command, "path"))
        return insert(memory, path, _line(command, "insert_line"), _text(command, "insert_text"))
    if name == "delete":
        return delete(memory, parse_path(_text(command, "path")))
    if name == "rename":
        old = parse_path(_text(command, "old_path"), "old_path")
        return rename(memory, old, parse_path(_text(command, "new_path"), "new_path"))
    raise ToolError(f"Unknown memory command {name!r}: use {', '.join(COMMANDS)}")


COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")


def _check_command(command: object) -> None:
    """A command the SDK cannot dispatch answers a text, not a NotImplementedError's repr."""
    name = getattr(command, "command", None)
    if name not in COMMANDS:
        raise ToolError(f"Unknown memory command {name!r}: use {', '.join(COMMANDS)}")


def _refused(error: MnemoError) -> ToolError:
    """An archive's refusal as the text the model reads."""
    return ToolError(f"Error: {error}")


# ---- the tools --------------------------------------------------------------------------------------


def _memory(handle: object, scope: str, admin: bool | None, keep_receipts: int) -> _Memory:
    if admin is None:
        principal = getattr(handle, "principal", None)  # in process; a client's key is opaque
        admin = principal is not None and principal.has(Role.ADMIN)
    return _Memory(scope, admin, deque(maxlen=keep_receipts))


class MnemoMemoryTool(BetaAbstractMemoryTool):
    """The memory tool over a blocking handle (`mnemo.as_(principal)` or `MnemoClient`).

    `scope`: the scope of the files' records. `admin`: whether the handle may delete, which
    rename must know before it writes; None reads it from an in-process handle's principal and
    means False for a client. `receipts`: the deletion receipts of the last `keep_receipts`
    files deleted, newest last."""

    def __init__(
        self,
        handle: Handle,
        *,
        scope: str = DEFAULT_SCOPE,
        admin: bool | None = None,
        keep_receipts: int = 100,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.handle = check_blocking_handle(handle, "MnemoMemoryTool")
        self._memory = _memory(self.handle, scope, admin, keep_receipts)

    @property
    def receipts(self) -> list[DeletionReceipt]:
        return list(self._memory.receipts)

    def execute(self, command: BetaMemoryTool20250818Command) -> str:
        _check_command(command)  # a command the SDK cannot dispatch answers a text
        return cast(str, super().execute(command))  # the SDK's dispatch, to the methods below

    def _run(self, command: object) -> str:
        try:
            return run_plan(self.handle, _plan(self._memory, command))
        except MnemoError as e:
            raise _refused(e) from e

    # The SDK dispatches each command to its method; `_plan` picks the command by its name, so one
    # method serves all six.
    view = create = str_replace = insert = delete = rename = _run


class AsyncMnemoMemoryTool(BetaAsyncAbstractMemoryTool):
    """The memory tool over an awaited handle (`AsyncMnemo` or `AsyncMnemoClient`), for the
    SDK's async tool runner; the same commands, texts and parameters as `MnemoMemoryTool`."""

    def __init__(
        self,
        handle: AsyncHandle,
        *,
        scope: str = DEFAULT_SCOPE,
        admin: bool | None = None,
        keep_receipts: int = 100,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        checked = check_handle(handle, "AsyncMnemoMemoryTool")
        if not is_async_handle(checked):
            raise TypeError(
                "AsyncMnemoMemoryTool needs an awaited handle (AsyncMnemo or AsyncMnemoClient), got "
                f"{type(checked).__name__}: use MnemoMemoryTool for a blocking one"
            )
        self.handle: AsyncHandle = checked  # type: ignore[assignment]
        self._memory = _memory(self.handle, scope, admin, keep_receipts)

    @property
    def receipts(self) -> list[DeletionReceipt]:
        return list(self._memory.receipts)

    async def execute(self, command: BetaMemoryTool20250818Command) -> str:
        _check_command(command)
        return cast(str, await super().execute(command))

    async def _run(self, command: object) -> str:
        try:
            return await arun_plan(self.handle, _plan(self._memory, command))
        except MnemoError as e:
            raise _refused(e) from e

    view = create = str_replace = insert = delete = rename = _run


__all__ = [
    "DEFAULT_SCOPE",
    "SOURCE",
    "AsyncMnemoMemoryTool",
    "MemoryPath",
    "MnemoMemoryTool",
    "parse_path",
]
