"""The README's Quickstart runs as printed, on the embedded default with the real model.

The first ```python block under `## Quickstart` is run in a fresh interpreter from an empty
folder, with the repository on PYTHONPATH and no MNEMO_* setting of the suite (the model's
ONNX cache excepted, so a test run reuses the export a user's first run makes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quickstart() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_quickstart_is_at_most_ten_lines() -> None:
    assert len(quickstart().splitlines()) <= 10


def test_the_readme_quickstart_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") or k == "MNEMO_MODEL_CACHE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", quickstart()],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    # The searched policy, then the recovered original: every one of its 200 lines, byte-exact.
    assert proc.stdout.splitlines() == ["Cross-border delivery takes 5 days.", "200"]
    assert not list(tmp_path.iterdir())  # it cleans up after itself: the data folder was temporary
