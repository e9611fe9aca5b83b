"""User files to `EvidenceInput` items, for `mnemo-sea ingest`.

What is read:

- `.txt` and `.md`: one document per file. The body is the file's text, verbatim (UTF-8; a
  leading byte-order mark is dropped). The evidence id is derived from the path relative to
  the loaded folder (`doc:guides/intake.md`; names with characters an id may not hold become a
  slug plus a hash of the path), so loading the same tree twice gives the same ids and an
  edited file becomes a new version of its record. The locator is that relative path, the
  source is `source` or else the relative path.
- `.jsonl`: one document per line, a JSON object with `body` (required) and optionally
  `evidence_id, source, scope, locator, statement, media_type, observed_at, valid_from,
  valid_until, sensitivity, provenance, kind, owner` (date-times ISO-8601 with a time zone).
  Other keys are an error, so a misspelt `valid_untill` is never silently dropped. A line
  without `evidence_id` gets `doc:<relative path>#<line>`. Blank lines are skipped.
- a directory: every `.txt`, `.md` and `.jsonl` file below it, recursively, in sorted order of
  relative path; names starting with a dot are skipped, files of other types are listed in
  `LoadedDocuments.skipped`.

Versions: documents come back in load order (files sorted, lines in file order). Stored in that
order with `Archive.put_evidence`, a repeated `evidence_id` becomes the next version of its
record and supersedes the one before.

Errors are InvalidInput subclasses that name the file (the CLI prints their message as one line):
`MissingPath`, `UnsupportedFile` (a single file of another type), `FileTooLarge` (also a
`ContentTooLarge`), `BinaryFile` (NUL bytes, or text that is not UTF-8), `UnreadableFile`, and
`MalformedDocuments`, which lists every problem of the whole load at once: each unusable file
(binary, too large, unreadable), each malformed JSONL line (with its number and the problem) and
each empty document. Without `partial` nothing is returned when anything is wrong: every file is
read first and all problems raise together as `MalformedDocuments`, except that a load whose
only problem is one unusable file raises that file's own error (`BinaryFile`, `FileTooLarge`,
...). With `partial=True` the good documents come back and every problem is listed in
`LoadedDocuments.problems`; only a missing path or an unsupported single file still raises.

`media_type_of(name, data)` names the media type of a file's bytes for `session record --file`:
UTF-8 text is text (its type from the extension when that names a text type, else
`text/plain`, with `charset=utf-8`), anything else keeps its extension's type (a `.txt` in
Latin-1 is `text/plain`, without a charset) or `application/octet-stream`. Ingest, unlike
`session record`, refuses text that is not UTF-8 (`BinaryFile`): a document's body is text
to search and cite, while a recorded original is bytes kept exactly.
"""

from __future__ import annotations

import functools
import hashlib
import json
import mimetypes
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from mnemo_sea.archive import ContentTooLarge, EvidenceInput, InvalidInput, Sensitivity, limits
from mnemo_sea.archive.features.evidence import STATEMENT_LIMIT
from mnemo_sea.archive.rules.checks import check_label, check_media_type
from mnemo_sea.archive.rules.principal import check_identifier
from mnemo_sea.archive.rules.records import EVIDENCE_KINDS, PROVENANCES, Provenance
from mnemo_sea.archive.rules.refs import EVIDENCE_ID, check_evidence_id
from mnemo_sea.archive.rules.tool_results import is_textual
from mnemo_sea.errors import Category
from mnemo_sea.system.ingest_progress import IngestProgress, ProgressCallback
from mnemo_sea.system.json_text import JsonTooDeep, parse_json

__all__ = [
    "EXTENSIONS",
    "MAX_FILE_BYTES",
    "BinaryFile",
    "DocumentError",
    "DocumentProblem",
    "FileTooLarge",
    "LoadedDocument",
    "LoadedDocuments",
    "MalformedDocuments",
    "MissingPath",
    "UnreadableFile",
    "UnsupportedFile",
    "document_id",
    "load_documents",
    "media_type_of",
    "parse_jsonl",
]

MAX_FILE_BYTES = 16 * 1024 * 1024
EXTENSIONS = (".jsonl", ".md", ".txt")
MEDIA_TYPES = {".md": "text/markdown; charset=utf-8", ".txt": "text/plain; charset=utf-8"}
JSONL_FIELDS = (
    "evidence_id",
    "source",
    "scope",
    "locator",
    "statement",
    "body",
    "media_type",
    "observed_at",
    "valid_from",
    "valid_until",
    "sensitivity",
    "provenance",
    "kind",
    "owner",
)
# The archive's limits for these columns (archive/features/evidence.py), checked here so that a bad line
# is reported with its line number instead of failing later, one record at a time.
_TEXT_LIMITS = {
    "source": limits.SOURCE_CHARS,
    "scope": limits.SCOPE_CHARS,
    "locator": limits.LOCATOR_CHARS,
    "statement": STATEMENT_LIMIT,
}
_BOM = b"\xef\xbb\xbf"
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]+")
_MAX_SHOWN_PROBLEMS = 20


# ---- errors ---------------------------------------------------------------------------------------


class DocumentError(InvalidInput):
    """A file or path given to the loader cannot be used. `path` names it."""

    code = "invalid_document"

    def __init__(self, path: str, problem: str, **detail: Any) -> None:
        super().__init__("path", f"{path}: {problem}", path=path, **detail)
        self.path = path


class MissingPath(DocumentError):
    code = "path_not_found"

    def __init__(self, path: str) -> None:
        super().__init__(path, "no such file or directory")


class UnsupportedFile(DocumentError):
    code = "unsupported_file"

    def __init__(self, path: str) -> None:
        super().__init__(path, f"not a supported document type (expected one of {', '.join(EXTENSIONS)})")


class UnreadableFile(DocumentError):
    code = "unreadable_file"


class BinaryFile(DocumentError):
    """The file is not text: it holds NUL bytes, or bytes that are not UTF-8."""

    code = "binary_file"


class FileTooLarge(ContentTooLarge, DocumentError):
    """A file is larger than `max_file_bytes`; nothing of it was read."""

    # Its parents differ (too large, invalid input): the size decides, as for any ContentTooLarge.
    category = Category.TOO_LARGE

    def __init__(self, path: str, size: int, limit: int) -> None:
        InvalidInput.__init__(
            self,
            "path",
            f"{path}: {size} bytes exceeds the limit of {limit} bytes",
            path=path,
            size=size,
            limit=limit,
        )
        self.path = path
        self.size = size
        self.limit = limit


@dataclass(frozen=True)
class DocumentProblem:
    """What is wrong with one file (`line` None) or one JSONL line."""

    path: str
    line: int | None
    problem: str
    code: str = "malformed"  # malformed | empty | binary_file | content_too_large | unreadable_file

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path} line {self.line}"
        return f"{where}: {self.problem}"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "problem": self.problem, "code": self.code}


class MalformedDocuments(DocumentError):
    """Some documents are malformed. `problems` names each; `documents` holds the good ones."""

    code = "malformed_documents"

    def __init__(self, problems: Sequence[DocumentProblem], documents: Sequence[LoadedDocument]) -> None:
        shown = "; ".join(str(p) for p in problems[:_MAX_SHOWN_PROBLEMS])
        if len(problems) > _MAX_SHOWN_PROBLEMS:
            shown += f"; and {len(problems) - _MAX_SHOWN_PROBLEMS} more"
        paths = sorted({p.path for p in problems})
        InvalidInput.__init__(
            self,
            "path",
            f"{len(problems)} bad file(s) or document(s), nothing loaded (use partial loading to "
            f"keep the good ones): {shown}",
            path=paths[0] if len(paths) == 1 else None,
            problems=[p.to_dict() for p in problems],
        )
        self.path = ", ".join(paths)
        self.problems = tuple(problems)
        self.documents = tuple(documents)


# ---- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedDocument:
    """One document and where it came from (`line` is set for JSONL lines)."""

    item: EvidenceInput
    path: str
    line: int | None = None


@dataclass(frozen=True)
class LoadedDocuments:
    """The documents of one load, in store order, with the problems a partial load skipped."""

    root: str
    documents: tuple[LoadedDocument, ...]
    problems: tuple[DocumentProblem, ...] = ()
    files: tuple[str, ...] = ()  # every file read, relative to the root
    skipped: tuple[str, ...] = ()  # files in a directory with other extensions

    @property
    def items(self) -> list[EvidenceInput]:
        return [d.item for d in self.documents]

    def __len__(self) -> int:
        return len(self.documents)


# ---- ids ------------------------------------------------------------------------------------------


def document_id(relative: str, prefix: str = "doc") -> str:
    """The evidence id of a file at `relative` (a POSIX path): `doc:<path>` when that is a valid id
    made of letters, digits and `._/-`; else a slug of the path plus 10 hex digits of its sha256,
    so different paths never share an id."""
    candidate = f"{prefix}:{relative}"
    if _SLUG_UNSAFE.search(relative) is None and EVIDENCE_ID.fullmatch(candidate):
        return candidate
    digest = hashlib.sha256(relative.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    slug = _SLUG_UNSAFE.sub("-", relative).strip("-")[:200] or "file"
    return check_evidence_id(f"{prefix}:{slug}@{digest}")


# ---- reading --------------------------------------------------------------------------------------


def _read_capped(file: Path, shown: str, limit: int) -> bytes:
    try:
        size = file.stat().st_size
        if size > limit:
            raise FileTooLarge(shown, size, limit)
        with file.open("rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise MissingPath(shown) from None
    except PermissionError:
        raise UnreadableFile(shown, "permission denied") from None
    except IsADirectoryError:
        raise UnreadableFile(shown, "is a directory") from None
    except OSError as e:
        raise UnreadableFile(shown, e.strerror or str(e)) from None
    if len(data) > limit:  # it grew after stat
        raise FileTooLarge(shown, len(data), limit)
    return data


def _text(data: bytes, shown: str) -> str:
    nul = data.find(b"\x00")
    if nul != -1:
        raise BinaryFile(shown, f"holds a NUL byte at offset {nul}: not a text file")
    try:
        return data.removeprefix(_BOM).decode("utf-8")
    except UnicodeDecodeError as e:
        raise BinaryFile(shown, f"is not UTF-8 text (invalid byte at offset {e.start})") from None


class _Empty(Exception):
    """A text document with nothing but whitespace: reported as a problem, not stored."""


def _text_document(
    data: bytes,
    shown: str,
    relative: str,
    suffix: str,
    *,
    source: str | None,
    scope: str,
    evidence_id: str | None,
) -> LoadedDocument:
    body = _text(data, shown)
    if not body.strip():
        raise _Empty
    item = EvidenceInput(
        body=body,
        source=source or relative,
        evidence_id=evidence_id or document_id(relative),
        scope=scope,
        locator=relative,
        media_type=MEDIA_TYPES[suffix],
    )
    return LoadedDocument(item, shown)


# ---- JSONL ----------------------------------------------------------------------------------------


def _datetime(obj: dict[str, Any], name: str, problems: list[str]) -> datetime | None:
    raw = obj.get(name)
    if raw is None:
        return None
    if not isinstance(raw, str):
        problems.append(f"{name!r} must be an ISO-8601 string with a time zone, got {type(raw).__name__}")
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        problems.append(f"{name!r} {raw!r} is not an ISO-8601 date-time")
        return None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        problems.append(f"{name!r} {raw!r} has no time zone (add Z or +08:00)")
        return None
    return parsed


def _string(obj: dict[str, Any], name: str, problems: list[str], *, required: bool = False) -> str | None:
    raw = obj.get(name)
    if raw is None:
        if required:
            problems.append(f"{name!r} is required")
        return None
    if not isinstance(raw, str):
        problems.append(f"{name!r} must be a string, got {type(raw).__name__}")
        return None
    if "\x00" in raw:
        problems.append(f"{name!r} must not contain NUL")
        return None
    limit = _TEXT_LIMITS.get(name)
    if limit is not None and len(raw) > limit:
        problems.append(f"{name!r} is {len(raw)} characters; the limit is {limit}")
        return None
    return raw


def _checked(problems: list[str], check: Callable[[], Any]) -> Any:
    try:
        return check()
    except InvalidInput as e:
        problems.append(f"{e.field!r} {e.problem}")
        return None


def _jsonl_line(
    raw: bytes, number: int, relative: str, *, source: str | None, scope: str
) -> tuple[EvidenceInput | None, list[str]]:
    """One line as an EvidenceInput, or None with every problem found in it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, [f"not UTF-8 (invalid byte at column {e.start + 1})"]
    try:
        obj = parse_json(text, f"line {number}")
    except json.JSONDecodeError as e:
        return None, [f"not JSON ({e.msg} at column {e.colno})"]
    except JsonTooDeep as e:
        return None, [e.problem]
    if not isinstance(obj, dict):
        return None, [f"must be a JSON object, got {type(obj).__name__}"]

    problems: list[str] = []
    unknown = sorted(k for k in obj if k not in JSONL_FIELDS)
    if unknown:
        problems.append(
            f"unknown field(s) {', '.join(map(repr, unknown))}; expected {', '.join(JSONL_FIELDS)}"
        )
    body = _string(obj, "body", problems, required=True)
    if body is not None and not body.strip():
        problems.append("'body' must not be empty")
    evidence_id = _string(obj, "evidence_id", problems)
    if evidence_id is not None:
        _checked(problems, lambda: check_evidence_id(evidence_id))
    texts = {name: _string(obj, name, problems) for name in ("source", "scope", "locator", "statement")}
    for name in ("source", "scope", "statement"):
        value = texts[name]
        if value is not None and not value.strip():
            problems.append(f"{name!r} must not be empty")
    for name in ("source", "scope"):
        label = texts[name]
        if label is not None:
            _checked(problems, functools.partial(check_label, name, label))
    media_type = _string(obj, "media_type", problems)
    if media_type is not None:
        _checked(problems, lambda: check_media_type(media_type))
    sensitivity = obj.get("sensitivity", Sensitivity.INTERNAL)
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, str | int):
        problems.append(f"'sensitivity' must be a name or a number, got {type(sensitivity).__name__}")
    else:
        sensitivity = _checked(problems, lambda: Sensitivity.parse(sensitivity))
    provenance = _string(obj, "provenance", problems) or "document"
    if provenance not in PROVENANCES:
        problems.append(f"'provenance' {provenance!r} is not one of {', '.join(PROVENANCES)}")
    kind = _string(obj, "kind", problems) or "knowledge"
    if kind not in EVIDENCE_KINDS:
        problems.append(f"'kind' {kind!r} is not one of {', '.join(EVIDENCE_KINDS)}")
    owner = _string(obj, "owner", problems)
    if owner is not None:
        _checked(problems, lambda: check_identifier("owner", owner))
    observed_at = _datetime(obj, "observed_at", problems)
    valid_from = _datetime(obj, "valid_from", problems)
    valid_until = _datetime(obj, "valid_until", problems)
    if valid_from is not None and valid_until is not None and valid_until <= valid_from:
        problems.append("'valid_until' must be later than 'valid_from'")
    if problems or body is None:
        return None, problems
    return (
        EvidenceInput(
            body=body,
            source=texts["source"] or source or relative,
            evidence_id=evidence_id or f"{document_id(relative)}#{number}",
            scope=texts["scope"] or scope,
            locator=relative if texts["locator"] is None else texts["locator"],
            statement=texts["statement"],
            media_type=media_type,
            observed_at=observed_at,
            valid_from=valid_from,
            valid_until=valid_until,
            sensitivity=sensitivity,
            provenance=cast(Provenance, provenance),  # checked above: problems returned early
            kind=kind,
            owner=owner,
        ),
        [],
    )


def parse_jsonl(
    data: bytes, shown: str, relative: str, *, source: str | None = None, scope: str = "default"
) -> tuple[list[LoadedDocument], list[DocumentProblem]]:
    """The documents of a JSONL file's bytes and the problems of its bad lines (never raises for a
    line). `shown` names the file in problems; `relative` derives default ids, locators, sources.
    Raises BinaryFile when the bytes hold a NUL (a JSON text never does)."""
    nul = data.find(b"\x00")
    if nul != -1:
        raise BinaryFile(shown, f"holds a NUL byte at offset {nul}: not a JSONL text file")
    documents: list[LoadedDocument] = []
    problems: list[DocumentProblem] = []
    for number, line in enumerate(data.removeprefix(_BOM).split(b"\n"), start=1):
        raw = line.removesuffix(b"\r")
        if not raw.strip():
            continue
        item, found = _jsonl_line(raw, number, relative, source=source, scope=scope)
        if item is None:
            problems.append(DocumentProblem(shown, number, "; ".join(found)))
        else:
            documents.append(LoadedDocument(item, shown, number))
    return documents, problems


# ---- the walk -------------------------------------------------------------------------------------


def _walk(root: Path) -> Iterator[tuple[Path, str]]:
    """Every regular file below `root` with its POSIX relative path, hidden names skipped."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.startswith("."):
                continue
            file = Path(dirpath) / name
            if file.is_file():
                yield file, file.relative_to(root).as_posix()


def _check_option(name: str, value: object, limit: int) -> None:
    """A --source or --scope: a non-empty label (check_label) within the archive's limit."""
    if not isinstance(value, str) or not value.strip() or "\x00" in value or len(value) > limit:
        raise InvalidInput(name, f"must be a non-empty string of at most {limit} characters, got {value!r}")
    check_label(name, value)


class _BadPath(Exception):
    """A file whose path cannot name its records: reported per file like a bad line."""


def _check_path(relative: str, source: str | None) -> None:
    """Raise _BadPath unless `relative` can be its records' locator, and their source unless
    `source` is given (the archive would refuse them at the store, after earlier batches)."""
    limit = _TEXT_LIMITS["locator"]
    if len(relative) > limit:
        raise _BadPath(f"its path is {len(relative)} characters; a locator holds at most {limit}")
    if source is None:
        try:
            check_label("source", relative)
        except InvalidInput as e:
            raise _BadPath(f"its path cannot be a source ({e.problem}): give --source") from None


def load_documents(
    path: Path,
    *,
    source: str | None = None,
    scope: str = "default",
    partial: bool = False,
    max_file_bytes: int = MAX_FILE_BYTES,
    evidence_id: str | None = None,
    progress: ProgressCallback | None = None,
) -> LoadedDocuments:
    """Load a `.txt`, `.md` or `.jsonl` file, or a directory of them, as evidence inputs.

    `source` and `scope` apply where a document does not give its own; `evidence_id` names the
    record of a single `.txt`/`.md` file (instead of the id derived from its path). See the
    module docstring for the formats, the order and the errors. Reads only; stores nothing.
    `progress` sees the files to read as soon as they are listed, then each file read
    (`IngestProgress`'s reading events).
    """
    if source is not None:
        _check_option("source", source, _TEXT_LIMITS["source"])
    _check_option("scope", scope, _TEXT_LIMITS["scope"])
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes <= 0:
        raise InvalidInput("max_file_bytes", f"must be a positive integer, got {max_file_bytes!r}")
    path = Path(path)
    shown_root = str(path)
    if not path.exists():
        raise MissingPath(shown_root)

    skipped: list[str] = []
    if path.is_dir():
        if evidence_id is not None:
            raise InvalidInput("evidence_id", "can only be given for a single .txt or .md file")
        files: list[tuple[Path, str]] = []
        for file, relative in sorted(_walk(path), key=lambda f: f[1]):
            if file.suffix.lower() in EXTENSIONS:
                files.append((file, relative))
            else:
                skipped.append(relative)
    elif path.suffix.lower() in EXTENSIONS:
        if evidence_id is not None and path.suffix.lower() == ".jsonl":
            raise InvalidInput("evidence_id", "can only be given for a single .txt or .md file")
        if evidence_id is not None:
            check_evidence_id(evidence_id)
        files = [(path, path.name)]
    else:
        raise UnsupportedFile(shown_root)

    documents: list[LoadedDocument] = []
    problems: list[DocumentProblem] = []
    unusable: list[DocumentError] = []
    if progress is not None:
        progress(IngestProgress(0, 0, 0, 0, files=len(files)))
    for read, (file, relative) in enumerate(files, start=1):
        shown = str(file)
        suffix = file.suffix.lower()
        try:
            _check_path(relative, source)
            data = _read_capped(file, shown, max_file_bytes)
            if suffix == ".jsonl":
                found, bad = parse_jsonl(data, shown, relative, source=source, scope=scope)
                documents.extend(found)
                problems.extend(bad)
            else:
                documents.append(
                    _text_document(
                        data, shown, relative, suffix, source=source, scope=scope, evidence_id=evidence_id
                    )
                )
        except _Empty:
            problems.append(DocumentProblem(shown, None, "is empty (no text to store)", "empty"))
        except _BadPath as e:
            problems.append(DocumentProblem(shown, None, str(e)))
        except (BinaryFile, FileTooLarge, UnreadableFile, MissingPath) as e:
            # Kept, not raised: a refused load names every bad file at once, not the first.
            problem = e.message.removeprefix(f"path: {shown}: ")
            problems.append(DocumentProblem(shown, None, problem, e.code))
            unusable.append(e)
        if progress is not None:
            progress(IngestProgress(len(documents), 0, 0, 0, files=len(files), files_read=read))
    if problems and not partial:
        if len(problems) == 1 and len(unusable) == 1:
            raise unusable[0]  # one bad file and nothing else: its own, more specific error
        raise MalformedDocuments(problems, documents)
    return LoadedDocuments(
        root=shown_root,
        documents=tuple(documents),
        problems=tuple(problems),
        files=tuple(relative for _, relative in files),
        skipped=tuple(skipped),
    )


# ---- media types of single files ------------------------------------------------------------------

_BINARY_MEDIA_TYPE = "application/octet-stream"


def media_type_of(name: str, data: bytes) -> str:
    """The media type to record a file's bytes under, from its name and content.

    Bytes that are UTF-8 without NUL are text: the extension's type when it names a text type
    (`.json` -> application/json, `.md` -> text/markdown), else `text/plain`, with
    `charset=utf-8` so that every surface decodes them alike. Other bytes keep their
    extension's type (`.png` -> image/png, a Latin-1 `.txt` -> text/plain) or are
    `application/octet-stream`. A text type is given no charset then: which one it is, the
    file does not say, and no surface decodes it as UTF-8 (they show such an original as
    binary, and return its bytes as base64). A text extension does not make bytes holding NUL
    text: a NUL marks a binary file, as ingest takes it.
    """
    guessed, encoding = mimetypes.guess_type(name, strict=False)
    if encoding is not None:  # .gz, .bz2: compressed bytes, whatever the inner type
        guessed = {"gzip": "application/gzip", "bzip2": "application/x-bzip2"}.get(encoding)
    if b"\x00" not in data:
        try:
            data.removeprefix(_BOM).decode("utf-8")
        except UnicodeDecodeError:
            if guessed is not None:  # text in another encoding (or a binary type): its own type
                return guessed
        else:
            essence = guessed if guessed is not None and is_textual(guessed) else "text/plain"
            return f"{essence}; charset=utf-8"
    if guessed is not None and not is_textual(guessed):
        return guessed
    return _BINARY_MEDIA_TYPE
