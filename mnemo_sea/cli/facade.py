"""CLI commands over the `Mnemo` facade: init, ingest, search, session, evidence, summary, memory,
delete, verify-deleted, fsck, audit verify/anchor and eval citations. `register(app, eval_app)` adds
them to `mnemo-sea` (with `session context` and `session task-state`, from mnemo_sea.cli.context).

Every command works on one data folder (`--data-dir`, env MNEMO_DATA_DIR) as one principal
(`--tenant/--subject/--role/--clearance`, env MNEMO_TENANT/MNEMO_SUBJECT/MNEMO_ROLE/MNEMO_CLEARANCE;
defaults: tenant `default`, subject `cli`, role `agent`, clearance `internal`). Only `init` creates a
folder; the others refuse a folder that holds no archive.

`--embedder default|hashing` (env MNEMO_EMBEDDER) picks the dense model: `default` is
all-MiniLM-L6-v2, `hashing` the deterministic word-hashing embedder of
mnemo_sea.system.hashing_embedder, meant for tests and offline smoke runs only. Without the option an
existing folder keeps the embedder its index was built with (a new one gets `default`); asking
for the other one is refused, since the stored vectors would not match.

Reports go to stdout (JSON with `--json`), progress bars to stderr (only on a terminal). Every
user mistake and every typed error prints one line `error: ...` on stderr, never a traceback;
with `--json` it is also printed on stdout as `{"error": {"code", "message", "exit_code",
"detail"}}` (`code` is the typed error's stable code, `detail` its structured fields, e.g. the
`targets` of a rejected batch). The exit code (`exit_code_of`, the one policy, as REST's status
table in mnemo_sea.rest.problems):

    1  a check ran and found problems (fsck, verify-deleted), or an unexpected error
    2  usage or input: bad option, missing/malformed/binary/oversize file, missing data folder,
       an index built with another embedder, a rejected batch (nothing archived; REST 422), a
       deletion receipt or audit anchor this deployment did not issue or whose audit event the
       chain no longer holds (ReceiptInvalid, code `receipt_invalid`; REST 422)
    3  not found (including records of other tenants)
    4  forbidden: role or clearance
    5  conflict: state conflict (every target already archived, nothing to retract), reused
       idempotency key (REST 409)
    6  store unavailable: archive unreachable, index locked by another process (named), index down
    7  integrity: corrupt archive file, an original failing its hash, a broken audit chain or
       one `audit verify --anchor` finds rewound or rewritten

Set MNEMO_DEBUG=1 to get the traceback of an unexpected error instead of its one line.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer._click.core import Command, Context  # typer vendors click: these, not `click`'s
from typer._click.exceptions import UsageError
from typer.core import TyperCommand, TyperGroup

from mnemo_sea.archive import (
    ArchiveError,
    AuditAnchor,
    BatchRejected,
    DeletionReceipt,
    EvidenceInput,
    Forbidden,
    IntegrityError,
    InvalidInput,
    NotFound,
    Principal,
    ReceiptInvalid,
    Role,
    Sensitivity,
    StateConflict,
    StoreUnavailable,
)
from mnemo_sea.system.json_ready import plain

if TYPE_CHECKING:
    from mnemo_sea.archive import Archive
    from mnemo_sea.retrieval import Embedder
    from mnemo_sea.retrieval.errors import RetrievalError
    from mnemo_sea.system.mnemo import IngestProgress, Mnemo

EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_FORBIDDEN = 4
EXIT_CONFLICT = 5
EXIT_UNAVAILABLE = 6
EXIT_INTEGRITY = 7

# The same names as mnemo_sea.system.mnemo (imported lazily: loading the index stack takes ~1.5 s,
# and errors that need no archive should not pay for it).
ARCHIVE_FILE = "archive.db"
INDEX_DIR = "index"
_SQLITE_HEADER = b"SQLite format 3\x00"
EMBEDDERS = ("default", "hashing")


# ---- errors --------------------------------------------------------------------------------------


_EXIT_NAMES = {
    EXIT_PROBLEMS: "problems",
    EXIT_USAGE: "invalid_input",
    EXIT_NOT_FOUND: "not_found",
    EXIT_FORBIDDEN: "forbidden",
    EXIT_CONFLICT: "conflict",
    EXIT_UNAVAILABLE: "unavailable",
    EXIT_INTEGRITY: "integrity",
}


class CliError(Exception):
    """A failure the CLI reports as one line and an exit code (and, with --json, as JSON).

    `code` defaults to the exit code's name (`invalid_input`, `not_found`, ...); `detail` is
    structured data for programs (printed only with --json). `reported`: the command already
    printed its report (which says what failed) on stdout, so --json adds no second document
    there and a program reads exactly one JSON value.
    """

    def __init__(
        self,
        message: str,
        exit_code: int = EXIT_USAGE,
        *,
        code: str | None = None,
        detail: dict[str, Any] | None = None,
        reported: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.code = code or _EXIT_NAMES.get(exit_code, "error")
        self.detail = detail or {}
        self.reported = reported


def _retrieval_errors() -> Any:
    """mnemo_sea.retrieval.errors if it is loaded, else None.

    Importing it loads the whole retrieval package (~1.5 s), which commands that fail early or
    never touch the index should not pay; and if it is not loaded, no error can come from it.
    """
    return sys.modules.get("mnemo_sea.retrieval.errors")


# The exit-code policy, most specific first, as REST's status table (mnemo_sea.rest.problems):
# a rejected batch is invalid input (422 there), unless every target was already archived
# (ArchiveConflict, also a StateConflict: 409 there, a conflict here). A receipt or anchor that
# does not check out (ReceiptInvalid, an IntegrityError) is input this deployment cannot accept
# (422 there, 2 here), not a fault of its stores: before IntegrityError.
_ARCHIVE_EXITS: tuple[tuple[type[ArchiveError], int], ...] = (
    (StateConflict, EXIT_CONFLICT),
    (BatchRejected, EXIT_USAGE),
    (InvalidInput, EXIT_USAGE),
    (NotFound, EXIT_NOT_FOUND),
    (Forbidden, EXIT_FORBIDDEN),
    (ReceiptInvalid, EXIT_USAGE),
    (IntegrityError, EXIT_INTEGRITY),
    (StoreUnavailable, EXIT_UNAVAILABLE),
)
# By name: the retrieval layer is imported only by commands that open the index.
_RETRIEVAL_EXITS: tuple[tuple[str, int], ...] = (
    ("InvalidQuery", EXIT_USAGE),
    ("InvalidDocument", EXIT_USAGE),
    ("IndexConfigMismatch", EXIT_USAGE),
    ("IndexLocked", EXIT_UNAVAILABLE),
    ("IndexUnavailable", EXIT_UNAVAILABLE),
)


def exit_code_of(exc: BaseException) -> int:
    """The exit code of any error a command can meet (the one place that decides it)."""
    if isinstance(exc, CliError):
        return exc.exit_code
    errors = _retrieval_errors()
    if errors is not None and isinstance(exc, errors.RetrievalError):
        for name, code in _RETRIEVAL_EXITS:
            if isinstance(exc, getattr(errors, name)):
                return code
        return EXIT_PROBLEMS
    if isinstance(exc, StoreUnavailable):
        # SQLite says so when the file is not (any more) a database: that is corruption, not an outage.
        corrupt = "not a database" in exc.message or "malformed" in exc.message
        return EXIT_INTEGRITY if corrupt else EXIT_UNAVAILABLE
    if isinstance(exc, ArchiveError):
        return next((code for kind, code in _ARCHIVE_EXITS if isinstance(exc, kind)), EXIT_PROBLEMS)
    if isinstance(exc, OSError):
        return EXIT_UNAVAILABLE
    return EXIT_PROBLEMS


def _message(exc: ArchiveError | RetrievalError) -> str:
    errors = _retrieval_errors()
    if errors is not None and isinstance(exc, errors.IndexConfigMismatch) and exc.field == "model_id":
        choice = "hashing" if exc.stored == _hashing_model_id() else "default"
        return f"{exc.message} (this folder needs --embedder {choice})"
    return exc.message


def as_cli_error(exc: Exception) -> CliError:
    """Any error as the CliError the CLI reports: its message, exit code, stable code, detail."""
    if isinstance(exc, CliError):
        return exc
    errors = _retrieval_errors()
    typed = isinstance(exc, ArchiveError) or (errors is not None and isinstance(exc, errors.RetrievalError))
    if typed:
        typed_exc: Any = exc
        return CliError(
            _message(typed_exc), exit_code_of(exc), code=typed_exc.code, detail=dict(typed_exc.detail)
        )
    if isinstance(exc, OSError):
        return CliError(f"{exc.filename or 'file'}: {exc.strerror or exc}", EXIT_UNAVAILABLE, code="os_error")
    return CliError(
        f"unexpected {type(exc).__name__}: {exc} (set MNEMO_DEBUG=1 for the traceback)",
        EXIT_PROBLEMS,
        code="unexpected",
    )


def _fail(error: CliError, as_json: bool = False) -> NoReturn:
    message = " ".join(error.message.split())
    if as_json and not error.reported:
        body = {"code": error.code, "message": message, "exit_code": error.exit_code, "detail": error.detail}
        typer.echo(json.dumps({"error": plain(body)}, ensure_ascii=False, indent=2, default=str))
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=error.exit_code)


@contextlib.contextmanager
def guard(as_json: bool = False) -> Iterator[None]:
    """Turn every failure into one `error:` line (and with `as_json` a JSON error on stdout)
    and its exit code."""
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as e:
        typed = isinstance(e, CliError | ArchiveError | OSError)
        errors = _retrieval_errors()
        typed = typed or (errors is not None and isinstance(e, errors.RetrievalError))
        if not typed and os.environ.get("MNEMO_DEBUG") == "1":
            raise
        _fail(as_cli_error(e), as_json)


class _Command(TyperCommand):
    """Usage mistakes (missing argument, bad option value) as one `error:` line, exit 2."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        as_json = "--json" in args  # before parsing, which consumes the list
        try:
            return super().parse_args(ctx, args)
        except UsageError as e:
            _fail(CliError(e.format_message(), EXIT_USAGE, code="usage"), as_json)


class _Group(TyperGroup):
    """An unknown subcommand as one `error:` line, exit 2."""

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        as_json = "--json" in args
        try:
            return super().resolve_command(ctx, args)
        except UsageError as e:
            _fail(CliError(e.format_message(), EXIT_USAGE, code="usage"), as_json)


# ---- the data folder and the principal -----------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a command works and who it acts as (the options every command shares)."""

    data_dir: Path | None
    tenant: str
    subject: str
    role: str
    clearance: str
    embedder: str | None

    def principal(self) -> Principal:
        try:
            role = Role(self.role.strip().lower())
        except ValueError:
            raise CliError(f"--role: {self.role!r} is not one of reader, agent, admin") from None
        return Principal(self.tenant, self.subject, frozenset({role}), Sensitivity.parse(self.clearance))

    def folder(self, *, must_exist: bool = True) -> Path:
        if self.data_dir is None:
            raise CliError("no data folder: pass --data-dir DIR or set MNEMO_DATA_DIR")
        folder = self.data_dir
        archive = folder / ARCHIVE_FILE
        if must_exist and not archive.is_file():
            raise CliError(
                f"no mnemo data folder at {folder} (no {ARCHIVE_FILE}); "
                f"create it with: mnemo-sea init --data-dir {folder}"
            )
        if folder.exists() and not folder.is_dir():
            raise CliError(f"--data-dir {folder} is not a directory")
        _check_sqlite_file(archive)
        return folder


_PANEL = "Data folder and principal"
_COMMON: tuple[tuple[str, Any, Any], ...] = (
    (
        "data_dir",
        Annotated[
            Path | None,
            typer.Option(
                "--data-dir", envvar="MNEMO_DATA_DIR", help="the data folder", rich_help_panel=_PANEL
            ),
        ],
        None,
    ),
    (
        "tenant",
        Annotated[
            str, typer.Option(envvar="MNEMO_TENANT", help="act in this tenant", rich_help_panel=_PANEL)
        ],
        "default",
    ),
    (
        "subject",
        Annotated[
            str, typer.Option(envvar="MNEMO_SUBJECT", help="act as this user/agent", rich_help_panel=_PANEL)
        ],
        "cli",
    ),
    (
        "role",
        Annotated[
            str, typer.Option(envvar="MNEMO_ROLE", help="reader | agent | admin", rich_help_panel=_PANEL)
        ],
        "agent",
    ),
    (
        "clearance",
        Annotated[
            str,
            typer.Option(
                envvar="MNEMO_CLEARANCE",
                help="public | internal | confidential | restricted",
                rich_help_panel=_PANEL,
            ),
        ],
        "internal",
    ),
    (
        "embedder",
        Annotated[
            str | None,
            typer.Option(
                envvar="MNEMO_EMBEDDER",
                help="default (all-MiniLM-L6-v2) | hashing (tests/offline smoke only); "
                "default: what the folder's index was built with",
                rich_help_panel=_PANEL,
            ),
        ],
        None,
    ),
)


def _command(fn: Callable[..., None]) -> Callable[..., None]:
    """Give `fn(target, ...)` the shared options (as a `Target`) and the one-line error handling."""
    hints = typing.get_type_hints(fn, include_extras=True)
    own = [
        p.replace(annotation=hints[p.name])
        for p in inspect.signature(fn).parameters.values()
        if p.name != "target"
    ]
    shared = [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a) for n, a, d in _COMMON
    ]

    @functools.wraps(fn)
    def run(**kwargs: Any) -> None:
        target = Target(**{name: kwargs.pop(name) for name, _, _ in _COMMON})
        with guard(as_json=bool(kwargs.get("as_json", False))):
            fn(target=target, **kwargs)

    params = own + shared
    run.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return run


def _check_sqlite_file(path: Path) -> None:
    """A non-empty archive file that is not SQLite is corrupt: say so before anything opens it."""
    try:
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except FileNotFoundError:
        return
    if header and header != _SQLITE_HEADER:
        raise CliError(
            f"{path} is corrupt: not a SQLite database (restore it from a backup; nothing was changed)",
            EXIT_INTEGRITY,
        )


def _hashing_model_id() -> str:
    from mnemo_sea.system.hashing_embedder import HASHING_MODEL_ID

    return HASHING_MODEL_ID


def _embedder(choice: str | None, folder: Path) -> Embedder | None:
    """The embedder asked for, or the one the folder's index was built with; None = the default."""
    from mnemo_sea.system.hashing_embedder import HashingEmbedder

    return HashingEmbedder() if embedder_choice(choice, folder) == "hashing" else None


def embedder_choice(choice: str | None, folder: Path | None) -> str:
    """`default` or `hashing`: the one asked for, else the one `folder`'s index was built with
    (a new or absent folder gets `default`). CliError for another name."""
    if choice is None and folder is not None:
        from mnemo_sea.retrieval.hybrid_index import IDENTITY_FILE
        from mnemo_sea.retrieval.settings import read_identity

        stored = read_identity(folder / INDEX_DIR / IDENTITY_FILE)
        choice = "hashing" if stored is not None and stored.model_id == _hashing_model_id() else "default"
    choice = (choice or "default").strip().lower()
    if choice not in EMBEDDERS:
        raise CliError(f"--embedder: {choice!r} is not one of {', '.join(EMBEDDERS)}")
    return choice


def _open_mnemo(target: Target, *, create: bool = False) -> Mnemo:
    folder = target.folder(must_exist=not create)  # before the ~1.5 s import: fail fast
    from mnemo_sea.system.mnemo import Mnemo

    return Mnemo.open(folder, embedder=_embedder(target.embedder, folder))


@contextlib.contextmanager
def _open_archive(target: Target) -> Iterator[Archive]:
    """The archive alone, for commands that never touch the index (no lock, no model)."""
    from mnemo_sea.archive import Archive

    archive = Archive.open(str(target.folder() / ARCHIVE_FILE))
    try:
        yield archive
    finally:
        archive.close()


# ---- output --------------------------------------------------------------------------------------


def _emit(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    for key, value in report.items():
        typer.echo(f"{key}: {_shown(value)}")


def _shown(value: Any) -> str:
    """A value for people: nested data as JSON, and no value as `—`, never `None`."""
    if value is None:
        return "—"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


# ---- init, ingest, search ------------------------------------------------------------------------


def init(target: Target, as_json: JsonOpt = False) -> None:
    """Create the data folder (SQLite archive + embedded index), or check an existing one."""
    folder = target.folder(must_exist=False)
    existed = (folder / ARCHIVE_FILE).is_file()
    with _open_mnemo(target, create=True) as mnemo:
        model_id = mnemo.index.embedder.model_id
    _emit(
        {
            "data_dir": str(folder),
            "created": not existed,
            "archive": str(folder / ARCHIVE_FILE),
            "index": str(folder / INDEX_DIR),
            "embedder": model_id,
        },
        as_json,
    )


class _Progress:
    """True progress of an ingest on stderr (only on a terminal): documents stored, documents
    indexed (each with rate and ETA) and chunks embedded (with rate), fed by the callback
    `Mnemo.ingest` calls as the archive commits and the indexer applies each record."""

    def __init__(self, documents: int, quiet: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("{task.description:<9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=quiet or not console.is_terminal,
            transient=False,
        )
        self.stored = self.progress.add_task("stored", total=documents, rate="")
        self.indexed = self.progress.add_task("indexed", total=documents, rate="")
        self.chunks = self.progress.add_task("embedded", total=None, rate="", visible=False)

    def __enter__(self) -> _Progress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def __call__(self, p: IngestProgress) -> None:
        for task, done in ((self.stored, p.stored), (self.indexed, p.indexed)):
            self.progress.update(task, completed=done)
            self.progress.update(task, rate=self._rate(task, "docs"))
        self.progress.update(
            self.chunks,
            completed=p.chunks_embedded,
            visible=p.chunks_embedded > 0,
            description="embedded",
        )
        self.progress.update(self.chunks, rate=self._rate(self.chunks, "chunks"))

    def _rate(self, task_id: Any, unit: str) -> str:
        speed = self.progress.tasks[task_id].speed
        return "" if speed is None else f"{speed:,.1f} {unit}/s"


def _check_may_store(principal: Principal, items: list[EvidenceInput]) -> None:
    """Refuse the whole load up front when the principal may not store some of it.

    The facade stores record by record, so a refusal met half-way would leave half a load.
    """
    principal.require(Role.AGENT, "storing evidence")
    for item in items:
        level = Sensitivity.parse(item.sensitivity)
        if not principal.can_read(level):
            raise Forbidden(
                f"{item.evidence_id or 'a document'} is {level.name.lower()}; storing it needs "
                f"clearance {level.name.lower()}, principal {principal.subject!r} has "
                f"{principal.clearance.name.lower()} (nothing was stored)"
            )


def ingest(
    target: Target,
    path: Annotated[Path, typer.Argument(help="a .txt/.md/.jsonl file or a folder of them")],
    source: Annotated[str | None, typer.Option(help="source of documents that name none")] = None,
    scope: Annotated[str, typer.Option(help="scope of documents that name none")] = "default",
    partial: Annotated[
        bool, typer.Option(help="store the good documents and list the bad ones (default: all or nothing)")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="no progress bar")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Store documents as evidence (an edited document becomes a new version) and index them.

    Any number of documents, in batches of up to 1,000, each stored all or nothing. Every file
    and line is checked first: without --partial one bad one stores nothing (all are listed).
    If storing batch k fails (the store, not the input), batches before it stay stored and the
    report says which (exit code of the store's error).
    """
    from mnemo_sea.system.bulk_ingest import ingest_in_batches
    from mnemo_sea.system.documents import load_documents

    folder = target.folder()
    principal = target.principal()
    # Read and validate every file before opening anything: a bad file changes nothing.
    loaded = load_documents(path, source=source, scope=scope, partial=partial)
    _check_may_store(principal, loaded.items)
    with _open_mnemo(target) as mnemo, _Progress(len(loaded), quiet) as progress:
        outcome = ingest_in_batches(mnemo, principal, loaded.items, progress=progress)
    report = {
        "data_dir": str(folder),
        "path": str(path),
        "documents": len(loaded),
        "stored": outcome.stored,
        "new_versions": outcome.new_versions,
        "unchanged": outcome.unchanged,
        "indexed": outcome.indexed,
        "index_pending": outcome.index_pending,
        "batches": [b.to_dict() for b in outcome.batches],
        "problems": [p.to_dict() for p in loaded.problems],
        "skipped_files": list(loaded.skipped),
    }
    if outcome.failure is None:
        _emit(report | {"records": outcome.records} if as_json else report, as_json)
        return
    cause = as_cli_error(outcome.failure.error)
    failed = outcome.failure
    report["failed_batch"] = {
        "batch": failed.number,
        "documents": [failed.first + 1, failed.first + failed.count],
        "error": {"code": cause.code, "message": cause.message, "detail": cause.detail},
    }
    if not as_json:  # with --json the report travels in the error's detail
        _emit(report, as_json=False)
    raise CliError(
        outcome.describe_failure(),
        cause.exit_code,
        code=cause.code,
        detail=report | {"records": outcome.records},
    )


def _as_of(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise CliError(f"--as-of: {value!r} is not an ISO-8601 date-time") from None
    if when.utcoffset() is None:
        raise CliError(f"--as-of: {value!r} has no time zone (add Z or +00:00)")
    return when


def _rank(rank: int | None) -> str:
    """A leg's rank for people: `#3`, or `—` when that leg did not find the hit."""
    return "—" if rank is None else f"#{rank}"


def search(
    target: Target,
    query: Annotated[str, typer.Argument(help="what to look for")],
    limit: Annotated[int, typer.Option(help="hits to return")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid | bm25 | dense")] = "hybrid",
    kind: Annotated[list[str] | None, typer.Option(help="only this kind (repeatable)")] = None,
    scope: Annotated[list[str] | None, typer.Option(help="only this scope (repeatable)")] = None,
    source: Annotated[list[str] | None, typer.Option(help="only this source (repeatable)")] = None,
    as_of: Annotated[str | None, typer.Option(help="what was current then (ISO-8601 with time zone)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Hybrid search in the principal's tenant; hits carry the exact text from the archive."""
    if mode not in ("hybrid", "bm25", "dense"):
        raise CliError(f"--mode: {mode!r} is not one of hybrid, bm25, dense")
    when = _as_of(as_of)
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        result = mnemo.search(
            principal, query, limit=limit, mode=mode, kinds=kind, scopes=scope, sources=source, as_of=when
        )
    failures = {"invalid": EXIT_USAGE, "forbidden": EXIT_FORBIDDEN, "unavailable": EXIT_UNAVAILABLE}
    if result.status in failures:
        raise CliError(f"search {result.status}: {result.reason}", failures[result.status])
    if as_json:
        _emit(result.to_dict(), as_json=True)
        return
    typer.echo(f"status: {result.status} ({len(result.hits)} hits)")
    for n, hit in enumerate(result.hits, start=1):
        typer.echo(
            f"{n}. {hit.evidence_id} v{hit.version} [{hit.kind}] {hit.source} / {hit.scope} / {hit.locator}"
            f"  score {hit.score:.4f} (bm25 {_rank(hit.bm25_rank)}, dense {_rank(hit.dense_rank)})"
        )
        typer.echo(f"   {' '.join(hit.snippet.split())[:300]}")


# ---- sessions ------------------------------------------------------------------------------------


def session_record(
    target: Target,
    session: Annotated[str, typer.Argument(help="session id")],
    tool: Annotated[str, typer.Argument(help="the tool that produced the result")],
    content: Annotated[str | None, typer.Option(help="the result's text")] = None,
    file: Annotated[Path | None, typer.Option(help="read the result's bytes from this file")] = None,
    policy_class: Annotated[
        str, typer.Option(help="e.g. default, inventory, vet_approval (protected)")
    ] = "default",
    sensitivity: Annotated[
        str, typer.Option(help="public | internal | confidential | restricted")
    ] = "internal",
    media_type: Annotated[
        str | None,
        typer.Option(
            help="e.g. application/json; default: text/plain for --content, detected for --file "
            "(UTF-8 text is text, typed by its extension; other bytes by extension or "
            "application/octet-stream)"
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Record a tool result in a session; prints its stable id (r1, r2, ...)."""
    if (content is None) == (file is None):
        raise CliError("give exactly one of --content TEXT or --file F")
    data: str | bytes
    if file is not None:
        from mnemo_sea.system.documents import MAX_FILE_BYTES, media_type_of

        if not file.is_file():
            raise CliError(f"--file {file}: no such file")
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CliError(f"--file {file}: {size} bytes exceeds the limit of {MAX_FILE_BYTES} bytes")
        data = file.read_bytes()
        # Bytes are stored as given; only their label is detected, so a text log is shown as
        # text in the live view and on recovery instead of `[binary original ...]`.
        media_type = media_type or media_type_of(file.name, data)
    else:
        assert content is not None
        data = content
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        result = mnemo.record(
            principal,
            session,
            tool,
            data,
            policy_class=policy_class,
            sensitivity=sensitivity,
            media_type=media_type,
        )
    _emit(plain(result), as_json)


def _targets(pairs: list[str]) -> list[tuple[str, str]]:
    out = []
    for pair in pairs:
        rid, sep, note = pair.partition("=")
        if not sep:
            raise CliError(f"{pair!r}: write each target as rN=note (e.g. r3='raw log, 40 KB, no errors')")
        out.append((rid.strip(), note))
    return out


def session_archive(
    target: Target,
    session: Annotated[str, typer.Argument(help="session id")],
    targets: Annotated[list[str], typer.Argument(help="rN=note ... (the whole batch or nothing)")],
    idempotency_key: Annotated[
        str | None, typer.Option(help="replaying the same key returns the receipt")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Set results aside with a note each; all or nothing (exit 2 lists every rejected target;
    exit 5 when every one was already archived)."""
    batch = _targets(targets)
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        receipt = mnemo.archive_results(principal, session, batch, idempotency_key=idempotency_key)
    _emit(plain(receipt), as_json)


def session_live(
    target: Target,
    session: Annotated[str, typer.Argument(help="session id")],
    as_json: JsonOpt = False,
) -> None:
    """The session's working context: live results in envelopes, archived ones as stubs."""
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        view = mnemo.live_view(principal, session)
    if not as_json:
        typer.echo(view.text)
        return
    items = [
        {
            "result_id": item.result.result_id,
            "tool_name": item.result.tool_name,
            "state": item.result.state,
            "note": item.result.note,
            "policy_class": item.result.policy_class,
            "rendered": item.rendered,
        }
        for item in view.items
    ]
    _emit({"session_id": view.session_id, "items": items, "text": view.text}, as_json=True)


def session_recover(
    target: Target,
    session: Annotated[str, typer.Argument(help="session id")],
    result_id: Annotated[str, typer.Argument(help="the result to recover, e.g. r3")],
    as_json: JsonOpt = False,
) -> None:
    """The exact original (hash-checked), appended to the session as historical data."""
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        recovered = mnemo.recover(principal, session, result_id)
    if not as_json:
        typer.echo(recovered.rendered)
        return
    _emit(
        {
            "session_id": session,
            "recovered": recovered.original.result_id,
            "appended": recovered.appended.result_id,
            "content_sha256": recovered.original.content_sha256,
            "observed_at": recovered.original.observed_at.isoformat(),
            "size": recovered.original.size,
            "media_type": recovered.original.media_type,
            "staleness_warning": recovered.staleness_warning,
            "text": recovered.text,
            "rendered": recovered.rendered,
        },
        as_json=True,
    )


def _limit(value: int) -> int:
    if not 0 < value <= 10_000:
        raise CliError(f"--limit: {value} is not between 1 and 10000")
    return value


LimitOpt = Annotated[int, typer.Option(help="at most this many (1-10000)")]


def session_list(target: Target, limit: LimitOpt = 1000, as_json: JsonOpt = False) -> None:
    """The tenant's sessions, oldest first, with their result counts (a reader sees its own)."""
    principal = target.principal()
    with _open_archive(target) as archive:
        found = archive.list_sessions(principal, limit=_limit(limit))
    if as_json:
        _emit({"sessions": plain(found)}, as_json=True)
        return
    typer.echo(f"{len(found)} session(s)")
    for info in found:
        typer.echo(
            f"{info.session_id}  owner {info.owner}  {info.results} result(s): {info.live} live, "
            f"{info.archived} archived  created {info.created_at.isoformat()}"
        )


# ---- evidence ------------------------------------------------------------------------------------


def evidence_get(
    target: Target,
    evidence_id: Annotated[str, typer.Argument(help="the record")],
    version: Annotated[int | None, typer.Option(help="this version (default: the current one)")] = None,
    as_of: Annotated[
        str | None, typer.Option(help="the version in force then (ISO-8601 with time zone)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """One version of a record with its hash-checked original: the current one, --version N, or
    the one in force --as-of T (exit 3 if none)."""
    if version is not None and as_of is not None:
        raise CliError("give at most one of --version N or --as-of T")
    when = _as_of(as_of)
    principal = target.principal()
    with _open_archive(target) as archive:
        record, content = archive.get_evidence(
            principal, evidence_id, version=version, as_of=when, with_content=True
        )
    assert content is not None
    try:
        text: str | None = content.decode("utf-8")
    except UnicodeDecodeError:
        text = None  # a binary original: its metadata and hash, not its bytes
    data: dict[str, Any] = plain(record) | {"size": len(content), "text": text}
    if as_json:
        _emit(data, as_json=True)
        return
    _emit({k: v for k, v in data.items() if k != "text"}, as_json=False)
    typer.echo("---")
    typer.echo(text if text is not None else f"[binary original: {len(content)} bytes, {record.media_type}]")


def evidence_history(
    target: Target,
    evidence_id: Annotated[str, typer.Argument(help="the record")],
    as_json: JsonOpt = False,
) -> None:
    """Every version of a record, oldest first (superseded and retracted ones too)."""
    principal = target.principal()
    with _open_archive(target) as archive:
        versions = archive.evidence_history(principal, evidence_id)
    if as_json:
        _emit({"evidence_id": evidence_id, "versions": plain(versions)}, as_json=True)
        return
    for rec in versions:
        ended = f", ended {rec.ended_at.isoformat()}" if rec.ended_at else ""
        typer.echo(f"v{rec.version} {rec.status}: recorded {rec.recorded_at.isoformat()}{ended}")


def evidence_retract(
    target: Target,
    evidence_id: Annotated[str, typer.Argument(help="the record")],
    reason: Annotated[str, typer.Option(help="why it is withdrawn (kept in the audit log)")],
    as_json: JsonOpt = False,
) -> None:
    """Withdraw a record's current version: it stays in history, no longer answers search, and
    citations of it say `retracted` (exit 5 if it has no current version)."""
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        record = mnemo.retract(principal, evidence_id, reason)
    _emit(plain(record), as_json)


# ---- summaries -----------------------------------------------------------------------------------


def summary_create(
    target: Target,
    text: Annotated[str, typer.Argument(help="the summary's text")],
    derived_from: Annotated[
        list[str],
        typer.Option(
            "--from", help="a source it summarises: evidence:ID[@V] or result:SESSION/rN (repeatable)"
        ),
    ],
    trace_ref: Annotated[str | None, typer.Option(help="where it came from (e.g. a run id)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Store a derived summary of existing sources; searchable, always labelled derived."""
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        summary = mnemo.create_summary(principal, text, derived_from, trace_ref=trace_ref)
    _emit(plain(summary), as_json)


def summary_list(target: Target, limit: LimitOpt = 1000, as_json: JsonOpt = False) -> None:
    """The summaries you may read, oldest first."""
    principal = target.principal()
    with _open_archive(target) as archive:
        found = archive.list_summaries(principal, limit=_limit(limit))
    if as_json:
        _emit({"summaries": plain(found)}, as_json=True)
        return
    typer.echo(f"{len(found)} summary(ies)")
    for summary in found:
        typer.echo(f"{summary.summary_id}  from {', '.join(summary.derived_from)}")
        typer.echo(f"   {' '.join(summary.text.split())[:300]}")


def summary_get(
    target: Target,
    summary_id: Annotated[str, typer.Argument(help="the summary")],
    as_json: JsonOpt = False,
) -> None:
    """One summary with its sources."""
    principal = target.principal()
    with _open_archive(target) as archive:
        summary = archive.get_summary(principal, summary_id)
    _emit(plain(summary), as_json)


# ---- memory --------------------------------------------------------------------------------------


def memory_remember(
    target: Target,
    owner: Annotated[str, typer.Argument(help="whose fact")],
    key: Annotated[str, typer.Argument(help="e.g. preferred_name")],
    value: Annotated[str, typer.Argument(help="the value")],
    provenance: Annotated[
        str, typer.Option(help="user_claim | user_correction | document | tool_fact | model_inference")
    ],
    ttl_seconds: Annotated[int | None, typer.Option(help="forget after this many seconds")] = None,
    derived_from: Annotated[
        str | None,
        typer.Option(help="the source it came from: evidence:<id> or result:<session>/<rN> (must exist)"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember (owner, key) = value; a new value supersedes the old one, which stays in history.

    A value never supersedes a current one of higher provenance (user_correction > user_claim >
    document, tool_fact > model_inference): that is a conflict (exit 5) naming the current fact.
    """
    principal = target.principal()
    ttl = None if ttl_seconds is None else timedelta(seconds=ttl_seconds)
    with _open_mnemo(target) as mnemo:
        outcome = mnemo.remember(principal, owner, key, value, provenance, ttl=ttl, derived_from=derived_from)
    _emit(plain(outcome), as_json)


def memory_current(
    target: Target,
    owner: Annotated[str, typer.Argument(help="whose fact")],
    key: Annotated[str, typer.Argument(help="which fact")],
    as_json: JsonOpt = False,
) -> None:
    """The current value of (owner, key); exit 3 when there is none."""
    principal = target.principal()
    with _open_archive(target) as archive:
        fact = archive.current(principal, owner, key)
    if fact is None:
        raise CliError(f"no current value for {owner}/{key}", EXIT_NOT_FOUND)
    _emit(plain(fact), as_json)


def memory_history(
    target: Target,
    owner: Annotated[str, typer.Argument(help="whose fact")],
    key: Annotated[str, typer.Argument(help="which fact")],
    as_json: JsonOpt = False,
) -> None:
    """Every version of (owner, key), oldest first, with provenance and status (active,
    superseded, or expired until the purge deletes it)."""
    principal = target.principal()
    with _open_archive(target) as archive:
        facts = archive.memory_history(principal, owner, key)
    _emit({"owner": owner, "key": key, "versions": plain(facts)}, as_json)


def _keep_receipt(data: dict[str, Any], receipt_out: Path | None) -> str:
    """Write the receipt to `--receipt-out` when given; what human output says of where it is."""
    if receipt_out is None:
        return "(use --receipt-out FILE or --json to keep it)"
    receipt_out.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return str(receipt_out)


def _memory_receipt(receipt: DeletionReceipt, receipt_out: Path | None, as_json: bool) -> None:
    data = receipt_to_dict(receipt)
    kept = _keep_receipt(data, receipt_out)
    if as_json:
        _emit(data, as_json=True)
        return
    versions = [f"{o}/{k}@{v}" for o, k, v in receipt.memory_facts]
    _emit({"deleted": receipt.target, "versions": versions, "receipt": kept}, as_json=False)


def memory_forget(
    target: Target,
    owner: Annotated[str, typer.Argument(help="whose fact")],
    key: Annotated[str, typer.Argument(help="which fact")],
    receipt_out: ReceiptOut = None,
    as_json: JsonOpt = False,
) -> None:
    """Forget (owner, key): delete every version, its index points and cached searches (audited,
    with a receipt for verify-deleted); exit 3 when there is no such fact."""
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        receipt = mnemo.forget(principal, owner, key)
    _memory_receipt(receipt, receipt_out, as_json)


def memory_purge_expired(target: Target, receipt_out: ReceiptOut = None, as_json: JsonOpt = False) -> None:
    """Delete the tenant's expired memory facts now, with their index points (admin). Server
    mode's worker does this every MNEMO_TTL_PURGE_SECONDS; the embedded default has no worker."""
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        receipt = mnemo.purge_expired(principal)
    data = None if receipt is None else receipt_to_dict(receipt)
    kept = "none" if data is None else _keep_receipt(data, receipt_out)
    purged = 0 if receipt is None else len(receipt.memory_facts)
    if as_json:  # the shape of POST /v1/memory/purge-expired
        _emit({"purged": purged, "receipt": data}, as_json=True)
        return
    versions = [] if receipt is None else [f"{o}/{k}@{v}" for o, k, v in receipt.memory_facts]
    _emit({"purged": purged, "versions": versions, "receipt": kept}, as_json=False)


# ---- deletion, verification, fsck, audit, citations ----------------------------------------------


def receipt_to_dict(receipt: DeletionReceipt) -> dict[str, Any]:
    data: dict[str, Any] = plain(receipt)
    return data


def receipt_from_dict(data: Any) -> DeletionReceipt:
    """The receipt `delete ... --json` printed (or `--receipt-out` wrote); CliError if it is not one."""
    try:
        return DeletionReceipt(
            tenant_id=str(data["tenant_id"]),
            target=str(data["target"]),
            deleted_at=datetime.fromisoformat(data["deleted_at"]),
            evidence_versions=tuple((str(e), int(v)) for e, v in data.get("evidence_versions", ())),
            tool_results=tuple(str(x) for x in data.get("tool_results", ())),
            sessions=tuple(str(x) for x in data.get("sessions", ())),
            memory_facts=tuple((str(o), str(k), int(v)) for o, k, v in data.get("memory_facts", ())),
            summaries=tuple(str(x) for x in data.get("summaries", ())),
            task_states=tuple((str(x), int(v)) for x, v in data.get("task_states", ())),
            blobs=tuple(str(x) for x in data.get("blobs", ())),
            content_sha256=tuple(str(x) for x in data.get("content_sha256", ())),
            outbox_ids=tuple(int(x) for x in data.get("outbox_ids", ())),
            audit_seq=int(data.get("audit_seq", 0)),
            counts={str(k): int(v) for k, v in data.get("counts", {}).items()},
            audit_hash=str(data.get("audit_hash", "")),
            key_id=str(data.get("key_id", "")),
            signature=str(data.get("signature", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CliError(f"not a deletion receipt ({type(e).__name__}: {e})") from None


def anchor_to_dict(anchor: AuditAnchor) -> dict[str, Any]:
    data: dict[str, Any] = plain(anchor)
    return data


def anchor_from_dict(data: Any) -> AuditAnchor | DeletionReceipt:
    """What `audit anchor --out` wrote, or a deletion receipt (it anchors the chain of its time)."""
    if isinstance(data, dict) and "target" in data:
        return receipt_from_dict(data)
    try:
        return AuditAnchor(
            tenant_id=str(data["tenant_id"]),
            seq=int(data["seq"]),
            hash=str(data["hash"]),
            at=datetime.fromisoformat(data["at"]),
            key_id=str(data.get("key_id", "")),
            signature=str(data.get("signature", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CliError(f"not an audit anchor ({type(e).__name__}: {e})") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CliError(f"{path}: not JSON ({e})") from None


ReceiptOut = Annotated[
    Path | None, typer.Option(help="also write the receipt (JSON) here, for verify-deleted")
]


def _deleted(target: Target, what: str, ident: str, receipt_out: Path | None, as_json: bool) -> None:
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        delete = {
            "evidence": mnemo.delete_evidence,
            "session": mnemo.delete_session,
            "owner": mnemo.delete_owner,
        }[what]
        receipt = delete(principal, ident)
    data = receipt_to_dict(receipt)
    kept = _keep_receipt(data, receipt_out)
    if as_json:
        _emit(data, as_json=True)
        return
    _emit({"deleted": receipt.target, "counts": receipt.counts, "receipt": kept}, as_json=False)


def delete_evidence(
    target: Target,
    evidence_id: Annotated[str, typer.Argument(help="the record, every version")],
    receipt_out: ReceiptOut = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a record with its blobs, index points, derived summaries/memory and caches (admin)."""
    _deleted(target, "evidence", evidence_id, receipt_out, as_json)


def delete_session(
    target: Target,
    session_id: Annotated[str, typer.Argument(help="the session")],
    receipt_out: ReceiptOut = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a session: its tool results, originals, notes and their index points (admin)."""
    _deleted(target, "session", session_id, receipt_out, as_json)


def delete_owner(
    target: Target,
    owner: Annotated[str, typer.Argument(help="the user")],
    receipt_out: ReceiptOut = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete everything of one owner: memory, their records, sessions (admin)."""
    _deleted(target, "owner", owner, receipt_out, as_json)


def verify_deleted(
    target: Target,
    receipt_file: Annotated[
        Path,
        typer.Argument(help="the receipt JSON of `delete ... --receipt-out FILE` (or its --json output)"),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Prove a deletion: nothing of it left in the archive, the index or the outbox (exit 1 if any).

    The receipt must be one this deployment signed, whose audit event the chain still holds:
    an edited, foreign or unsigned receipt, or one the chain was rewound under, exits 2
    (`receipt_invalid`, as REST's 422)."""
    receipt = receipt_from_dict(_read_json(receipt_file))
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        check = mnemo.verify_deleted(principal, receipt)
    _emit(
        {
            "ok": check.ok,
            "target": receipt.target,
            "archive_leftovers": list(check.archive_leftovers),
            "index_leftovers": list(check.index_leftovers),
            "pending_outbox": check.pending_outbox,
        },
        as_json,
    )
    if not check.ok:
        raise CliError(
            f"deletion of {receipt.target} is not complete (see the report)", EXIT_PROBLEMS, reported=True
        )


def fsck(
    target: Target,
    repair: Annotated[bool, typer.Option(help="fix what the archive can rebuild")] = False,
    compact: Annotated[
        bool, typer.Option(help="first rewrite the embedded index without its deleted points")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Compare index and outbox with the archive; check blob hashes and audit chains."""
    target.folder()  # before the ~1.5 s import: fail fast
    from mnemo_sea.system.fsck import run_fsck

    with _open_mnemo(target) as mnemo:
        compacted = mnemo.compact_index() if compact else None
        report = run_fsck(mnemo, repair=repair)
    out = report.to_dict()
    if compacted is not None:
        out["compacted_points_kept"] = compacted
    _emit(out, as_json)
    if not report.ok:
        integrity = any(p.kind in ("blob_hash", "audit_chain") for p in report.problems)
        raise CliError(
            f"fsck found {len(report.problems)} problem(s)"
            + ("" if repair else "; run fsck --repair to fix the repairable ones"),
            EXIT_INTEGRITY if integrity else EXIT_PROBLEMS,
            reported=True,
        )


def audit_verify(
    target: Target,
    anchor: Annotated[
        list[Path] | None,
        typer.Option(
            help="an anchor of `audit anchor --out` or a deletion receipt (repeatable): also report "
            "a chain rewound or rewritten under it"
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the tenant's hash-chained audit log (admin); exit 7 if it was tampered with (also
    rewound or rewritten under an anchor), 2 if an anchor is not one this deployment signed."""
    principal = target.principal()
    anchors = [anchor_from_dict(_read_json(path)) for path in anchor or ()]
    with _open_archive(target) as archive:
        report = archive.verify_audit(principal, anchors)
    _emit(
        {
            "tenant_id": report.tenant_id,
            "events": report.events,
            "ok": report.ok,
            "problems": list(report.problems),
        },
        as_json,
    )
    if not report.ok:
        raise CliError(f"audit chain of tenant {report.tenant_id} is broken", EXIT_INTEGRITY, reported=True)


def audit_anchor(
    target: Target,
    out: Annotated[Path, typer.Option(help="write the signed anchor (JSON) here; keep it off this machine")],
    as_json: JsonOpt = False,
) -> None:
    """Sign the tenant chain's head with the deployment key (admin): `audit verify --anchor FILE`
    later reports any rewind or rewrite under it. Exit 7 if the chain is already broken."""
    principal = target.principal()
    with _open_archive(target) as archive:
        made = archive.audit_anchor(principal)
    data = anchor_to_dict(made)
    out.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    _emit({**data, "anchor": str(out)} if as_json else {"anchored": made.seq, "anchor": str(out)}, as_json)


def eval_citations(
    target: Target,
    file: Annotated[Path, typer.Argument(help='JSONL: {"id": ..., "answered_at": ..., "citations": [...]}')],
    as_json: JsonOpt = False,
) -> None:
    """Check every citation: resolves, valid then, not retracted/superseded, quote verbatim; precision."""
    from mnemo_sea.system.citations import check_answers, load_citations_jsonl

    principal = target.principal()
    target.folder()
    answers = load_citations_jsonl(file)
    with _open_archive(target) as archive:
        report = check_answers(archive, principal, answers)
    _emit(report.to_dict(), as_json)


# ---- registration --------------------------------------------------------------------------------


def add_command(group: typer.Typer, name: str, fn: Callable[..., None]) -> None:
    """Add `fn(target, ...)` to `group` as `name`, with the shared options and error handling
    (for the command modules that extend these groups, e.g. mnemo_sea.cli.context)."""
    group.command(name, cls=_Command, help=inspect.getdoc(fn))(_command(fn))


def add_group(parent: typer.Typer, name: str, help_text: str) -> typer.Typer:
    """A subcommand group under `parent` whose unknown subcommands are one `error:` line, exit 2."""
    sub = typer.Typer(cls=_Group, no_args_is_help=True, help=help_text)
    parent.add_typer(sub, name=name)
    return sub


def register(app: typer.Typer, eval_app: typer.Typer) -> None:
    """Add the facade commands to `mnemo-sea` (and `citations` to its `eval` group)."""
    # Imported here: mnemo_sea.cli.context builds on this module's machinery.
    from mnemo_sea.cli import context as cli_context

    add = add_command

    def subgroup(name: str, help_text: str) -> typer.Typer:
        return add_group(app, name, help_text)

    add(app, "init", init)
    add(app, "ingest", ingest)
    add(app, "search", search)
    session = subgroup(
        "session",
        "Tool results of a session: record, archive, live view, recover, list; its working context "
        "under a token budget and its task state.",
    )
    add(session, "record", session_record)
    add(session, "archive", session_archive)
    add(session, "live", session_live)
    add(session, "recover", session_recover)
    add(session, "list", session_list)
    cli_context.register(session)
    evidence = subgroup("evidence", "Evidence records: read a version, its history, retract.")
    add(evidence, "get", evidence_get)
    add(evidence, "history", evidence_history)
    add(evidence, "retract", evidence_retract)
    summary = subgroup("summary", "Derived summaries of existing sources: create, list, get.")
    add(summary, "create", summary_create)
    add(summary, "list", summary_list)
    add(summary, "get", summary_get)
    memory = subgroup("memory", "User memory facts with supersede chains.")
    add(memory, "remember", memory_remember)
    add(memory, "current", memory_current)
    add(memory, "history", memory_history)
    add(memory, "forget", memory_forget)
    add(memory, "purge-expired", memory_purge_expired)
    delete = subgroup("delete", "Deletion cascades (admin); each prints its receipt.")
    add(delete, "evidence", delete_evidence)
    add(delete, "session", delete_session)
    add(delete, "owner", delete_owner)
    add(app, "verify-deleted", verify_deleted)
    add(app, "fsck", fsck)
    audit = subgroup("audit", "The hash-chained audit log.")
    add(audit, "verify", audit_verify)
    add(audit, "anchor", audit_anchor)
    add(eval_app, "citations", eval_citations)


__all__ = [
    "CliError",
    "Target",
    "add_command",
    "add_group",
    "anchor_from_dict",
    "anchor_to_dict",
    "as_cli_error",
    "embedder_choice",
    "exit_code_of",
    "guard",
    "receipt_from_dict",
    "receipt_to_dict",
    "register",
]
