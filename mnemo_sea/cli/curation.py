"""`mnemo-sea eval context`: the context-curation experiment (issue 11) as a command.

Replays scripted traces under every arm (full history, window, summary, masking, reversible
archive scripted / heuristic / without notes), runs the safety gate once, and prints the table
(or the JSON with --json); --markdown and --chart write the table and the PNG chart. Progress
goes to stderr. Everything heavy is imported inside the command, so `mnemo-sea --help` stays fast.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any

import typer

from mnemo_sea.cli.output import EXIT_PROBLEMS, CliError, guarded


def _module(name: str, what: str) -> Any:
    try:
        return importlib.import_module(f"mnemo_sea.eval.curation.{name}")
    except ImportError as e:
        raise CliError(f"{what} needs mnemo_sea.eval.curation.{name}, which is not installed ({e})") from None


def _traces(path: Path | None, trace_set: str) -> list[Any]:
    if path is not None:
        return list(_module("trace_format", "--traces").load_traces(path))
    families = _module("families", f"--set {trace_set}")
    if trace_set in ("test", "all"):
        families.check_test_set()  # the frozen test set: refuses a regenerated trace that changed
    if trace_set == "dev":
        return list(families.dev_set())
    if trace_set == "test":
        return list(families.test_set())
    return [*families.dev_set(), *families.test_set()]


def eval_context(
    traces: Annotated[
        Path | None, typer.Option(help="a trace file or folder (context-trace/1); default: the shipped set")
    ] = None,
    trace_set: Annotated[str, typer.Option("--set", help="shipped traces: dev | test | all")] = "test",
    arms: Annotated[
        str | None, typer.Option(help="comma-separated arms (full is always run); default: all")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON report")] = False,
    timings: Annotated[
        bool, typer.Option("--timings", help="include wall-clock latencies (not reproducible)")
    ] = False,
    markdown: Annotated[Path | None, typer.Option(help="write the markdown tables here")] = None,
    chart: Annotated[Path | None, typer.Option(help="write a PNG of prompt tokens per turn here")] = None,
    chart_trace: Annotated[
        str | None, typer.Option(help="the trace to chart (default: the first F1 trace)")
    ] = None,
    tradeoff_chart: Annotated[
        Path | None,
        typer.Option(help="write a PNG of cost against loss, one panel per family, one point per arm"),
    ] = None,
    gate: Annotated[bool, typer.Option(help="run the safety gate")] = True,
    quiet: Annotated[bool, typer.Option(help="no progress on stderr")] = False,
) -> None:
    """The context-curation experiment: tokens, requests, missing evidence and citations per arm."""
    from mnemo_sea.eval.curation.arms import ArmParams, parse_arms
    from mnemo_sea.eval.curation.gates import run_gate
    from mnemo_sea.eval.curation.report import build_report, to_json, write_chart, write_tradeoff_chart
    from mnemo_sea.eval.curation.report import markdown as to_markdown
    from mnemo_sea.eval.curation.runner import replay_all

    if trace_set not in ("dev", "test", "all"):
        raise CliError(f"--set must be dev, test or all, not {trace_set!r}")

    def progress(message: str) -> None:
        if not quiet:
            typer.echo(message, err=True)

    params = ArmParams()
    chosen = parse_arms(arms, params)
    loaded = _traces(traces, trace_set)
    if not loaded:
        raise CliError("no traces to run")
    runs = replay_all(loaded, chosen, progress=progress)
    progress("safety gate")
    gate_report = run_gate() if gate else None
    label = str(traces.name) if traces is not None else trace_set
    report = build_report(runs, params=params, gate=gate_report, trace_set=label, timings=timings)
    table = to_markdown(report)
    if markdown is not None:
        markdown.write_text(table, encoding="utf-8")
    if chart is not None:
        try:
            shown = write_chart(report, chart, chart_trace)
        except ValueError as e:
            raise CliError(str(e)) from None
        progress(f"chart of {shown} written to {chart}")
    if tradeoff_chart is not None:
        write_tradeoff_chart(report, tradeoff_chart)
        progress(f"cost against loss written to {tradeoff_chart}")
    typer.echo(to_json(report) if as_json else table, nl=False)
    if gate_report is not None and not gate_report.passed:
        raise typer.Exit(code=EXIT_PROBLEMS)


def register(eval_app: typer.Typer) -> None:
    eval_app.command("context")(guarded(eval_context))
