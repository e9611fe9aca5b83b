"""CLI commands over the `Mnemo` facade: init, ingest, search, session, memory, delete, verify-deleted,
fsck, audit verify/anchor and eval citations. `register(app, eval_app)` adds them to `mnemo-sea`.

Every command works on one data folder (`--data-dir`, env MNEMO_DATA_DIR) as one principal
(`--tenant/--subject/--role/--clearance`, env MNEMO_TENANT/MNEMO_SUBJECT/MNEMO_ROLE/MNEMO_CLEARANCE;
defaults: tenant `default`, subject `cli`, role `agent`, clearance `internal`). Only `init` creates a
folder; the others refuse a folder that holds no archive.

`--embedder default|hashing` (env MNEMO_EMBEDDER) picks the dense model: `default` is
all-MiniLM-L6-v2, `hashing` the deterministic word-hashing embedder of
mnemo_sea.hashing_embedder, meant for tests and offline smoke runs only. Without the option an
existing folder keeps the embedder its index was built with (a new one gets `default`); asking
for the other one is refused, since the stored vectors would not match.

Reports go to stdout (JSON with `--json`), progress bars to stderr (only on a terminal). Every
user mistake and every typed error prints one line `error: ...` on stderr, never a traceback,
and exits with:

    1  a check ran and found problems (fsck, verify-deleted), or an unexpected error
    2  usage or input: bad option, missing/malformed/binary/oversize file, missing data folder,
       an index built with another embedder
    3  not found (including records of other tenants)
    4  forbidden: role or clearance
    5  conflict: state conflict, rejected archive batch (nothing archived), reused idempotency key
    6  store unavailable: archive unreachable, index locked by another process (named), index down
    7  integrity: corrupt archive file, an original failing its hash, a broken or rewound audit
       chain, a deletion receipt or audit anchor this deployment did not issue

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
from collections.abc import Callable, Iterable, Iterator
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
    Role,
    Sensitivity,
    StateConflict,
    StoreUnavailable,
)
from mnemo_sea.plain import plain

if TYPE_CHECKING:
    from mnemo_sea.archive import Archive
    from mnemo_sea.mnemo import Mnemo
    from mnemo_sea.retrieval import Embedder
    from mnemo_sea.retrieval.errors import RetrievalError

EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_FORBIDDEN = 4
EXIT_CONFLICT = 5
EXIT_UNAVAILABLE = 6
EXIT_INTEGRITY = 7

# The same names as mnemo_sea.mnemo (imported lazily: loading the index stack takes ~1.5 s,
# and errors that need no archive should not pay for it).
ARCHIVE_FILE = "archive.db"
INDEX_DIR = "index"
_SQLITE_HEADER = b"SQLite format 3\x00"
EMBEDDERS = ("default", "hashing")


# ---- errors --------------------------------------------------------------------------------------


class CliError(Exception):
    """A failure the CLI reports as one line and an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def _retrieval_errors() -> Any:
    """mnemo_sea.retrieval.errors if it is loaded, else None.

    Importing it loads the whole retrieval package (~1.5 s), which commands that fail early or
    never touch the index should not pay; and if it is not loaded, no error can come from it.
    """
    return sys.modules.get("mnemo_sea.retrieval.errors")


def _exit_code(exc: ArchiveError | RetrievalError) -> int:
    errors = _retrieval_errors()
    if errors is not None and isinstance(exc, errors.RetrievalError):
        if isinstance(exc, errors.InvalidQuery | errors.InvalidDocument | errors.IndexConfigMismatch):
            return EXIT_USAGE
        if isinstance(exc, errors.IndexLocked | errors.IndexUnavailable):
            return EXIT_UNAVAILABLE
        return EXIT_PROBLEMS
    if isinstance(exc, InvalidInput):
        return EXIT_USAGE
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, Forbidden):
        return EXIT_FORBIDDEN
    if isinstance(exc, StateConflict | BatchRejected):
        return EXIT_CONFLICT
    if isinstance(exc, IntegrityError):
        return EXIT_INTEGRITY
    if isinstance(exc, StoreUnavailable):
        # SQLite says so when the file is not (any more) a database: that is corruption, not an outage.
        corrupt = "not a database" in exc.message or "malformed" in exc.message
        return EXIT_INTEGRITY if corrupt else EXIT_UNAVAILABLE
    return EXIT_PROBLEMS


def _message(exc: ArchiveError | RetrievalError) -> str:
    errors = _retrieval_errors()
    if errors is not None and isinstance(exc, errors.IndexConfigMismatch) and exc.field == "model_id":
        choice = "hashing" if exc.stored == _hashing_model_id() else "default"
        return f"{exc.message} (this folder needs --embedder {choice})"
    return exc.message


def _fail(message: str, exit_code: int) -> NoReturn:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code=exit_code)


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Turn every failure into one `error:` line and its exit code."""
    try:
        yield
    except CliError as e:
        _fail(e.message, e.exit_code)
    except ArchiveError as e:
        _fail(_message(e), _exit_code(e))
    except OSError as e:
        _fail(f"{e.filename or 'file'}: {e.strerror or e}", EXIT_UNAVAILABLE)
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as e:
        errors = _retrieval_errors()
        if errors is not None and isinstance(e, errors.RetrievalError):
            _fail(_message(e), _exit_code(e))
        if os.environ.get("MNEMO_DEBUG") == "1":
            raise
        _fail(f"unexpected {type(e).__name__}: {e} (set MNEMO_DEBUG=1 for the traceback)", EXIT_PROBLEMS)


class _Command(TyperCommand):
    """Usage mistakes (missing argument, bad option value) as one `error:` line, exit 2."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except UsageError as e:
            _fail(e.format_message(), EXIT_USAGE)


class _Group(TyperGroup):
    """An unknown subcommand as one `error:` line, exit 2."""

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except UsageError as e:
            _fail(e.format_message(), EXIT_USAGE)


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
        with guard():
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
    from mnemo_sea.hashing_embedder import HASHING_MODEL_ID

    return HASHING_MODEL_ID


def _embedder(choice: str | None, folder: Path) -> Embedder | None:
    """The embedder asked for, or the one the folder's index was built with; None = the default."""
    from mnemo_sea.hashing_embedder import HashingEmbedder

    if choice is None:
        from mnemo_sea.retrieval.hybrid_index import IDENTITY_FILE
        from mnemo_sea.retrieval.settings import read_identity

        stored = read_identity(folder / INDEX_DIR / IDENTITY_FILE)
        choice = "hashing" if stored is not None and stored.model_id == _hashing_model_id() else "default"
    choice = choice.strip().lower()
    if choice not in EMBEDDERS:
        raise CliError(f"--embedder: {choice!r} is not one of {', '.join(EMBEDDERS)}")
    return HashingEmbedder() if choice == "hashing" else None


def _open_mnemo(target: Target, *, create: bool = False) -> Mnemo:
    folder = target.folder(must_exist=not create)  # before the ~1.5 s import: fail fast
    from mnemo_sea.mnemo import Mnemo

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
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
        typer.echo(f"{key}: {shown}")


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


def _tracked(
    items: list[EvidenceInput], quiet: bool
) -> contextlib.AbstractContextManager[Iterable[EvidenceInput]]:
    """The items, advancing a progress bar on stderr as the facade stores them."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
        transient=False,
    )

    @contextlib.contextmanager
    def run() -> Iterator[Iterable[EvidenceInput]]:
        with progress:
            task = progress.add_task("storing", total=len(items))

            def advance() -> Iterator[EvidenceInput]:
                for item in items:
                    yield item
                    progress.advance(task)
                progress.update(task, description="indexing")

            yield advance()

    return run()


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
    """Store documents as evidence (an edited document becomes a new version) and index them."""
    from mnemo_sea.documents import load_documents

    folder = target.folder()
    principal = target.principal()
    # Read and validate every file before opening anything: a bad file changes nothing.
    loaded = load_documents(path, source=source, scope=scope, partial=partial)
    _check_may_store(principal, loaded.items)
    with _open_mnemo(target) as mnemo, _tracked(loaded.items, quiet) as items:
        report = mnemo.ingest(principal, items)
    _emit(
        {
            "data_dir": str(folder),
            "path": str(path),
            "documents": len(loaded),
            "stored": len(report.stored),
            "new_versions": report.new_versions,
            "unchanged": report.unchanged,
            "indexed": report.index.applied if report.index else 0,
            "index_pending": report.index.pending if report.index else 0,
            "problems": [p.to_dict() for p in loaded.problems],
            "skipped_files": list(loaded.skipped),
        },
        as_json,
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
            f"  score {hit.score:.4f} (bm25 #{hit.bm25_rank}, dense #{hit.dense_rank})"
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
    as_json: JsonOpt = False,
) -> None:
    """Record a tool result in a session; prints its stable id (r1, r2, ...)."""
    if (content is None) == (file is None):
        raise CliError("give exactly one of --content TEXT or --file F")
    data: str | bytes
    if file is not None:
        from mnemo_sea.documents import MAX_FILE_BYTES

        if not file.is_file():
            raise CliError(f"--file {file}: no such file")
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CliError(f"--file {file}: {size} bytes exceeds the limit of {MAX_FILE_BYTES} bytes")
        data = file.read_bytes()
    else:
        assert content is not None
        data = content
    principal = target.principal()
    with _open_mnemo(target) as mnemo:
        result = mnemo.record(
            principal, session, tool, data, policy_class=policy_class, sensitivity=sensitivity
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
    """Set results aside with a note each; all or nothing (exit 5 lists every rejected target)."""
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
    as_json: JsonOpt = False,
) -> None:
    """Remember (owner, key) = value; a new value supersedes the old one, which stays in history."""
    principal = target.principal()
    ttl = None if ttl_seconds is None else timedelta(seconds=ttl_seconds)
    with _open_mnemo(target) as mnemo:
        outcome = mnemo.remember(principal, owner, key, value, provenance, ttl=ttl)
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
    """Every version of (owner, key), oldest first, with provenance and status."""
    principal = target.principal()
    with _open_archive(target) as archive:
        facts = archive.memory_history(principal, owner, key)
    _emit({"owner": owner, "key": key, "versions": plain(facts)}, as_json)


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
    if receipt_out is not None:
        receipt_out.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    if as_json:
        _emit(data, as_json=True)
        return
    _emit(
        {
            "deleted": receipt.target,
            "counts": receipt.counts,
            "receipt": str(receipt_out) if receipt_out else "(use --receipt-out FILE or --json to keep it)",
        },
        as_json=False,
    )


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
    an edited, foreign or unsigned receipt, or one the chain was rewound under, exits 7."""
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
        raise CliError(f"deletion of {receipt.target} is not complete (see the report)", EXIT_PROBLEMS)


def fsck(
    target: Target,
    repair: Annotated[bool, typer.Option(help="fix what the archive can rebuild")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Compare index and outbox with the archive; check blob hashes and audit chains."""
    target.folder()  # before the ~1.5 s import: fail fast
    from mnemo_sea.fsck import run_fsck

    with _open_mnemo(target) as mnemo:
        report = run_fsck(mnemo, repair=repair)
    _emit(report.to_dict(), as_json)
    if not report.ok:
        integrity = any(p.kind in ("blob_hash", "audit_chain") for p in report.problems)
        raise CliError(
            f"fsck found {len(report.problems)} problem(s)"
            + ("" if repair else "; run fsck --repair to fix the repairable ones"),
            EXIT_INTEGRITY if integrity else EXIT_PROBLEMS,
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
    """Check the tenant's hash-chained audit log (admin); exit 7 if it was tampered with."""
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
        raise CliError(f"audit chain of tenant {report.tenant_id} is broken", EXIT_INTEGRITY)


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
    from mnemo_sea.citations import check_answers, load_citations_jsonl

    principal = target.principal()
    target.folder()
    answers = load_citations_jsonl(file)
    with _open_archive(target) as archive:
        report = check_answers(archive, principal, answers)
    _emit(report.to_dict(), as_json)


# ---- registration --------------------------------------------------------------------------------


def register(app: typer.Typer, eval_app: typer.Typer) -> None:
    """Add the facade commands to `mnemo-sea` (and `citations` to its `eval` group)."""

    def add(group: typer.Typer, name: str, fn: Callable[..., None]) -> None:
        group.command(name, cls=_Command, help=inspect.getdoc(fn))(_command(fn))

    def subgroup(name: str, help_text: str) -> typer.Typer:
        sub = typer.Typer(cls=_Group, no_args_is_help=True, help=help_text)
        app.add_typer(sub, name=name)
        return sub

    add(app, "init", init)
    add(app, "ingest", ingest)
    add(app, "search", search)
    session = subgroup("session", "Tool results of a session: record, archive, live view, recover.")
    add(session, "record", session_record)
    add(session, "archive", session_archive)
    add(session, "live", session_live)
    add(session, "recover", session_recover)
    memory = subgroup("memory", "User memory facts with supersede chains.")
    add(memory, "remember", memory_remember)
    add(memory, "current", memory_current)
    add(memory, "history", memory_history)
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
    "anchor_from_dict",
    "anchor_to_dict",
    "receipt_from_dict",
    "receipt_to_dict",
    "register",
]
