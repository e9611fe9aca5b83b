"""`fsck`, `audit verify|anchor|events` and `eval citations`: checks of a data folder's consistency,
its audit chain (and its events, read), and an answer's citations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import EXIT_INTEGRITY, EXIT_PROBLEMS, CliError, JsonOpt, emit, table
from mnemo_sea.cli.receipt_files import read_json
from mnemo_sea.cli.target import Target, add_command, add_group, open_archive, open_mnemo
from mnemo_sea.system.receipt_json import anchor_from_dict, anchor_to_dict


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

    with open_mnemo(target) as mnemo:
        compacted = mnemo.compact_index() if compact else None
        report = run_fsck(mnemo, repair=repair)
    out = report.to_dict()
    if compacted is not None:
        out["compacted_points_kept"] = compacted
    emit(out, as_json)
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
    anchors = [anchor_from_dict(read_json(path)) for path in anchor or ()]
    with open_archive(target) as archive:
        report = archive.verify_audit(principal, anchors)
    emit(
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
    with open_archive(target) as archive:
        made = archive.audit_anchor(principal)
    data = anchor_to_dict(made)
    out.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    emit({**data, "anchor": str(out)} if as_json else {"anchored": made.seq, "anchor": str(out)}, as_json)


def audit_events(
    target: Target,
    after_seq: Annotated[int, typer.Option(min=0, help="the last seq already read (0: from the start)")] = 0,
    # 999: one more is read to know whether more remain, and the archive answers 1,000 at most.
    limit: Annotated[int, typer.Option(min=1, max=999, help="events to print")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """The tenant's audit events after --after-seq, oldest first (admin): who did what to which
    record, and when. Pass the last seq printed as the next --after-seq to read on."""
    from mnemo_sea.system.json_ready import json_ready

    principal = target.principal()
    with open_archive(target) as archive:
        events = archive.audit_events(principal, after_seq=after_seq, limit=limit + 1)
    more = len(events) > limit
    events = events[:limit]
    following = events[-1].seq if more else None
    if as_json:
        emit({"events": json_ready(events), "next_after_seq": following}, as_json=True)
        return
    typer.echo(f"{len(events)} audit event(s) of tenant {principal.tenant_id}, read by {principal.subject}")
    for e in events:
        typer.echo(f"{e.seq:>6}  {e.at.isoformat()}  {e.actor}  {e.action}  {e.target}")
    if following is not None:
        typer.echo(f"more: --after-seq {following}")


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
    with open_archive(target) as archive:
        report = check_answers(archive, principal, answers)
    out = report.to_dict()
    if as_json:
        emit(out, as_json=True)
        return
    # For people: the totals, then one row per citation with its verdict and why.
    emit({k: out[k] for k in ("answers", "total", "ok", "precision", "counts")}, False)
    rows = [
        {
            "line": answer["line"],
            "answer": answer["id"],
            "cites": (c.get("citation") or {}).get("evidence_id"),
            "version": c["version_checked"],
            "verdict": c["verdict"],
            "why": c["reason"],
        }
        for answer in out["results"]
        for c in answer["citations"]
    ]
    if rows:
        typer.echo(table(rows))


def register(app: typer.Typer, eval_app: typer.Typer) -> None:
    add_command(app, "fsck", fsck)
    audit = add_group(app, "audit", "The hash-chained audit log.")
    add_command(audit, "verify", audit_verify)
    add_command(audit, "anchor", audit_anchor)
    add_command(audit, "events", audit_events)
    add_command(eval_app, "citations", eval_citations)
