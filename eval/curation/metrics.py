"""The experiment's figures, per (trace, arm) and per arm over a set, with ratios against `full`.

Per (trace, arm), over every model request t = 1..n it makes, in order, with prompt tokens P_t:
a prompt is the assembled context plus the transcript (transcript.py: the model's tool calls and
answers, the curation tools' replies), so P_t counts everything the model is sent.
- requests = n = turns + archive_calls + recover_calls + searches + rereads + rejected (for
  `archive_auto`: turns + searches + rejected, its archive_calls being `curate`'s), where
  turns are the requests the trace asks for (after a tool call, at a need, an answer, a pivot)
  and the others those the arm adds: the scripted and heuristic agents' archive and recover
  calls, the heuristic's searches of archived notes, the library arm's recalls (a recall that
  recovers is one call; its recovery is counted in `recalled`), a `+reread` baseline's call run
  again, a rejected archive batch or refused recovery. The library arm's `curate` runs in the
  harness without asking the model: counted in `archive_calls`, not in requests, and it has no
  prompt of its own;
- final_prompt_tokens = P_n; peak_prompt_tokens = max P_t; cumulative_input_tokens = sum P_t;
- uncached_prefix_tokens = sum over t of the tokens of the segments of prompt t after the longest
  run of leading segments identical (same text) to prompt t-1's (all of prompt 1): what a
  provider's prefix cache could not have served, counted over whole segments;
- missing_rate = needs whose quote was not in that turn's prompt where it comes from its source
  (the source's envelope or what the arm shows instead, a recovered copy, the task state citing
  it) / needs;
- citation_precision = citations the checker says ok AND whose quote was so in view in that
  turn's prompt / citations;
- protected_violations: prompts in which a protected result is not verbatim;
- stale_unwarned: needs and citations served by a time-sensitive result observed before a clock
  advance, shown without a staleness warning;
- injection_leaks: prompts in which an injection reaches text outside an original's escaped
  envelope (a note, the summary arm's summary text, the task state, the transcript): a text the
  trace marks `injected`, or a phrasing of the experiment's own detector (injection.py, kept apart
  from the library's note filter);
- superseded_cited: citations, and facts a `state` event confirms, resting on a source replaced
  before them: a tool call another `supersedes` when no result of the replacing calls is in
  view in that prompt (the one before, for a fact), so it depends on what the arm shows; a
  knowledge record withdrawn or of a version the citation checker finds replaced (retracted,
  stale_version, superseded), which every arm is shown alike;
- unknown_definite: prompts in which a derived summary appears anywhere but in its labelled
  segment;
- fallback_turns: prompts assembled from the harness's full history because the store was down.

Per arm, over traces: every count and token figure is summed, the rates are pooled (sum of
missing over sum of needs, likewise precision), and `vs_full` gives each token and request
figure as a ratio of the same sum under `full` (0.25 = 75% smaller). Latency p50/p95 (ms, wall
clock) lives under `timings`, which is only reported on request (it differs from run to run).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from .arms import FULL
from .runner import PromptRecord, TraceRun
from .transcript import TURN_EVENTS

SUMMED = (
    "turns",
    "requests",
    "final_prompt_tokens",
    "peak_prompt_tokens",
    "cumulative_input_tokens",
    "uncached_prefix_tokens",
    "archive_calls",
    "archived_results",
    "recover_calls",
    "searches",
    "recalled",
    "rereads",
    "rejected",
    "needs",
    "needs_missing",
    "citations",
    "citations_correct",
    "protected_violations",
    "stale_unwarned",
    "injection_leaks",
    "unknown_definite",
    "superseded_cited",
    "fallback_turns",
)
# Figures compared with full history as a ratio.
AGAINST_FULL = (
    "final_prompt_tokens",
    "peak_prompt_tokens",
    "cumulative_input_tokens",
    "uncached_prefix_tokens",
    "requests",
)


def uncached_prefix(prompts: Sequence[PromptRecord]) -> int:
    total = 0
    previous: tuple[tuple[str, str, int], ...] = ()
    for prompt in prompts:
        shared = 0
        for a, b in zip(previous, prompt.segments, strict=False):
            if a[1] != b[1]:
                break
            shared += 1
        total += sum(s[2] for s in prompt.segments[shared:])
        previous = prompt.segments
    return total


def _rate(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 6)


def trace_metrics(run: TraceRun) -> dict[str, Any]:
    """The figures of one (trace, arm); see the module docstring for each formula."""
    tokens = [p.tokens for p in run.prompts]
    missing = sum(1 for n in run.needs if not n.satisfied)
    correct = sum(1 for c in run.citations if c.correct)
    out: dict[str, Any] = {
        "turns": sum(1 for p in run.prompts if p.event in TURN_EVENTS),
        "requests": len(run.prompts),
        "final_prompt_tokens": tokens[-1] if tokens else 0,
        "peak_prompt_tokens": max(tokens, default=0),
        "cumulative_input_tokens": sum(tokens),
        "uncached_prefix_tokens": uncached_prefix(run.prompts),
        "archive_calls": run.archive_calls,
        "archived_results": run.archived_results,
        "recover_calls": run.recover_calls,
        "searches": run.searches,
        "recalled": run.recalled,
        "rereads": run.rereads,
        "rejected": run.rejected,
        "needs": len(run.needs),
        "needs_missing": missing,
        "missing_rate": _rate(missing, len(run.needs)),
        "missing_facts": sorted(n.fact for n in run.needs if not n.satisfied),
        "citations": len(run.citations),
        "citations_correct": correct,
        "citation_precision": _rate(correct, len(run.citations)),
        "protected_violations": run.protected_violations,
        "stale_unwarned": sum(n.stale_unwarned for n in run.needs)
        + sum(c.stale_unwarned for c in run.citations),
        "injection_leaks": run.injection_leaks,
        "unknown_definite": run.unknown_definite,
        "superseded_cited": run.superseded_cited,
        "fallback_turns": sum(t.fallback for t in run.prompts),
        "prompt_tokens": tokens,
    }
    return out


def percentile(samples: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) in ms, rounded to 0.01; None without samples."""
    ordered = sorted(samples)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return round(ordered[rank - 1], 2)


def _latency(samples: Sequence[float]) -> dict[str, Any]:
    return {"n": len(samples), "p50_ms": percentile(samples, 50), "p95_ms": percentile(samples, 95)}


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sums of the counts and tokens of several (trace, arm) rows of one arm, rates pooled."""
    out: dict[str, Any] = {key: sum(int(r[key]) for r in rows) for key in SUMMED}
    out["traces"] = len(rows)
    out["missing_rate"] = _rate(out["needs_missing"], out["needs"])
    out["citation_precision"] = _rate(out["citations_correct"], out["citations"])
    return out


def against_full(arms: dict[str, dict[str, Any]]) -> None:
    """Add `vs_full` (ratio of each AGAINST_FULL figure to full history's) to every arm, in place."""
    full = arms.get(FULL)
    for figures in arms.values():
        ratios: dict[str, float | None] = {}
        for key in AGAINST_FULL:
            base = None if full is None else full[key]
            ratios[key] = None if not base else round(figures[key] / base, 6)
        figures["vs_full"] = ratios


def evaluate(runs: Sequence[TraceRun], *, timings: bool = False) -> dict[str, Any]:
    """Per trace, per arm, per family and arm: the deterministic figures (and `timings` if asked)."""
    arm_order: list[str] = []
    for run in runs:
        if run.arm not in arm_order:
            arm_order.append(run.arm)
    per_trace: dict[str, dict[str, Any]] = {}
    rows: dict[str, list[dict[str, Any]]] = {a: [] for a in arm_order}
    by_family: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for run in runs:
        figures = trace_metrics(run)
        entry = per_trace.setdefault(run.trace_id, {"family": run.family, "arms": {}})
        entry["arms"][run.arm] = figures
        rows[run.arm].append(figures)
        by_family.setdefault(run.family, {}).setdefault(run.arm, []).append(figures)
    for entry in per_trace.values():
        against_full(entry["arms"])
    arms = {a: aggregate(rows[a]) for a in arm_order}
    against_full(arms)
    families: dict[str, dict[str, Any]] = {}
    for family, per_arm in by_family.items():
        families[family] = {a: aggregate(r) for a, r in per_arm.items()}
        against_full(families[family])
    report: dict[str, Any] = {"arm_order": arm_order, "traces": per_trace, "arms": arms, "families": families}
    if timings:
        report["timings"] = {
            a: {
                "archive": _latency([ms for r in runs if r.arm == a for ms in r.archive_ms]),
                "recover": _latency([ms for r in runs if r.arm == a for ms in r.recover_ms]),
                "recall": _latency([ms for r in runs if r.arm == a for ms in r.recall_ms]),
                "replay_seconds": round(sum(r.seconds for r in runs if r.arm == a), 3),
            }
            for a in arm_order
        }
    return report
