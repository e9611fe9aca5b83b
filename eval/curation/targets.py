"""Issue 27's targets, checked on a report: the library's arm against the best baseline.

On the pooled set and on every family that is not a low-noise control (`CONTROL_FAMILIES`),
`archive_auto` must have key evidence missing ≤ 2 %, a cumulative-input saving at least 10
points larger than `masking+reread`'s, and requests ≤ 1.3× full history's. The report states
each check with its figures, met or not: an honest loss is a result, so a missed target does
not fail the command.
"""

from __future__ import annotations

from typing import Any

from .arms import ARCHIVE_AUTO, MASKING_REREAD
from .families import CONTROL_FAMILIES

MAX_MISSING = 0.02
MIN_MORE_SAVING = 0.10  # of full history's cumulative input, beyond the baseline's saving
MAX_REQUESTS = 1.3
ARM = ARCHIVE_AUTO
BASELINE = MASKING_REREAD


def _saving(figures: dict[str, Any]) -> float | None:
    ratio = figures["vs_full"]["cumulative_input_tokens"]
    return None if ratio is None else round(1 - ratio, 6)


def _scope(arms: dict[str, Any]) -> dict[str, Any]:
    arm, baseline = arms[ARM], arms[BASELINE]
    missing = arm["missing_rate"] or 0.0
    saving, baseline_saving = _saving(arm), _saving(baseline)
    requests = arm["vs_full"]["requests"]
    checks = {
        "missing": missing <= MAX_MISSING,
        "saving": saving is not None
        and baseline_saving is not None
        and saving - baseline_saving >= MIN_MORE_SAVING - 1e-9,
        "requests": requests is not None and requests <= MAX_REQUESTS,
    }
    return {
        "missing_rate": missing,
        "cumulative_saving": saving,
        "baseline_cumulative_saving": baseline_saving,
        "requests_vs_full": requests,
        "checks": checks,
        "met": all(checks.values()),
    }


def check_targets(report: dict[str, Any]) -> dict[str, Any] | None:
    """The targets per scope (pooled, then each family held to them), or None when the report
    lacks the two arms they compare (a run of chosen arms)."""
    if ARM not in report["arms"] or BASELINE not in report["arms"]:
        return None
    families = {
        f: _scope(arms)
        for f, arms in sorted(report["families"].items())
        if f not in CONTROL_FAMILIES and ARM in arms and BASELINE in arms
    }
    pooled = _scope(report["arms"])
    return {
        "arm": ARM,
        "baseline": BASELINE,
        "limits": {
            "max_missing_rate": MAX_MISSING,
            "min_more_cumulative_saving": MIN_MORE_SAVING,
            "max_requests_vs_full": MAX_REQUESTS,
        },
        "controls": sorted(f for f in report["families"] if f in CONTROL_FAMILIES),
        "pooled": pooled,
        "families": families,
        "met": pooled["met"] and all(s["met"] for s in families.values()),
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def _mark(ok: bool) -> str:
    return "yes" if ok else "**no**"


def targets_table(targets: dict[str, Any]) -> str:
    """One row per scope: each figure beside its limit, and whether it is met."""
    lines = [
        f"| scope | {ARM} missing (≤ 2%) | its cumulative saving | {BASELINE}'s | ≥ 10 points more "
        "| requests vs full (≤ 1.3×) | met |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    scopes = [("pooled", targets["pooled"]), *targets["families"].items()]
    for name, s in scopes:
        c = s["checks"]
        requests = "–" if s["requests_vs_full"] is None else f"{s['requests_vs_full']:.2f}×"
        lines.append(
            f"| {name} | {_pct(s['missing_rate'])} ({_mark(c['missing'])}) | {_pct(s['cumulative_saving'])} "
            f"| {_pct(s['baseline_cumulative_saving'])} | {_mark(c['saving'])} "
            f"| {requests} ({_mark(c['requests'])}) | {_mark(s['met'])} |"
        )
    return "\n".join(lines) + "\n"
