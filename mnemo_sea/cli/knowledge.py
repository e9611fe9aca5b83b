"""`init`, `ingest` and `search`: a data folder, documents into it, and hybrid search over it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_sea.archive import (
    EvidenceInput,
    Forbidden,
    Principal,
    Role,
    Sensitivity,
)
from mnemo_sea.cli.output import (
    EXIT_FORBIDDEN,
    EXIT_PARTIAL,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CliError,
    JsonOpt,
    acting,
    as_cli_error,
    emit,
)
from mnemo_sea.cli.target import Target, add_command, open_mnemo, parse_as_of
from mnemo_sea.system.wiring.layout import ARCHIVE_FILE, INDEX_DIR

# `search --kinds` and `session context --kinds`: the records' `kinds`, one per option.
KindsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--kinds", "--kind", help="only this kind: knowledge, tool_result, memory, summary (repeatable)"
    ),
]

if TYPE_CHECKING:
    from mnemo_sea.system.mnemo import Mnemo


def init(target: Target, as_json: JsonOpt = False) -> None:
    """Create the data folder (SQLite archive, its deployment key `receipt.key` and the embedded
    index), or check an existing one (one whose key is lost is refused)."""
    folder = target.folder(must_exist=False)
    existed = (folder / ARCHIVE_FILE).is_file()
    with open_mnemo(target, create=True) as mnemo:
        model_id = mnemo.index.embedder.model_id
        key_id = mnemo.archive.receipt_key_id
    emit(
        {
            "data_dir": str(folder),
            "created": not existed,
            "archive": str(folder / ARCHIVE_FILE),
            "index": str(folder / INDEX_DIR),
            "embedder": model_id,
            "receipt_key": key_id,
        },
        as_json,
    )


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
    reactivate: Annotated[
        bool, typer.Option(help="store documents equal to a retracted version as current again")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Store documents as evidence (an edited document becomes a new version) and index them.

    Any number of documents, in batches of up to 1,000, each stored all or nothing. Every file
    and line is checked first: without --partial one bad one stores nothing (all are listed).
    A document whose content is that of a retracted version of its record is not brought back:
    without --partial the load is refused (each one listed, exit 5), with --partial it is left
    out and listed under `retracted`; --reactivate stores it as current on purpose. A --partial
    run that left anything out exits 8 once the rest is stored.
    If storing batch k fails (the store, not the input), batches before it stay stored and the
    report says which (exit code of the store's error).
    """
    from mnemo_sea.cli.bulk_ingest import ingest_in_batches
    from mnemo_sea.cli.ingest_bar import IngestBar
    from mnemo_sea.system.documents import load_documents

    folder = target.folder()
    principal = target.principal()
    # The bar from the start: reading the files and opening the index take seconds of their own.
    with IngestBar(quiet) as bar:
        # Read and validate every file before opening anything: a bad file changes nothing.
        loaded = load_documents(path, source=source, scope=scope, partial=partial, progress=bar.watching)
        _check_may_store(principal, loaded.items)
        with open_mnemo(target) as mnemo:
            items, retracted = _leave_out_retracted(mnemo, principal, loaded.items, partial, reactivate)
            outcome = ingest_in_batches(mnemo, principal, items, progress=bar.watching, reactivate=reactivate)
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
        "retracted": retracted,
    }
    if outcome.failure is None:
        emit(report | {"records": outcome.records} if as_json else report, as_json)
        # Files of other types (`skipped_files`) are not input left out: a folder may hold them.
        left_out = len(loaded.problems) + len(retracted)
        if partial and left_out:
            # The good part is stored; a script must still see that the run was not complete.
            raise CliError(
                f"--partial left out {left_out} bad document(s) or file(s) or retracted version(s) "
                "(listed in the report); the others are stored",
                EXIT_PARTIAL,
                reported=True,
            )
        return
    cause = as_cli_error(outcome.failure.error)
    failed = outcome.failure
    report["failed_batch"] = {
        "batch": failed.number,
        "documents": [failed.first + 1, failed.first + failed.count],
        "error": {"code": cause.code, "message": cause.message, "detail": cause.detail},
    }
    if not as_json:  # with --json the report travels in the error's detail
        emit(report, as_json=False)
    raise CliError(
        outcome.describe_failure(),
        cause.exit_code,
        code=cause.code,
        detail=report | {"records": outcome.records},
    )


def _leave_out_retracted(
    mnemo: Mnemo, principal: Principal, items: list[EvidenceInput], partial: bool, reactivate: bool
) -> tuple[list[EvidenceInput], list[dict[str, str]]]:
    """The documents to store, and those left out because their content is that of a retracted
    version (`evidence_id`, `message`). Checked over the whole load before any batch is stored,
    so the all-or-nothing default refuses it whole (RetractedContent, every one marked); the
    archive checks again as it writes, so a retraction made meanwhile holds too."""
    if reactivate:
        return items, []
    statuses = mnemo.archive.retracted_among(principal, items)
    if all(s.ok for s in statuses):
        return items, []
    if not partial:
        from mnemo_sea.archive import RetractedContent

        raise RetractedContent(
            statuses,
            "a retraction stands until the content changes: leave them out with --partial, or "
            "store them as current again with --reactivate",
        )
    kept = [item for item, s in zip(items, statuses, strict=True) if s.ok]
    return kept, [{"evidence_id": s.result_id, "message": s.message} for s in statuses if not s.ok]


def _figure(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _leg(rank: int | None, score: float | None, spec: str) -> str:
    """A leg's rank and score for people: `#3 12.41`; `—` for what that leg did not give (a
    dense score without a rank was computed for a hit only BM25 found)."""
    return f"{'—' if rank is None else f'#{rank}'} {_figure(score, spec)}"


def search(
    target: Target,
    query: Annotated[str, typer.Argument(help="what to look for")],
    limit: Annotated[int, typer.Option(help="hits to return")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid | bm25 | dense")] = "hybrid",
    kinds: KindsOpt = None,
    scopes: Annotated[
        list[str] | None, typer.Option("--scopes", "--scope", help="only this scope (repeatable)")
    ] = None,
    sources: Annotated[
        list[str] | None, typer.Option("--sources", "--source", help="only this source (repeatable)")
    ] = None,
    owners: Annotated[
        list[str] | None,
        typer.Option("--owners", "--owner", help="only hits about this person (repeatable)"),
    ] = None,
    as_of: Annotated[str | None, typer.Option(help="what was current then (ISO-8601 with time zone)")] = None,
    min_score: Annotated[
        float | None,
        typer.Option(
            help="leave out hits whose relevance (dense cosine, raised by a strong BM25 match) is below "
            "this, in [-1, 1]; a hit holding every query term is kept. Not with --mode bm25"
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Hybrid search in the principal's tenant; hits carry the exact text from the archive.

    Each hit shows its fused score (it orders the hits; rank based, not a relevance), each
    leg's rank and score (BM25; dense: the cosine) and its relevance, which --min-score applies to."""
    if mode not in ("hybrid", "bm25", "dense"):
        raise CliError(f"--mode: {mode!r} is not one of hybrid, bm25, dense")
    when = parse_as_of(as_of)
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        result = mnemo.search(
            principal,
            query,
            limit=limit,
            mode=mode,
            kinds=kinds,
            scopes=scopes,
            sources=sources,
            owners=owners,
            as_of=when,
            min_score=min_score,
        )
    failures = {"invalid": EXIT_USAGE, "forbidden": EXIT_FORBIDDEN, "unavailable": EXIT_UNAVAILABLE}
    if result.status in failures:
        raise CliError(f"search {result.status}: {result.reason}", failures[result.status])
    if as_json:
        emit(result.to_dict(), as_json=True)
        return
    typer.echo(acting(principal))
    typer.echo(f"status: {result.status} ({len(result.hits)} hits)")
    if result.pending_originals:
        typer.echo(f"({result.pending_originals} archived originals not yet searchable: still being indexed)")
    for n, hit in enumerate(result.hits, start=1):
        bm25, dense = _leg(hit.bm25_rank, hit.bm25_score, ".2f"), _leg(hit.dense_rank, hit.dense_score, ".3f")
        typer.echo(
            f"{n}. {hit.evidence_id} v{hit.version} [{hit.kind}] source {hit.source} · scope {hit.scope} · "
            f"locator {hit.locator}  score {hit.score:.4f} (bm25 {bm25}, dense {dense}) "
            f"relevance {_figure(hit.relevance, '.3f')}"
        )
        if hit.lines is not None and hit.byte_range is not None:
            first, last = hit.lines
            session_id, _, result_id = hit.locator.rpartition("/")
            typer.echo(
                f"   archived original, lines {first}-{last} (bytes {hit.byte_range[0]}-{hit.byte_range[1]});"
                f" bring them back: mnemo-sea session recover {session_id} {result_id} --lines {first} {last}"
            )
        typer.echo(f"   {' '.join(hit.snippet.split())[:300]}")


def register(app: typer.Typer) -> None:
    add_command(app, "init", init)
    add_command(app, "ingest", ingest)
    add_command(app, "search", search)
