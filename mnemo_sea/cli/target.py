"""Where a command works and who it acts as: the data folder (`--data-dir`), the principal
(`--tenant/--subject/--role/--clearance`), the embedder; and `add_command`, which gives every
command these shared options and the one-line error handling of mnemo_sea.cli.output.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mnemo_sea.archive import InvalidInput, Principal, Role, Sensitivity, StoreCorrupt
from mnemo_sea.cli.output import ACTING, CliError, OneLineErrorsCommand, OneLineErrorsGroup, guard
from mnemo_sea.system.wiring.embedders import EmbedderName, build_embedder, embedder_name, folder_embedder
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE

if TYPE_CHECKING:
    from mnemo_sea.archive import Archive
    from mnemo_sea.system.mnemo import Mnemo


_SQLITE_HEADER = b"SQLite format 3\x00"


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
        made = Principal(self.tenant, self.subject, frozenset({role}), Sensitivity.parse(self.clearance))
        ACTING.set(made)  # what the command's human report names first (output.emit)
        return made

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
    """A non-empty archive file that is not SQLite is corrupt: say so before anything opens it.

    Opening it would say the same (StoreCorrupt, from SQLite's result code), but only after the
    index stack is imported (seconds); this header check answers at once, with the same error.
    """
    try:
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except FileNotFoundError:
        return
    if header and header != _SQLITE_HEADER:
        raise StoreCorrupt(str(path), "not a SQLite database")


def embedder_choice(choice: str | None, folder: Path | None) -> EmbedderName:
    """The embedder asked for (`--embedder`), else the one `folder`'s index was built with."""
    if choice is None:
        return "default" if folder is None else folder_embedder(folder)
    try:
        return embedder_name(choice)
    except InvalidInput as e:
        raise CliError(f"--embedder: {e.problem}") from None


def open_mnemo(target: Target, *, create: bool = False) -> Mnemo:
    folder = target.folder(must_exist=not create)  # before the ~1.5 s import: fail fast
    from mnemo_sea.system.mnemo import Mnemo

    return Mnemo.open(folder, embedder=build_embedder(embedder_choice(target.embedder, folder)))


@contextlib.contextmanager
def open_archive(target: Target) -> Iterator[Archive]:
    """The archive alone, for commands that never touch the index (no lock, no model)."""
    from mnemo_sea.archive import Archive

    archive = Archive.open(str(target.folder() / ARCHIVE_FILE))
    try:
        yield archive
    finally:
        archive.close()


def parse_as_of(value: str | None, option: str = "--as-of") -> datetime | None:
    """An option's ISO-8601 date-time with a time zone (e.g. --as-of, --observed-at), or None."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise CliError(f"{option}: {value!r} is not an ISO-8601 date-time") from None
    if when.utcoffset() is None:
        raise CliError(f"{option}: {value!r} has no time zone (add Z or +00:00)")
    return when


def check_limit(value: int) -> int:
    if not 0 < value <= 10_000:
        raise CliError(f"--limit: {value} is not between 1 and 10000")
    return value


SessionIdArg = Annotated[str, typer.Argument(help="session id")]
LimitOpt = Annotated[int, typer.Option(help="at most this many (1-10000)")]
# Every write takes one, as over REST (the Idempotency-Key header) and MCP.
IdempotencyKeyOpt = Annotated[
    str | None, typer.Option(help="repeating the call with the same key returns the first answer")
]


def add_command(group: typer.Typer, name: str, fn: Callable[..., None]) -> None:
    """Add `fn(target, ...)` to `group` as `name`, with the shared options and error handling
    (for the command modules that extend these groups, e.g. mnemo_sea.cli.context)."""
    group.command(name, cls=OneLineErrorsCommand, help=inspect.getdoc(fn))(_command(fn))


def add_group(parent: typer.Typer, name: str, help_text: str) -> typer.Typer:
    """A subcommand group under `parent` whose unknown subcommands are one `error:` line, exit 2."""
    sub = typer.Typer(cls=OneLineErrorsGroup, no_args_is_help=True, help=help_text)
    parent.add_typer(sub, name=name)
    return sub
