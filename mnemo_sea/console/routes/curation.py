"""The curation report: per family, the arms as the report's markdown table has them and a chart
of what each costs against what it loses, with the targets, the safety gate and prompt tokens per
turn of one trace. It reads the file the console was started with (`--report`), nothing of the
archive; without one, the page says how to make one."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse

from mnemo_sea.archive import InvalidInput
from mnemo_sea.console import charts
from mnemo_sea.console.curation_report import load as load_report
from mnemo_sea.console.curation_report import locate, pct, ratio, times
from mnemo_sea.console.pages import render
from mnemo_sea.console.routes.common import Viewer, page_router

router = page_router()


@router.get("/curation", response_class=HTMLResponse)
def curation(
    request: Request, principal: Viewer, trace: Annotated[str | None, Query(max_length=256)] = None
) -> HTMLResponse:
    located = locate(request.app.state.report)
    if located.path is None:
        return render(request, "curation_none.html", principal, missing=located.missing)
    report = load_report(located.path)
    chosen = trace or report.default_trace()
    if chosen is not None and chosen not in report.traces:
        raise InvalidInput("trace", f"the report holds no trace {chosen!r}")
    styled = charts.styles(report.arm_order)
    controls = report.targets.controls if report.targets is not None else []
    panels = [("all traces", "all", report.arms)]
    panels += [(f"{f} (control)" if f in controls else f, f, a) for f, a in sorted(report.families.items())]
    per_turn = None
    if chosen is not None:
        arms = report.traces[chosen].arms
        per_turn = charts.turns(chosen, {a: arms[a].prompt_tokens for a in arms}, styled)
    return render(
        request,
        "curation.html",
        principal,
        report=report,
        name=located.path.name,
        written=located.written,
        panels=[(title, key, arms, charts.tradeoff(title, arms, styled)) for title, key, arms in panels],
        styles=styled,
        marker=charts.marker,
        trace=chosen,
        per_turn=per_turn,
        ratio=ratio,
        pct=pct,
        times=times,
    )
