"""The curation report's charts, drawn on the server as SVG: the geometry (scales, ticks, marks,
lines) computed here, the markup written by the template (templates/_charts.html), so every text
in a chart is escaped like any other text of a page. No plotting library, no script.

Two charts, the ones `mnemo-sea eval context --chart / --tradeoff-chart` draw as PNGs: cost
against loss (each arm a point at its cumulative input as a share of full history's and its
rate of missing key evidence; one panel per family and one for the whole set), and prompt tokens
per turn of one trace, one line per arm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mnemo_sea.console.curation_report import FULL, ArmFigures

# One color and one marker per arm, by its place in the report's arm order (matplotlib's
# tab10 colors, which the PNG charts use too).
COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
SHAPES = ("circle", "square", "triangle", "triangle-down", "diamond", "plus", "cross", "star")
MARK_SIZE = 4.5


@dataclass(frozen=True)
class ArmStyle:
    """How an arm is drawn in every chart of the page, and in its legend."""

    arm: str
    color: str
    shape: str
    dash: str  # the stroke-dasharray of its line: "" solid (full history), dashed (archive), dotted


def styles(arm_order: list[str]) -> dict[str, ArmStyle]:
    out: dict[str, ArmStyle] = {}
    for n, arm in enumerate(arm_order):
        dash = "" if arm == FULL else "6 3" if arm.startswith("archive") else "2 3"
        out[arm] = ArmStyle(arm, COLORS[n % len(COLORS)], SHAPES[n % len(SHAPES)], dash)
    return out


def _polygon(points: list[tuple[float, float]], *, closed: bool = True) -> str:
    """An SVG path through `points` (closed: back to the first)."""
    path = "M" + "L".join(f"{px:.1f},{py:.1f}" for px, py in points)
    return path + "z" if closed else path


def marker(shape: str, x: float, y: float, r: float = MARK_SIZE) -> str:
    """The SVG path of a marker centred on (x, y)."""
    if shape == "square":
        return f"M{x - r:.1f},{y - r:.1f}h{2 * r:.1f}v{2 * r:.1f}h{-2 * r:.1f}z"
    if shape in ("triangle", "triangle-down"):
        tip, base = (-1.2, 0.8) if shape == "triangle" else (1.2, -0.8)
        return _polygon([(x, y + r * tip), (x + r * 1.1, y + r * base), (x - r * 1.1, y + r * base)])
    if shape == "diamond":
        return _polygon([(x, y - r * 1.3), (x + r, y), (x, y + r * 1.3), (x - r, y)])
    if shape == "plus":
        w = r * 0.45
        return (
            f"M{x - w:.1f},{y - r:.1f}h{2 * w:.1f}v{r - w:.1f}h{r - w:.1f}v{2 * w:.1f}h{w - r:.1f}"
            f"v{r - w:.1f}h{-2 * w:.1f}v{w - r:.1f}h{w - r:.1f}v{-2 * w:.1f}h{r - w:.1f}z"
        )
    if shape == "cross":
        d = r * 0.8
        return _polygon([(x - d, y - d), (x + d, y + d)], closed=False) + _polygon(
            [(x + d, y - d), (x - d, y + d)], closed=False
        )
    if shape == "star":
        points = []
        for k in range(10):
            radius = r * 1.3 if k % 2 == 0 else r * 0.55
            angle = math.pi / 2 + k * math.pi / 5
            points.append((x + radius * math.cos(angle), y - radius * math.sin(angle)))
        return _polygon(points)
    # A circle as two arcs, so every marker is a path.
    return f"M{x - r:.1f},{y:.1f}a{r:.1f},{r:.1f} 0 1,0 {2 * r:.1f},0a{r:.1f},{r:.1f} 0 1,0 {-2 * r:.1f},0"


@dataclass(frozen=True)
class Tick:
    at: float  # pixels along its axis
    label: str


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str  # what the point is, shown on hover
    mark: str  # the SVG path of its marker


@dataclass(frozen=True)
class Series:
    style: ArmStyle
    points: tuple[Point, ...]

    @property
    def line(self) -> str:
        """The points as an SVG polyline's `points`."""
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)


@dataclass(frozen=True)
class Chart:
    """A chart's geometry in pixels: the plot box inside `width` x `height`, its ticks, its
    series, and an optional vertical guide (full history's cost)."""

    title: str
    width: int
    height: int
    left: int
    top: int
    right: int
    bottom: int
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    lines: bool  # join each series' points (per-turn chart) or only mark them (cost against loss)
    guide_x: float | None = None
    empty: str = ""  # why nothing is drawn, when nothing is

    @property
    def plot_width(self) -> int:
        return self.right - self.left

    @property
    def plot_height(self) -> int:
        return self.bottom - self.top


def _scale(lo: float, hi: float, a: float, b: float) -> tuple[float, float]:
    """The factor and offset mapping [lo, hi] onto [a, b]."""
    factor = (b - a) / (hi - lo)
    return factor, a - lo * factor


def nice_step(span: float, ticks: int = 5) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def short(value: float) -> str:
    """A tick's number, short: 1.2M, 350k, 12."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


# ---- cost against loss ------------------------------------------------------------------------

TRADEOFF_SIZE = (360, 270)
TRADEOFF_X = (0.0, 110.0)  # cumulative input, % of full history's
TRADEOFF_Y = (-3.0, 103.0)  # key evidence missing, %


def tradeoff(title: str, arms: dict[str, ArmFigures], styled: dict[str, ArmStyle]) -> Chart:
    """One panel: each arm but full history a point at (its cumulative input as a share of full
    history's, its rate of missing key evidence); lower left is better. An arm without full
    history to compare with, or without any need to miss, has no point."""
    width, height = TRADEOFF_SIZE
    left, top, right, bottom = 58, 26, width - 10, height - 40
    fx, ox = _scale(*TRADEOFF_X, left, right)
    fy, oy = _scale(*TRADEOFF_Y, bottom, top)
    series = []
    for arm, style in styled.items():
        figures = arms.get(arm)
        if arm == FULL or figures is None:
            continue
        cost, missing = figures.vs_full.cumulative_input_tokens, figures.missing_rate
        if cost is None or missing is None:
            continue
        x, y = 100 * cost, 100 * missing
        # Past the axis (an arm costing more than full history) it stays on the chart, at its edge.
        px, py = min(max(x, TRADEOFF_X[0]), TRADEOFF_X[1]) * fx + ox, y * fy + oy
        title_text = f"{arm}: {x:.1f}% of full history's input, {y:.1f}% of key evidence missing"
        series.append(Series(style, (Point(px, py, title_text, marker(style.shape, px, py)),)))
    ticks = tuple(range(0, 101, 20))
    return Chart(
        title=title,
        width=width,
        height=height,
        left=left,
        top=top,
        right=right,
        bottom=bottom,
        x_ticks=tuple(Tick(t * fx + ox, f"{t}%") for t in ticks),
        y_ticks=tuple(Tick(t * fy + oy, f"{t}%") for t in ticks),
        x_label="cumulative input, % of full history",
        y_label="key evidence missing",
        series=tuple(series),
        lines=False,
        guide_x=100 * fx + ox,
        empty="" if series else "no arm to compare with full history here",
    )


# ---- prompt tokens per turn -------------------------------------------------------------------

TURNS_SIZE = (1100, 340)
TURN_MARK_SIZE = 2.4


def turns(trace_id: str, prompt_tokens: dict[str, list[int]], styled: dict[str, ArmStyle]) -> Chart:
    """Prompt tokens at each model request of one trace, one line per arm."""
    width, height = TURNS_SIZE
    left, top, right, bottom = 70, 26, width - 16, height - 40
    longest = max((len(t) for t in prompt_tokens.values()), default=0)
    highest = max((max(t) for t in prompt_tokens.values() if t), default=0)
    step_y = nice_step(highest)
    top_y = max(math.ceil(highest / step_y) * step_y, step_y)
    fx, ox = _scale(1, max(longest, 2), left, right)
    fy, oy = _scale(0, top_y, bottom, top)
    series = []
    for arm, style in styled.items():
        tokens = prompt_tokens.get(arm)
        if not tokens:
            continue
        points = []
        for turn, n in enumerate(tokens, start=1):
            px, py = turn * fx + ox, n * fy + oy
            title_text = f"{arm}, turn {turn}: {n:,} prompt tokens"
            points.append(Point(px, py, title_text, marker(style.shape, px, py, TURN_MARK_SIZE)))
        series.append(Series(style, tuple(points)))
    step_x = max(int(nice_step(max(longest - 1, 1), 10)), 1)
    x_ticks = tuple(Tick(t * fx + ox, str(t)) for t in range(1, longest + 1) if t == 1 or t % step_x == 0)
    y_count = round(top_y / step_y)
    return Chart(
        title=f"Prompt tokens per turn: {trace_id}",
        width=width,
        height=height,
        left=left,
        top=top,
        right=right,
        bottom=bottom,
        x_ticks=x_ticks,
        y_ticks=tuple(Tick(k * step_y * fy + oy, short(k * step_y)) for k in range(y_count + 1)),
        x_label="turn (model request)",
        y_label="prompt tokens",
        series=tuple(series),
        lines=True,
        empty="" if series else "this trace has no turns",
    )
