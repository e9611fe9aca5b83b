"""mypy (strict) over a probe file, for tests of what the type checker accepts and refuses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def flagged_lines(source: str, folder: Path) -> tuple[list[int], str]:
    """The line numbers mypy --strict reports errors on in `source` (run from the repository, so
    it checks this tree's mnemo_sea), and its whole output for the assertion message."""
    probe = folder / "probe.py"
    probe.write_text(source, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(probe)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO,
    )
    lines = [line for line in run.stdout.splitlines() if ": error:" in line]
    return sorted({int(line.split(":")[1]) for line in lines}), run.stdout + run.stderr
