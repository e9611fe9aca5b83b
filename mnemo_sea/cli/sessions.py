"""`session record|archive|live|recover|curate|recall|list`: tool results of a session (and, from
mnemo_sea.cli.context, `session context` and `session task-state`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mnemo_sea.archive import DEFAULT_AROUND, ArchiveTarget
from mnemo_sea.cli.output import CliError, JsonOpt, acting, emit, table
from mnemo_sea.cli.target import (
    IdempotencyKeyOpt,
    LimitOpt,
    SessionIdArg,
    Target,
    add_command,
    add_group,
    check_limit,
    open_archive,
    open_mnemo,
    parse_as_of,
)
from mnemo_sea.curation.policy import CurationPolicy
from mnemo_sea.system.json_ready import content_fields, json_ready
from mnemo_sea.system.json_text import parse_json

if TYPE_CHECKING:
    from mnemo_sea.rest.models import RecallOut


def _arguments(value: str | None) -> dict[str, Any] | None:
    """`--arguments`: the tool call's arguments as a JSON object."""
    if value is None:
        return None
    try:
        parsed = parse_json(value, "--arguments")
    except json.JSONDecodeError as e:
        raise CliError(f"--arguments: not JSON ({e})") from None
    if not isinstance(parsed, dict):
        raise CliError(f"--arguments: must be a JSON object, not a {type(parsed).__name__}")
    return parsed


def session_record(
    target: Target,
    session_id: SessionIdArg,
    tool_name: Annotated[str, typer.Argument(help="the tool that produced the result")],
    content: Annotated[str | None, typer.Option(help="the result's text")] = None,
    file: Annotated[Path | None, typer.Option(help="read the result's bytes from this file")] = None,
    arguments: Annotated[
        str | None, typer.Option(help="the arguments the tool was called with, a JSON object: '{\"q\": 1}'")
    ] = None,
    media_type: Annotated[
        str | None,
        typer.Option(
            help="e.g. application/json; default: text/plain for --content, detected for --file "
            "(UTF-8 text is text, typed by its extension; other bytes by extension or "
            "application/octet-stream)"
        ),
    ] = None,
    observed_at: Annotated[
        str | None, typer.Option(help="when the tool produced it (ISO-8601 with time zone); default now")
    ] = None,
    sensitivity: Annotated[
        str, typer.Option(help="public | internal | confidential | restricted")
    ] = "internal",
    policy_class: Annotated[
        str, typer.Option(help="e.g. default, inventory, vet_approval (protected)")
    ] = "default",
    owner: Annotated[
        str | None, typer.Option(help="the person the session is about (default: the caller)")
    ] = None,
    idempotency_key: IdempotencyKeyOpt = None,
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
    args = _arguments(arguments)
    when = parse_as_of(observed_at, "--observed-at")
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        result = mnemo.record(
            principal,
            session_id,
            tool_name,
            data,
            arguments=args,
            media_type=media_type,
            observed_at=when,
            sensitivity=sensitivity,
            policy_class=policy_class,
            owner=owner,
            idempotency_key=idempotency_key,
        )
    emit(json_ready(result), as_json)


def _targets(pairs: list[str]) -> list[ArchiveTarget]:
    out = []
    for pair in pairs:
        rid, sep, note = pair.partition("=")
        if not sep:
            raise CliError(f"{pair!r}: write each target as rN=note (e.g. r3='raw log, 40 KB, no errors')")
        out.append(ArchiveTarget(rid.strip(), note))
    return out


def session_archive(
    target: Target,
    session_id: SessionIdArg,
    targets: Annotated[list[str], typer.Argument(help="rN=note ... (the whole batch or nothing)")],
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set results aside with a note each; all or nothing (exit 2 lists every rejected target;
    exit 5 when every one was already archived)."""
    batch = _targets(targets)
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        receipt = mnemo.archive_results(principal, session_id, batch, idempotency_key=idempotency_key)
    emit(json_ready(receipt), as_json)


def session_live(target: Target, session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
    """The session's working context: live results in envelopes, archived ones as stubs."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        view = mnemo.live_view(principal, session_id)
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
            "superseded_by": item.superseded_by,
            "rendered": item.rendered,
        }
        for item in view.items
    ]
    emit({"session_id": view.session_id, "items": items, "text": view.text}, as_json=True)


def session_show(
    target: Target,
    session_id: SessionIdArg,
    result_id: Annotated[str, typer.Argument(help="the result to show, e.g. r3")],
    raw: Annotated[
        bool, typer.Option(help="write only its exact bytes to stdout (`> file` gives them back)")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """One result and what it shows (its hash-checked original; an excerpt copy's excerpt),
    changing nothing: `recover` is what appends a copy to the session, this only looks. An
    archived original needs the agent role, as recover does."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        result, content = mnemo.get_result(principal, session_id, result_id, with_content=True)
    assert content is not None  # with_content: the bytes, or Forbidden
    if raw:
        sys.stdout.buffer.write(content)
        sys.stdout.buffer.flush()
        return
    if as_json:
        emit({"result": json_ready(result), **content_fields(content)}, as_json=True)
        return
    note = f"; note: {result.note}" if result.note else ""
    typer.echo(acting(principal))
    typer.echo(
        f"{result.result_id} of {result.session_id}: {result.tool_name}, {result.state}, observed "
        f"{result.observed_at.isoformat()}, {result.size} bytes, sha256 {result.content_sha256}{note}"
    )
    try:
        typer.echo(content.decode("utf-8"), nl=not content.endswith(b"\n"))
    except UnicodeDecodeError:
        typer.echo(f"(binary, {len(content)} bytes, {result.media_type}: --raw writes them)")


def session_recover(
    target: Target,
    session_id: SessionIdArg,
    result_id: Annotated[str, typer.Argument(help="the result to recover, e.g. r3")],
    lines: Annotated[
        tuple[int, int] | None,
        typer.Option(
            help="only lines FIRST LAST of the original (from 1, both included)", show_default=False
        ),
    ] = None,
    byte_range: Annotated[
        tuple[int, int] | None,
        typer.Option(
            help="only bytes START END of the original (from 0, END not included)", show_default=False
        ),
    ] = None,
    match: Annotated[
        str | None, typer.Option(help="only the line(s) holding this text (exact, else ignoring case)")
    ] = None,
    around: Annotated[int, typer.Option(help="with --match: lines of context on each side")] = DEFAULT_AROUND,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The exact original (hash-checked), appended to the session as historical data; with one of
    --lines, --byte-range or --match, only that excerpt of it (checked against the whole original)."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        recovered = mnemo.recover(
            principal,
            session_id,
            result_id,
            lines=lines,
            byte_range=byte_range,
            match=match,
            around=around,
            idempotency_key=idempotency_key,
        )
    if not as_json:
        typer.echo(recovered.rendered)
        return
    emit(
        {
            "session_id": session_id,
            "recovered": recovered.original.result_id,
            "appended": recovered.appended.result_id,
            "content_sha256": recovered.original.content_sha256,
            "observed_at": recovered.original.observed_at.isoformat(),
            "size": recovered.original.size,
            "excerpt": None if recovered.appended.excerpt is None else json_ready(recovered.appended.excerpt),
            "media_type": recovered.original.media_type,
            "staleness_warning": recovered.staleness_warning,
            **content_fields(recovered.content),
            "rendered": recovered.rendered,
        },
        as_json=True,
    )


def session_curate(
    target: Target,
    session_id: SessionIdArg,
    budget_tokens: Annotated[
        int, typer.Option(help="the tokens the older live results (not the newest) should fit in")
    ] = CurationPolicy.budget_tokens,
    large_result_tokens: Annotated[
        int, typer.Option(help="a live result this large is archived once newer ones followed it")
    ] = CurationPolicy.large_result_tokens,
    keep_recent: Annotated[
        int, typer.Option(help="the newest results always stay")
    ] = CurationPolicy.keep_recent,
    need: Annotated[str | None, typer.Option(help="what the next step needs: recalled first")] = None,
    around: Annotated[
        int, typer.Option(help="with --need: lines of context around the line found")
    ] = DEFAULT_AROUND,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The automatic policy: set aside large results newer ones followed and, past the budget, the
    oldest, each with an automatic note; never protected classes or the newest, and a recovered
    copy only once the task state cites it. With --need, first bring back only the excerpt that
    holds it."""
    # Imported here, before anything is written: the REST models cost about a tenth of the
    # command line's start-up (pydantic builds them), and only this command and `session recall`
    # print them.
    from mnemo_sea.rest.models import CurationOut

    principal = target.principal()
    with open_mnemo(target) as mnemo:
        report = mnemo.curate(
            principal,
            session_id,
            budget_tokens=budget_tokens,
            large_result_tokens=large_result_tokens,
            keep_recent=keep_recent,
            need=need,
            around=around,
            idempotency_key=idempotency_key,
        )
    out = CurationOut.of(report)
    if as_json:
        emit(out.model_dump(mode="json"), as_json=True)
        return
    if out.recall is not None:
        typer.echo(_recall_line(out.recall))
    for a in out.archived:
        typer.echo(f"archived {a.result_id} ({a.reason}, {a.tokens} tokens): {a.note.splitlines()[0]}")
    typer.echo(f"live results: {out.live_tokens_before} -> {out.live_tokens_after} tokens")


def session_recall(
    target: Target,
    session_id: SessionIdArg,
    query: Annotated[str, typer.Argument(help="what is needed, in words, e.g. 'p99 latency of test_23'")],
    around: Annotated[int, typer.Option(help="lines of context around the line found")] = DEFAULT_AROUND,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Find the line of the session's results that holds a need and bring back only its excerpt;
    not_found (exit 0, nothing appended) when no line holds it."""
    from mnemo_sea.rest.models import RecallOut  # see session_curate

    principal = target.principal()
    with open_mnemo(target) as mnemo:
        found = RecallOut.of(
            mnemo.recall(principal, session_id, query, around=around, idempotency_key=idempotency_key)
        )
    if as_json:
        emit(found.model_dump(mode="json"), as_json=True)
        return
    typer.echo(_recall_line(found))
    if found.recovered is not None:
        typer.echo(found.recovered.rendered)


def _recall_line(found: RecallOut) -> str:
    if found.status == "not_found":
        return f"not found: no line of {', '.join(found.checked) or 'any result'} holds {found.query!r}"
    first, last = found.lines or (0, 0)
    where = f"{found.result_id} lines {first}-{last}"
    if found.status == "in_view":
        return f"in view: {where}"
    if found.status == "ambiguous":
        return (
            f"ambiguous: {where} hold {found.query!r} alike, too many to bring back; say what singles it out"
        )
    appended = found.recovered.appended.result_id if found.recovered is not None else "?"
    return f"recovered: {where}, appended as {appended}"


def session_list(target: Target, limit: LimitOpt = 1000, as_json: JsonOpt = False) -> None:
    """The tenant's sessions, oldest first, with their result counts (a reader sees its own)."""
    principal = target.principal()
    with open_archive(target) as archive:
        found = archive.list_sessions(principal, limit=check_limit(limit))
    if as_json:
        emit({"sessions": json_ready(found)}, as_json=True)
        return
    typer.echo(acting(principal))
    typer.echo(f"{len(found)} session(s)")
    if found:
        typer.echo(
            table([dataclasses.asdict(info) | {"created_at": info.created_at.isoformat()} for info in found])
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
    add_command(session, "show", session_show)
    add_command(session, "recover", session_recover)
    add_command(session, "curate", session_curate)
    add_command(session, "recall", session_recall)
    add_command(session, "list", session_list)
    context.register(session)
