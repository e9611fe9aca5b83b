"""`session record|archive|live|recover|list`: tool results of a session (and, from
mnemo_sea.cli.context, `session context` and `session task-state`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import CliError, JsonOpt, emit
from mnemo_sea.cli.target import (
    LimitOpt,
    Target,
    add_command,
    add_group,
    check_limit,
    open_archive,
    open_mnemo,
)
from mnemo_sea.system.json_ready import plain


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
    with open_mnemo(target) as mnemo:
        result = mnemo.record(
            principal,
            session,
            tool,
            data,
            policy_class=policy_class,
            sensitivity=sensitivity,
            media_type=media_type,
        )
    emit(plain(result), as_json)


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
    with open_mnemo(target) as mnemo:
        receipt = mnemo.archive_results(principal, session, batch, idempotency_key=idempotency_key)
    emit(plain(receipt), as_json)


def session_live(
    target: Target,
    session: Annotated[str, typer.Argument(help="session id")],
    as_json: JsonOpt = False,
) -> None:
    """The session's working context: live results in envelopes, archived ones as stubs."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
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
    emit({"session_id": view.session_id, "items": items, "text": view.text}, as_json=True)


def session_recover(
    target: Target,
    session: Annotated[str, typer.Argument(help="session id")],
    result_id: Annotated[str, typer.Argument(help="the result to recover, e.g. r3")],
    as_json: JsonOpt = False,
) -> None:
    """The exact original (hash-checked), appended to the session as historical data."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        recovered = mnemo.recover(principal, session, result_id)
    if not as_json:
        typer.echo(recovered.rendered)
        return
    emit(
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


def session_list(target: Target, limit: LimitOpt = 1000, as_json: JsonOpt = False) -> None:
    """The tenant's sessions, oldest first, with their result counts (a reader sees its own)."""
    principal = target.principal()
    with open_archive(target) as archive:
        found = archive.list_sessions(principal, limit=check_limit(limit))
    if as_json:
        emit({"sessions": plain(found)}, as_json=True)
        return
    typer.echo(f"{len(found)} session(s)")
    for info in found:
        typer.echo(
            f"{info.session_id}  owner {info.owner}  {info.results} result(s): {info.live} live, "
            f"{info.archived} archived  created {info.created_at.isoformat()}"
        )


def register(app: typer.Typer) -> None:
    from mnemo_sea.cli import context

    session = add_group(
        app,
        "session",
        "Tool results of a session: record, archive, live view, recover, list; its working context "
        "under a token budget and its task state.",
    )
    add_command(session, "record", session_record)
    add_command(session, "archive", session_archive)
    add_command(session, "live", session_live)
    add_command(session, "recover", session_recover)
    add_command(session, "list", session_list)
    context.register(session)
