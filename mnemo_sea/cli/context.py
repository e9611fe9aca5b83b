"""CLI commands for a session's working context and task state: `session context` and
`session task-state show|set|history`, added to the `session` group by mnemo_sea.cli.sessions.

They use the shared machinery of mnemo_sea.cli.target and mnemo_sea.cli.output (the shared
options, the data folder, the one exit-code table, `--json` errors on stdout), so a refused task
state write (TaskStateRejected) and a context whose
pinned part is over the budget (ContextOverBudget), both invalid input, exit 2 like every other
rejected input, a stale expected version exits 5 (a conflict, REST's 409), a missing session 3.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mnemo_sea.archive import TaskStateRejected, UpdateTaskStateOp
from mnemo_sea.cli.knowledge import KindsOpt
from mnemo_sea.cli.output import CliError, JsonOpt, emit, shown
from mnemo_sea.cli.receipt_files import read_json
from mnemo_sea.cli.target import (
    IdempotencyKeyOpt,
    SessionIdArg,
    Target,
    add_command,
    add_group,
    open_archive,
    open_mnemo,
)
from mnemo_sea.context.assembler import DEFAULT_CANDIDATE_MIN_TOKENS
from mnemo_sea.system.json_ready import json_ready
from mnemo_sea.system.json_text import parse_json

if TYPE_CHECKING:
    from mnemo_sea.archive import TaskState
    from mnemo_sea.context import AssembledContext

# What a `task-state set` file may hold: the record's fields (the keyword arguments of
# Mnemo.update_task_state), nothing else.
UPDATE_FIELDS = tuple(UpdateTaskStateOp.model_fields)


# ---- session context -----------------------------------------------------------------------------


def _read_text(path: Path, option: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{option} {path}: no such file") from None
    except UnicodeDecodeError as e:
        raise CliError(f"{option} {path}: not UTF-8 text ({e})") from None


def _tools(path: Path | None) -> list[Any] | None:
    if path is None:
        return None
    tools = read_json(path)
    if not isinstance(tools, list):
        raise CliError(
            f"--tools-file {path}: must hold a JSON list of tool definitions (objects or text), "
            f"not a {type(tools).__name__}"
        )
    return tools


def _ids(ids: list[str]) -> str:
    return ", ".join(ids) if ids else "—"


def _show_context(ctx: AssembledContext) -> None:
    data = ctx.to_dict(with_text=False)
    exact = "exact" if ctx.exact else "estimated"
    typer.echo(
        f"session {ctx.session_id}: {data['used_tokens']} of {ctx.budget_tokens} tokens used "
        f"({data['pinned_tokens']} pinned), {data['free_tokens']} free, output reserve "
        f"{ctx.output_reserve}; {ctx.tokenizer} ({exact})"
    )
    version = ctx.task_state_version
    typer.echo("task state: none yet" if version is None else f"task state: version {version}")
    typer.echo("")
    width = max(len(name) for name in ctx.totals)
    typer.echo(f"{'component':<{width}}  tokens")
    for name, tokens in ctx.totals.items():
        typer.echo(f"{name:<{width}}  {tokens:>6}")
    typer.echo("")
    typer.echo(f"segments ({len(ctx.segments)}), in the order sent:")
    for n, seg in enumerate(ctx.segments, start=1):
        pinned = "pinned" if seg.pinned else f"p{seg.priority}"
        shown = f"{n:>3}. {seg.component:<12} {seg.kind:<17} {seg.tokens:>6} tokens  {pinned:<6}"
        typer.echo(f"{shown}  {_ids(list(seg.ids))}")
    typer.echo("")
    typer.echo(f"left out ({len(ctx.left_out)}):" if ctx.left_out else "left out: none")
    for x in ctx.left_out:
        typer.echo(f"  {_ids(list(x.ids))} {x.kind}, {x.tokens} tokens: {x.reason}")
    typer.echo(
        f"archive candidates ({len(ctx.candidates)}):" if ctx.candidates else "archive candidates: none"
    )
    for c in ctx.candidates:
        copy = f", a recovered copy of {c.recovered_from}" if c.recovered_from else ""
        left = ", left out" if c.left_out else ""
        typer.echo(f"  {c.result_id} {c.tool_name}, {c.tokens} tokens{copy}{left}")
    if ctx.left_out or ctx.candidates:
        # The assembler proposes; archiving stays the agent's (or the user's) decision.
        typer.echo(
            f"nothing was archived; to free room: mnemo-sea session archive {ctx.session_id} rN='note' ..."
        )


def session_context(
    target: Target,
    session_id: SessionIdArg,
    budget_tokens: Annotated[
        int,
        typer.Option(
            "--budget-tokens", "--budget", help="the model's window in tokens (context + output reserve)"
        ),
    ],
    output_reserve: Annotated[
        int | None,
        typer.Option(
            "--output-reserve",
            "--reserve",
            help="tokens kept free for the answer (default: min(4096, budget/4))",
        ),
    ] = None,
    query: Annotated[str | None, typer.Option(help="retrieve evidence for this into the context")] = None,
    evidence_limit: Annotated[int, typer.Option(help="the most evidence hits to retrieve")] = 8,
    kinds: KindsOpt = None,
    candidate_min_tokens: Annotated[
        int, typer.Option(help="propose live results of at least this many tokens as archive candidates")
    ] = DEFAULT_CANDIDATE_MIN_TOKENS,
    instructions_file: Annotated[
        Path | None,
        typer.Option("--instructions-file", help="system instructions (UTF-8 text), pinned first"),
    ] = None,
    tools_file: Annotated[
        Path | None,
        typer.Option("--tools-file", help="a JSON list of tool definitions (objects or text), pinned"),
    ] = None,
    text: Annotated[bool, typer.Option("--text", help="print the assembled text only")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The session's working context under a token budget, and its accounting: tokens per
    component, each segment (kind, ids, tokens, pinned), what was left out and why, and live
    results worth archiving. Reads only: nothing is archived. Pinned segments (instructions,
    tools, constraints, the task state, protected results) are never cut; when they alone exceed
    the budget it exits 2 naming the sizes (`context_over_budget`). --json prints the whole
    accounting with every segment's text; --text prints only what the model receives."""
    instructions = "" if instructions_file is None else _read_text(instructions_file, "--instructions-file")
    tools = _tools(tools_file)
    principal = target.principal()
    with open_mnemo(target) as mnemo:
        ctx = mnemo.context(
            principal,
            session_id,
            budget_tokens=budget_tokens,
            output_reserve=output_reserve,
            instructions=instructions,
            tools=tools,
            query=query,
            evidence_limit=evidence_limit,
            kinds=kinds,
            candidate_min_tokens=candidate_min_tokens,
        )
    if as_json:
        emit(ctx.to_dict(), as_json=True)
    elif text:
        typer.echo(ctx.text, nl=False)
    else:
        _show_context(ctx)


# ---- session task-state --------------------------------------------------------------------------


def _items(title: str, items: list[str]) -> None:
    typer.echo(f"{title}:")
    for item in items or ["(none)"]:
        typer.echo(f"  - {item}")


def _show_state(state: TaskState) -> None:
    typer.echo(
        f"task state of {state.session_id}, version {state.version} ({state.status}), written "
        f"{state.created_at.isoformat()} by {state.created_by}, {state.sensitivity.name.lower()}"
    )
    typer.echo(f"label: {state.label}")
    typer.echo(f"goal: {state.goal}")
    _items("constraints", list(state.constraints))
    facts = []
    for f in state.confirmed:
        cited = f.evidence_id if f.version is None or "@" in f.evidence_id else f"{f.evidence_id}@{f.version}"
        settles = f" (resolves: {f.resolves})" if f.resolves else ""
        facts.append(f"{f.fact} [{cited}]{settles}")
    _items("confirmed", facts)
    _items("unresolved", list(state.unresolved))
    _items("pending operations", list(state.pending_operations))
    _items("released", [f"{r.item} ({r.kind}): {r.reason}" for r in state.released])
    typer.echo(f"trace_ref: {shown(state.trace_ref)}")


def task_state_show(
    target: Target,
    session_id: SessionIdArg,
    version: Annotated[int | None, typer.Option(help="this version (default: the current one)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The session's task state: the current version or --version N. A session without one yet
    prints so (JSON `null`, as REST's 200 null); a missing session or version exits 3."""
    principal = target.principal()
    # The archive alone: task state is not indexed, so no index lock and no model.
    with open_archive(target) as archive:
        state = archive.task_state(principal, session_id, version=version)
    if as_json:
        typer.echo(json.dumps(None if state is None else json_ready(state), ensure_ascii=False, indent=2))
    elif state is None:
        typer.echo(f"session {session_id} has no task state yet")
    else:
        _show_state(state)


def _update(file: Path) -> dict[str, Any]:
    """The update a `--file` holds (`-`: stdin), its keys checked: a misspelt one is never dropped."""
    if str(file) == "-":
        try:
            data = parse_json(sys.stdin.read(), "--file -")
        except json.JSONDecodeError as e:
            raise CliError(f"--file -: stdin is not JSON ({e})") from None
    else:
        data = read_json(file)
    if not isinstance(data, dict):
        raise CliError(
            f"--file {file}: must hold a JSON object with the update's fields ({', '.join(UPDATE_FIELDS)})"
        )
    unknown = sorted(str(k) for k in data if k not in UPDATE_FIELDS)
    if unknown:
        raise CliError(
            f"--file {file}: unknown field(s) {', '.join(unknown)}; an update has {', '.join(UPDATE_FIELDS)}",
            detail={"unknown": unknown},
        )
    if "goal" not in data:
        raise CliError(f"--file {file}: the update must give its goal (every version states it)")
    return data


def task_state_set(
    target: Target,
    session_id: SessionIdArg,
    file: Annotated[
        Path,
        typer.Option(
            "--file", help="a JSON object with goal, confirmed, unresolved, constraints, ... (`-`: stdin)"
        ),
    ],
    expected_version: Annotated[
        int | None,
        typer.Option(help="write only if this version is current (0: none yet); else exit 5"),
    ] = None,
    idempotency_key: IdempotencyKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the next version of the session's task state (the session is created on first use).

    The file is the whole next version: what it leaves out is dropped. It is refused whole
    (exit 2, `task_state_rejected`, every problem listed; nothing stored) when a constraint or an
    open item of the current version is dropped without a release reason or a confirmed fact
    that settles it with evidence, or a fact cites nothing readable. Confirmed facts are
    {fact, evidence_id, resolves?}, releases {item, reason}."""
    update = _update(file)
    if expected_version is not None:
        if "expected_version" in update:
            raise CliError("give expected_version in the file or --expected-version, not both")
        update["expected_version"] = expected_version
    principal = target.principal()
    with open_archive(target) as archive:
        try:
            state = archive.update_task_state(
                principal, session_id, **update, idempotency_key=idempotency_key
            )
        except TaskStateRejected as e:
            if not as_json:  # the error line names the codes; people also need the fixes
                for p in e.problems:
                    item = "" if p.get("item") is None else f" {p['item']!r}"
                    typer.echo(f"{p['field']}{item}: {p['problem']}: {p['message']}")
            raise
    if as_json:
        emit(json_ready(state), as_json=True)
        return
    _show_state(state)


def task_state_history(target: Target, session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
    """Every version of the session's task state, oldest first (versions above your clearance
    left out)."""
    principal = target.principal()
    with open_archive(target) as archive:
        versions = archive.task_state_history(principal, session_id)
    if as_json:
        emit({"session_id": session_id, "versions": json_ready(versions)}, as_json=True)
        return
    if not versions:
        typer.echo(f"session {session_id} has no task state yet")
    for s in versions:
        counts = (
            f"{len(s.confirmed)} confirmed, {len(s.unresolved)} unresolved, {len(s.constraints)} "
            f"constraint(s), {len(s.pending_operations)} pending, {len(s.released)} released"
        )
        written = f"{s.created_at.isoformat()} by {s.created_by}"
        typer.echo(f"v{s.version} {s.status}: {written}; goal: {s.goal} ({counts})")


def register(session: typer.Typer) -> None:
    """Add `context` and the `task-state` group to the `session` group."""
    add_command(session, "context", session_context)
    task_state = add_group(
        session, "task-state", "The session's task state: show a version, set the next one, list them."
    )
    add_command(task_state, "show", task_state_show)
    add_command(task_state, "set", task_state_set)
    add_command(task_state, "history", task_state_history)
