"""Issue 27's targets read off a report: per family held to them and pooled, controls apart."""

from __future__ import annotations

from typing import Any

from mnemo_sea.eval.curation.report import markdown
from mnemo_sea.eval.curation.targets import check_targets


def _figures(missing: float, cumulative: float, requests: float) -> dict[str, Any]:
    return {
        "missing_rate": missing,
        "vs_full": {"cumulative_input_tokens": cumulative, "requests": requests},
    }


Figures = tuple[float, float, float]  # missing rate, cumulative input vs full, requests vs full


def _report(families: dict[str, tuple[Figures, Figures]]) -> dict[str, Any]:
    """`families`: family -> (archive_auto's figures, masking+reread's)."""
    per = {
        f: {"archive_auto": _figures(*a), "masking+reread": _figures(*b)} for f, (a, b) in families.items()
    }
    return {
        "set": "synthetic",
        "arm_order": [],
        "arms": {"archive_auto": _figures(0.01, 0.2, 1.2), "masking+reread": _figures(0.0, 0.4, 1.1)},
        "families": per,
    }


def test_each_noisy_family_is_held_to_the_targets_and_controls_are_not() -> None:
    report = _report(
        {
            "F1": ((0.02, 0.25, 1.3), (0.0, 0.35, 1.1)),  # every figure exactly at its limit: met
            "F4": ((0.5, 0.9, 2.0), (0.0, 0.5, 1.0)),  # the low-noise control: not held to them
            "X7": ((0.0, 0.3, 1.31), (0.0, 0.45, 1.0)),  # a set's own family: requests over
        }
    )
    targets = check_targets(report)
    assert targets is not None
    assert targets["controls"] == ["F4"] and sorted(targets["families"]) == ["F1", "X7"]
    assert targets["families"]["F1"]["met"] is True
    assert targets["families"]["X7"]["checks"] == {"missing": True, "saving": True, "requests": False}
    assert targets["pooled"]["met"] is True  # saving 80 % against 60 %: 20 points more
    assert targets["met"] is False  # one family misses: the pooled figure does not hide it


def test_saving_is_measured_against_the_baseline_not_against_full() -> None:
    report = _report({"F2": ((0.0, 0.2, 1.0), (0.0, 0.25, 1.0))})  # 80 % against 75 %: 5 points
    targets = check_targets(report)
    assert targets is not None
    got = targets["families"]["F2"]
    assert got["cumulative_saving"] == 0.8 and got["baseline_cumulative_saving"] == 0.75
    assert got["checks"]["saving"] is False


def test_no_targets_without_both_arms_and_the_table_says_which_scope_misses() -> None:
    report = _report({"F1": ((0.05, 0.2, 1.0), (0.0, 0.4, 1.0))})
    only = {**report, "arms": {"archive_auto": report["arms"]["archive_auto"]}}
    assert check_targets(only) is None
    report["targets"] = check_targets(report)
    text = markdown(report)
    assert "## Targets: NOT met (controls, not held to them: none)" in text
    row = next(line for line in text.splitlines() if line.startswith("| F1 |"))
    assert "5.0% (**no**)" in row and row.endswith("| **no** |")
