"""How a command reports: text or JSON on stdout, every failure as one `error:` line and an exit
code. Every command works on one data folder (`--data-dir`, env MNEMO_DATA_DIR) as one principal
(`--tenant/--subject/--role/--clearance`, env MNEMO_TENANT/MNEMO_SUBJECT/MNEMO_ROLE/MNEMO_CLEARANCE;
defaults: tenant `default`, subject `cli`, role `agent`, clearance `internal`). Only `init` creates a
folder; the others refuse a folder that holds no archive.

`--embedder default|hashing` (env MNEMO_EMBEDDER) picks the dense model: `default` is
all-MiniLM-L6-v2, `hashing` the deterministic word-hashing embedder of
mnemo_sea.system.wiring.hashing_embedder, meant for tests and offline smoke runs only. Without the option an
existing folder keeps the embedder its index was built with (a new one gets `default`); asking
for the other one is refused, since the stored vectors would not match.

Reports go to stdout (JSON with `--json`), progress bars to stderr (only on a terminal). Every
user mistake and every typed error prints one line `error: ...` on stderr, never a traceback;
with `--json` it is also printed on stdout as `{"error": {"code", "message", "exit_code",
"detail"}}` (`code` is the typed error's stable code, `detail` its structured fields, e.g. the
`targets` of a rejected batch). The exit code of a typed error is its category's in the one
error table, mnemo_sea.system.outcomes (ANSWERS and the EXIT_* codes, where REST's statuses come
from too; the codes are stated there, not here); `exit_code_of` applies it, and `CliError` names
a code for what only the CLI meets (a bad option is EXIT_USAGE, a check that found problems
EXIT_PROBLEMS); an OSError of a file the command reads or writes itself is EXIT_UNAVAILABLE.

Set MNEMO_DEBUG=1 to get the traceback of an unexpected error instead of its one line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, ParamSpec

import typer
from typer._click.core import Command, Context  # typer vendors click: these, not `click`'s
from typer._click.exceptions import UsageError
from typer._click.globals import get_current_context
from typer.core import TyperCommand, TyperGroup

from mnemo_sea.errors import Category, MnemoError
from mnemo_sea.extras import extra_missing
from mnemo_sea.system import outcomes
from mnemo_sea.system.json_ready import json_ready
from mnemo_sea.system.outcomes import outcome_of

if TYPE_CHECKING:
    from mnemo_sea.archive import Principal

P = ParamSpec("P")

# The table's exit codes, by the names the commands use (defined once, in outcomes).
EXIT_PROBLEMS = outcomes.EXIT_PROBLEMS
EXIT_USAGE = outcomes.EXIT_USAGE
EXIT_NOT_FOUND = outcomes.EXIT_NOT_FOUND
EXIT_FORBIDDEN = outcomes.EXIT_FORBIDDEN
EXIT_CONFLICT = outcomes.EXIT_CONFLICT
EXIT_UNAVAILABLE = outcomes.EXIT_UNAVAILABLE
EXIT_INTEGRITY = outcomes.EXIT_INTEGRITY
EXIT_PARTIAL = outcomes.EXIT_PARTIAL
EXIT_CLOSED_PIPE = outcomes.EXIT_CLOSED_PIPE

# The stable code of a CliError raised with only an exit code: its category's name.
_EXIT_NAMES = {
    EXIT_PROBLEMS: "problems",
    EXIT_USAGE: Category.INVALID_INPUT.value,
    EXIT_NOT_FOUND: Category.NOT_FOUND.value,
    EXIT_FORBIDDEN: Category.FORBIDDEN.value,
    EXIT_CONFLICT: Category.CONFLICT.value,
    EXIT_UNAVAILABLE: Category.UNAVAILABLE.value,
    EXIT_INTEGRITY: Category.INTEGRITY.value,
    EXIT_PARTIAL: "partial",
}


# The principal the running command acts as, once it has asked for it (Target.principal): its
# human report names it first, since what a command sees and may do depends on it.
ACTING: ContextVar[Principal | None] = ContextVar("acting", default=None)


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


def exit_code_of(exc: BaseException) -> int:
    """The exit code of any error a command can meet: a typed error's by the one error table."""
    if isinstance(exc, CliError):
        return exc.exit_code
    if isinstance(exc, OSError):  # a file the command reads or writes itself; no typed error is one
        return EXIT_UNAVAILABLE
    return outcome_of(exc).exit_code


def _message(exc: MnemoError) -> str:
    errors = _retrieval_errors()
    if errors is not None and isinstance(exc, errors.IndexConfigMismatch) and exc.field == "model_id":
        from mnemo_sea.system.wiring.hashing_embedder import HASHING_MODEL_ID

        choice = "hashing" if exc.stored == HASHING_MODEL_ID else "default"
        return f"{exc.message} (this folder needs --embedder {choice})"
    return exc.message


def as_cli_error(exc: Exception) -> CliError:
    """Any error as the CliError the CLI reports: its message, exit code, stable code, detail."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, ModuleNotFoundError):  # in a command's body; an import at its top: below
        ctx = get_current_context(silent=True)
        exc = extra_missing(exc, f"`{ctx.command_path}`" if ctx else "this command") or exc
    if isinstance(exc, MnemoError):
        outcome = outcome_of(exc)
        return CliError(_message(exc), outcome.exit_code, code=outcome.code, detail=dict(exc.detail))
    if isinstance(exc, OSError):
        return CliError(f"{exc.filename or 'file'}: {exc.strerror or exc}", EXIT_UNAVAILABLE, code="os_error")
    return CliError(
        f"unexpected {type(exc).__name__}: {exc} (set MNEMO_DEBUG=1 for the traceback)",
        EXIT_PROBLEMS,
        code=outcomes.UNEXPECTED_CODE,
    )


def fail(error: CliError, as_json: bool = False) -> NoReturn:
    message = " ".join(error.message.split())
    if as_json and not error.reported:
        body = {"code": error.code, "message": message, "exit_code": error.exit_code, "detail": error.detail}
        typer.echo(json.dumps({"error": json_ready(body)}, ensure_ascii=False, indent=2, default=str))
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=error.exit_code)


def stop_on_closed_pipe() -> NoReturn:
    """stdout's reader went away (`mnemo-sea search … | head -1`): stop quietly with the shell's
    status for SIGPIPE, as `grep` or `cat` do, instead of reporting the write as an error. What
    is left to print goes to /dev/null, so the interpreter's last flush cannot fail again."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(code=EXIT_CLOSED_PIPE)


@contextlib.contextmanager
def guard(as_json: bool = False) -> Iterator[None]:
    """Turn every failure into one `error:` line (and with `as_json` a JSON error on stdout)
    and its exit code."""
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except BrokenPipeError:
        stop_on_closed_pipe()
    except Exception as e:
        typed = isinstance(e, CliError | OSError | MnemoError)
        if not typed and os.environ.get("MNEMO_DEBUG") == "1":
            raise
        fail(as_cli_error(e), as_json)


def guarded(command: Callable[P, None]) -> Callable[P, None]:
    """`command` run under `guard()`: for commands that take no shared options (eval, bench)."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        with guard(as_json=bool(kwargs.get("as_json", False))):
            command(*args, **kwargs)

    return run


class _QuietOnClosedPipe:
    """Runs a command (or every command below a group) with no principal acting yet, stops
    quietly when stdout's reader goes away (`stop_on_closed_pipe`), and names the extra to
    install when the command needs one the install lacks (`serve` on the slim set)."""

    def invoke(self, ctx: Context) -> Any:
        ACTING.set(None)  # a command run in this process before (a test's) does not act for this one
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except BrokenPipeError:
            stop_on_closed_pipe()
        except ModuleNotFoundError as e:
            sub = ctx.invoked_subcommand  # set when a group's command failed on an import at its top
            missing = extra_missing(e, f"`{ctx.command_path}{f' {sub}' if sub else ''}`")
            if missing is None:
                raise
            fail(as_cli_error(missing), bool(ctx.params.get("as_json")))


class OneLineErrorsCommand(_QuietOnClosedPipe, TyperCommand):
    """Usage mistakes (missing argument, bad option value) as one `error:` line, exit 2."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        as_json = "--json" in args  # before parsing, which consumes the list
        try:
            return super().parse_args(ctx, args)
        except UsageError as e:
            fail(CliError(e.format_message(), EXIT_USAGE, code="usage"), as_json)


class OneLineErrorsGroup(_QuietOnClosedPipe, TyperGroup):
    """An unknown subcommand as one `error:` line, exit 2."""

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        as_json = "--json" in args
        try:
            return super().resolve_command(ctx, args)
        except UsageError as e:
            fail(CliError(e.format_message(), EXIT_USAGE, code="usage"), as_json)


def emit(report: dict[str, Any], as_json: bool) -> None:
    """The report as JSON, or for people: who acts first (tenant, subject, roles; `ACTING`), then
    a line per field; a list of records as a table, a record of counts as `name=value` pairs."""
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    who = ACTING.get()
    if who is not None:
        typer.echo(acting(who))
    for key, value in report.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            typer.echo(f"{key}:")
            typer.echo(table(value, indent="  "))
        elif isinstance(value, dict) and all(not isinstance(v, dict | list) for v in value.values()):
            typer.echo(f"{key}: " + (", ".join(f"{k}={shown(v)}" for k, v in value.items()) or "—"))
        else:
            typer.echo(f"{key}: {shown(value)}")


def acting(principal: Principal) -> str:
    """Who a command acts as, for the first line of its report: the answer depends on it."""
    roles = ", ".join(sorted(r.value for r in principal.roles))
    clearance = principal.clearance.name.lower()
    return f"as {principal.subject} ({roles}, clearance {clearance}) in tenant {principal.tenant_id}"


def table(rows: list[dict[str, Any]], *, indent: str = "") -> str:
    """Records as aligned columns (the keys of the first, in order, then any others), each value
    `shown` on one line; cells are cut at 80 characters but in the last column, which is left
    whole (a reason, a message: what the row is read for)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    last = len(columns) - 1
    cells = [[_cell(row.get(c), whole=n == last) for n, c in enumerate(columns)] for row in rows]
    widths = [max(len(c), *(len(r[n]) for r in cells)) for n, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(indent + line for line in lines)


def _cell(value: Any, *, whole: bool = False) -> str:
    text = " ".join(shown(value).split())
    return text if whole or len(text) <= 80 else text[:79] + "…"


def shown(value: Any) -> str:
    """A value for people: nested data as JSON, and no value as `—`, never `None`."""
    if value is None:
        return "—"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]
