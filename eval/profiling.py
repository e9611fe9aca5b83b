"""A cProfile of one benchmark run, as JSON: the functions with the most own time, and the
project's own steps (archive and system code) by cumulative time."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Paths whose functions count as the project's own steps in `cumulative_ours`.
OURS = ("archive/", "mnemo_sea/system/")


def profile_report(
    run: Callable[[cProfile.Profile], object], *, top: int = 25, ours: tuple[str, ...] = OURS
) -> dict[str, Any]:
    """Call `run` with a profiler it enables around what it measures; the `top` functions by own
    time and by cumulative time among files under `ours`."""
    profiler = cProfile.Profile()
    run(profiler)
    stats = pstats.Stats(profiler)
    total = max(getattr(stats, "total_tt", 0.0), 1e-9)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = getattr(stats, "stats", {})

    def name(key: tuple[str, int, str]) -> str:
        file, line, func = key
        return f"{Path(file).name}:{line}:{func}" if line else func

    by_own = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    mine = [kv for kv in raw.items() if any(p in kv[0][0] for p in ours)]
    by_cumulative = sorted(mine, key=lambda kv: kv[1][3], reverse=True)[:top]
    return {
        "profiled_seconds": round(total, 3),
        "own_time": [
            {"function": name(k), "calls": v[1], "seconds": round(v[2], 3), "share": round(v[2] / total, 3)}
            for k, v in by_own
        ],
        "cumulative_ours": [
            {"function": name(k), "calls": v[1], "seconds": round(v[3], 3), "share": round(v[3] / total, 3)}
            for k, v in by_cumulative
        ],
    }
