"""`evidence get|history|retract` and `summary create|list|get`: versioned evidence records and
the derived summaries of existing sources.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mnemo_sea.cli.output import CliError, JsonOpt, emit
from mnemo_sea.cli.target import (
    IdempotencyKeyOpt,
    LimitOpt,
    Target,
    add_command,
    add_group,
    check_limit,
    open_archive,
    open_mnemo,
    parse_as_of,
)
from mnemo_sea.system.json_ready import content_fields, json_ready

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
    when = parse_as_of(as_of)
    principal = target.principal()
    with open_archive(target) as archive:
        record, content = archive.get_evidence(
            principal, evidence_id, version=version, as_of=when, with_content=True
        )
    assert content is not None
    # The original as REST's GET /v1/evidence answers it: text, or base64 for binary bytes.
    original = content_fields(content)
    data: dict[str, Any] = json_ready(record) | {"size": len(content)}
    if as_json:
        emit(data | original, as_json=True)
        return
    emit(data, as_json=False)
    typer.echo("---")
    text = original["content"]
    typer.echo(text if text is not None else f"[binary original: {len(content)} bytes, {record.media_type}]")


def evidence_history(
    target: Target,
    evidence_id: Annotated[str, typer.Argument(help="the record")],
    as_json: JsonOpt = False,
) -> None:
    """Every version of a record, oldest first (superseded and retracted ones too)."""
    principal = target.principal()
    with open_archive(target) as archive:
        versions = archive.evidence_history(principal, evidence_id)
    if as_json:
        emit({"evidence_id": evidence_id, "versions": json_ready(versions)}, as_json=True)
        return
    for rec in versions:
        ended = f", ended {rec.ended_at.isoformat()}" if rec.ended_at else ""
        typer.echo(f"v{rec.version} {rec.status}: recorded {rec.recorded_at.isoformat()}{ended}")


def evidence_retract(
    target: Target,
    evidence_id: Annotated[str, typer.Argument(help="the record")],
    reason: Annotated[str, typer.Option(help="why it is withdrawn (kept in the audit log)")],
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Withdraw a record's current version: it stays in history, no longer answers search, and
    citations of it say `retracted` (exit 5 if it has no current version)."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        record = mnemo.retract(principal, evidence_id, reason, idempotency_key=idempotency_key)
    emit(json_ready(record), as_json)


# ---- summaries -----------------------------------------------------------------------------------


def summary_create(
    target: Target,
    text: Annotated[str, typer.Argument(help="the summary's text")],
    derived_from: Annotated[
        list[str],
        typer.Option(
            "--derived-from",
            "--from",
            help="a source it summarises: evidence:ID[@V] or result:SESSION/rN (repeatable)",
        ),
    ],
    trace_ref: Annotated[str | None, typer.Option(help="where it came from (e.g. a run id)")] = None,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Store a derived summary of existing sources; searchable, always labelled derived."""
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        summary = mnemo.create_summary(
            principal, text, derived_from, trace_ref=trace_ref, idempotency_key=idempotency_key
        )
    emit(json_ready(summary), as_json)


def summary_list(target: Target, limit: LimitOpt = 1000, as_json: JsonOpt = False) -> None:
    """The summaries you may read, oldest first."""
    principal = target.principal()
    with open_archive(target) as archive:
        found = archive.list_summaries(principal, limit=check_limit(limit))
    if as_json:
        emit({"summaries": json_ready(found)}, as_json=True)
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
    with open_archive(target) as archive:
        summary = archive.get_summary(principal, summary_id)
    emit(json_ready(summary), as_json)


def register(app: typer.Typer) -> None:
    evidence = add_group(app, "evidence", "Evidence records: read a version, its history, retract.")
    add_command(evidence, "get", evidence_get)
    add_command(evidence, "history", evidence_history)
    add_command(evidence, "retract", evidence_retract)
    summary = add_group(app, "summary", "Derived summaries of existing sources: create, list, get.")
    add_command(summary, "create", summary_create)
    add_command(summary, "list", summary_list)
    add_command(summary, "get", summary_get)
