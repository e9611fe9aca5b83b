"""The experiment's outputs: the JSON report, a markdown table and a PNG chart.

The JSON is deterministic: sorted keys, no paths, no wall-clock figures unless `timings` was
asked for (then they sit under the one `timings` key). Two runs on the same traces give the same
bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemo_sea.context.tokens import DEFAULT_ENCODING

from .arms import FULL, ArmParams
from .gates import GateReport
from .metrics import evaluate
from .runner import BUDGET_TOKENS, OUTPUT_RESERVE, TraceRun
from .targets import check_targets, targets_table

REPORT_FORMAT = "mnemo-sea/context-eval/1"


def build_report(
    runs: Sequence[TraceRun],
    *,
    params: ArmParams,
    gate: GateReport | None,
    trace_set: str,
    timings: bool = False,
) -> dict[str, Any]:
    report = evaluate(runs, timings=timings)
    report.update(
        {
            "format": REPORT_FORMAT,
            "set": trace_set,
            "tokenizer": DEFAULT_ENCODING,
            "budget_tokens": BUDGET_TOKENS,
            "output_reserve": OUTPUT_RESERVE,
            "parameters": params.to_dict(),
            "gate": None if gate is None else gate.to_dict(),
        }
    )
    report["targets"] = check_targets(report)
    return report


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def _ratio(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{(value - 1) * 100:+.1f}%"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def markdown_table(report: dict[str, Any], family: str | None = None) -> str:
    """One row per arm: final prompt, cumulative input, requests (each with its change against
    full history), archive/recover counts, missing rate, precision and the violations."""
    arms: dict[str, Any] = report["arms"] if family is None else report["families"][family]
    order = [a for a in report["arm_order"] if a in arms]
    lines = [
        "| arm | final prompt | vs full | cumulative input | vs full | requests | vs full "
        "| archive / recover / re-read | key evidence missing | citation precision | protected viol. "
        "| stale unwarned | injection leaks "
        "| unknown→definite | superseded cited |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm in order:
        a = arms[arm]
        vs = a["vs_full"]
        lines.append(
            f"| {arm} | {a['final_prompt_tokens']:,} | {_ratio(vs['final_prompt_tokens'])} "
            f"| {a['cumulative_input_tokens']:,} | {_ratio(vs['cumulative_input_tokens'])} "
            f"| {a['requests']:,} | {_ratio(vs['requests'])} "
            f"| {a['archive_calls']} / {a['recover_calls'] + a['recalled']} / {a['rereads']} "
            f"| {_pct(a['missing_rate'])} ({a['needs_missing']}/{a['needs']}) "
            f"| {_pct(a['citation_precision'])} ({a['citations_correct']}/{a['citations']}) "
            f"| {a['protected_violations']} | {a['stale_unwarned']} | {a['injection_leaks']} "
            f"| {a['unknown_definite']} | {a['superseded_cited']} |"
        )
    return "\n".join(lines) + "\n"


def markdown(report: dict[str, Any]) -> str:
    """The targets, the whole set's table, then one per family, then the gate."""
    parts: list[str] = []
    targets = report.get("targets")
    if targets is not None:
        controls = ", ".join(targets["controls"]) or "none"
        verdict = "met" if targets["met"] else "NOT met"
        parts += [
            f"## Targets: {verdict} (controls, not held to them: {controls})\n",
            targets_table(targets),
            "\n",
        ]
    parts += [f"## All traces ({report['set']})\n", markdown_table(report)]
    for family in sorted(report["families"]):
        parts += [f"\n### {family}\n", markdown_table(report, family)]
    gate = report.get("gate")
    if gate is not None:
        parts.append(f"\n### Safety gate: {'PASS' if gate['passed'] else 'FAIL'}\n")
        parts += [
            f"- {c['name']}: {'pass' if c['passed'] else 'FAIL'} — {c['reason']}\n" for c in gate["checks"]
        ]
    return "".join(parts)


def default_chart_trace(report: dict[str, Any]) -> str:
    """The first F1 trace (the paper's profile) if there is one, else the first trace."""
    ids = sorted(report["traces"])
    if not ids:
        raise ValueError("the report has no traces to chart")
    return str(next((i for i in ids if report["traces"][i]["family"] == "F1"), ids[0]))


def write_chart(report: dict[str, Any], path: Path, trace_id: str | None = None) -> str:
    """A PNG of prompt tokens per turn, one line per arm, for one trace; returns its id."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = trace_id or default_chart_trace(report)
    if chosen not in report["traces"]:
        raise ValueError(f"no trace {chosen!r} in this report")
    arms = report["traces"][chosen]["arms"]
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    try:
        for arm in report["arm_order"]:
            if arm in arms:
                tokens = arms[arm]["prompt_tokens"]
                style = "-" if arm == FULL else "--" if arm.startswith("archive") else ":"
                ax.plot(range(1, len(tokens) + 1), tokens, style, marker=".", label=arm)
        ax.set_xlabel("turn (model request)")
        ax.set_ylabel("prompt tokens (cl100k_base)")
        ax.set_title(f"Prompt tokens per turn: {chosen}")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        # No timestamp in the file, so the same report draws the same bytes.
        fig.savefig(path, format="png", metadata={"Software": None})
    finally:
        plt.close(fig)
    return chosen


def write_tradeoff_chart(report: dict[str, Any], path: Path) -> None:
    """A PNG of what each arm costs against what it loses: one panel per family and one for the
    pooled set, each arm a point at (cumulative input against full history, key evidence
    missing), so the families and arms read without the table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    controls = (report.get("targets") or {}).get("controls", [])
    panels = [("all traces", report["arms"])]
    panels += [(f"{f} (control)" if f in controls else f, a) for f, a in sorted(report["families"].items())]
    arms = [a for a in report["arm_order"] if a != FULL]
    columns = 3
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.6 * rows), dpi=110, squeeze=False)
    try:
        markers = "os^vD<>pPX*h"
        for n, (title, by_arm) in enumerate(panels):
            ax = axes[n // columns][n % columns]
            for k, arm in enumerate(arms):
                if arm not in by_arm:
                    continue
                a = by_arm[arm]
                ratio, missing = a["vs_full"]["cumulative_input_tokens"], a["missing_rate"]
                if ratio is None or missing is None:
                    continue  # no full history to compare with, or no need to miss
                ax.scatter(100 * ratio, 100 * missing, marker=markers[k % len(markers)], label=arm)
            ax.axvline(100, color="grey", lw=0.8)  # full history's cost, which loses nothing
            ax.set_title(title)
            ax.set_xlim(0, 110)
            ax.set_ylim(-3, 103)
            ax.set_xlabel("cumulative input, % of full history")
            ax.set_ylabel("key evidence missing, %")
            ax.grid(alpha=0.3)
        for n in range(len(panels), rows * columns):
            axes[n // columns][n % columns].axis("off")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=5, fontsize="small")
        fig.suptitle("Cost against loss, by family and arm (lower left is better)")
        fig.tight_layout(rect=(0, 0.07 + 0.02 * (len(labels) // 5), 1, 1))
        fig.savefig(path, format="png", metadata={"Software": None})
    finally:
        plt.close(fig)
