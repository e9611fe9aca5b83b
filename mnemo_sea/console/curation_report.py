"""The curation report the console shows: the JSON `mnemo-sea eval context --json` prints
(format `mnemo-sea/context-eval/1`), found where the operator pointed the console, read and
checked before a page uses it.

The console stands below the eval layer and may not import it, so it reads the report as data:
the models below name the fields the page shows (the report holds more, which is ignored), and a
file that is not such a report is a ReportUnreadable saying what is wrong, not a traceback.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from mnemo_sea.errors import Category, MnemoError
from mnemo_sea.system.json_text import JsonTooDeep, parse_json, validation_problems

REPORT_FORMAT = "mnemo-sea/context-eval/1"
FULL = "full"  # the arm every other is compared with (full history)
# A report of every shipped trace is a few megabytes; far larger is not one.
MAX_REPORT_BYTES = 64 * 1024 * 1024
# Problems a refusal names: enough to find what is wrong.
_SHOWN_PROBLEMS = 5


class ReportUnreadable(MnemoError):
    """The report file the console was given is not a report of `mnemo-sea eval context --json`
    (not JSON, another format, fields missing or of the wrong type, too large): the operator's
    configuration, not the viewer's request, is what to fix."""

    code = "report_unreadable"
    category = Category.MISCONFIGURED

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(
            f"the curation report {name} cannot be shown: {problem}. Make one with "
            "`mnemo-sea eval context --json > report.json`",
            name=name,
            problem=problem,
        )


class VsFull(BaseModel):
    """An arm's figures as a ratio to full history's (None where full history's is 0)."""

    final_prompt_tokens: float | None
    cumulative_input_tokens: float | None
    requests: float | None


class ArmFigures(BaseModel):
    """One arm's figures over a set of traces: the columns of the report's markdown table."""

    final_prompt_tokens: int
    cumulative_input_tokens: int
    requests: int
    archive_calls: int
    recover_calls: int
    recalled: int
    rereads: int
    missing_rate: float | None
    needs_missing: int
    needs: int
    citation_precision: float | None
    citations_correct: int
    citations: int
    protected_violations: int
    stale_unwarned: int
    injection_leaks: int
    unknown_definite: int
    superseded_cited: int
    vs_full: VsFull


class TraceArm(BaseModel):
    prompt_tokens: list[int]


class TraceFigures(BaseModel):
    family: str
    arms: dict[str, TraceArm]


class GateCheck(BaseModel):
    name: str
    passed: bool
    reason: str


class Gate(BaseModel):
    passed: bool
    checks: list[GateCheck]


class TargetChecks(BaseModel):
    missing: bool
    saving: bool
    requests: bool


class TargetScope(BaseModel):
    missing_rate: float | None
    cumulative_saving: float | None
    baseline_cumulative_saving: float | None
    requests_vs_full: float | None
    checks: TargetChecks
    met: bool


class Targets(BaseModel):
    arm: str
    baseline: str
    controls: list[str]
    met: bool
    pooled: TargetScope
    families: dict[str, TargetScope]


class ContextReport(BaseModel):
    """What the page reads of a report."""

    format: Literal["mnemo-sea/context-eval/1"]
    set: str
    tokenizer: str
    budget_tokens: int
    output_reserve: int
    parameters: dict[str, Any]
    arm_order: list[str]
    arms: dict[str, ArmFigures]
    families: dict[str, dict[str, ArmFigures]]
    traces: dict[str, TraceFigures]
    targets: Targets | None = None
    gate: Gate | None = None

    def order(self, arms: dict[str, ArmFigures]) -> list[str]:
        """The arms of one table in the report's order."""
        return [a for a in self.arm_order if a in arms]

    def default_trace(self) -> str | None:
        """The trace charted per turn unless the viewer picks one: the first F1 trace (the
        profile the experiment is about) if any, else the first; None without traces."""
        ids = sorted(self.traces)
        return next((i for i in ids if self.traces[i].family == "F1"), ids[0] if ids else None)


@dataclass(frozen=True)
class Located:
    """Where the configured report is: `path` when there is one to read, else `missing` says
    what the console found instead (for the page that says how to make one)."""

    path: Path | None
    missing: str = ""

    @property
    def written(self) -> datetime | None:
        return None if self.path is None else datetime.fromtimestamp(self.path.stat().st_mtime, UTC)


def locate(configured: Path | None) -> Located:
    """The report file: `configured` itself, or the newest `*.json` (by modification time) of
    the folder it names."""
    if configured is None:
        return Located(None, "no report is configured")
    if configured.is_dir():
        reports = [p for p in configured.glob("*.json") if p.is_file()]
        if not reports:
            return Located(None, f"the folder {configured.name} holds no *.json report yet")
        return Located(max(reports, key=lambda p: (p.stat().st_mtime_ns, p.name)))
    if not configured.is_file():
        return Located(None, f"there is no report at {configured.name} yet")
    return Located(configured)


def load(path: Path) -> ContextReport:
    """The report in `path`, checked; ReportUnreadable naming what is wrong otherwise. Read once
    per version of the file (its size and modification time): a report is megabytes of JSON, and
    the page is viewed again and again between experiments."""
    try:
        stat = path.stat()
    except OSError as e:
        raise ReportUnreadable(path.name, f"it cannot be read ({e.strerror or e})") from None
    return _load(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _load(path: Path, mtime_ns: int, size: int) -> ContextReport:
    """`load` of one version of the file (a refusal is not kept: it is raised again each time)."""
    name = path.name
    try:
        if size > MAX_REPORT_BYTES:
            raise ReportUnreadable(name, f"it is {size} bytes, over the {MAX_REPORT_BYTES} a report may be")
        data = parse_json(path.read_bytes(), name)
    except OSError as e:
        raise ReportUnreadable(name, f"it cannot be read ({e.strerror or e})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportUnreadable(name, f"it is not JSON ({e})") from None
    except JsonTooDeep as e:  # nested deeper than any report
        raise ReportUnreadable(name, e.problem) from None
    if not isinstance(data, dict):
        raise ReportUnreadable(name, "it is not a JSON object")
    if data.get("format") != REPORT_FORMAT:
        raise ReportUnreadable(name, f"its format is {data.get('format')!r}, not {REPORT_FORMAT!r}")
    try:
        return ContextReport.model_validate(data)
    except ValidationError as e:
        raise ReportUnreadable(name, validation_problems(e, _SHOWN_PROBLEMS)) from None


# ---- the figures as the report's markdown table writes them ---------------------------------


def ratio(value: float | None) -> str:
    """A ratio to full history as the change it is: 0.25 is "-75.0%"."""
    return "–" if value is None else f"{(value - 1) * 100:+.1f}%"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"
