"""The code blocks of the README and `docs/` marked `<!-- runnable -->` (on the line before the
fence) run as printed, in the order written, in one fresh folder: a name left undefined or an
example that only works out of order breaks the build.

Bash blocks run with `bash -euo pipefail` and the suite's `mnemo-sea` on the PATH; Python
blocks in a fresh interpreter with the repository importable; no MNEMO_* setting of the suite
leaks in (the model's ONNX cache excepted, so the export is reused). The README's run on the
default embedder, as a first reader's would; the reference pages' on the hashing embedder
(MNEMO_EMBEDDER=hashing: their ~35 commands would spend a minute loading the model, which is
not what they show).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- runnable -->\n```(bash|python)\n(.*?)```", re.DOTALL)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def runnable(page: Path) -> list[tuple[str, str]]:
    return BLOCK.findall(page.read_text(encoding="utf-8"))


def test_the_readme_and_the_cli_reference_mark_their_sessions_runnable() -> None:
    blocks = runnable(ROOT / "README.md")
    assert [lang for lang, _ in blocks] == ["python", "bash", "python"]  # quickstart, CLI, library
    assert "export MNEMO_DATA_DIR=data" in blocks[1][1]
    (every_command,) = runnable(ROOT / "docs" / "cli.md")
    assert every_command[1].count("mnemo-sea ") >= 30


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=lambda p: p.name)
def test_marked_blocks_run_in_order_on_fresh_data(page: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") or k == "MNEMO_MODEL_CACHE"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if page.name != "README.md":
        env["MNEMO_EMBEDDER"] = "hashing"
    for n, (lang, code) in enumerate(runnable(page), 1):
        command = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=900, check=False, env=env, cwd=tmp_path
        )
        assert proc.returncode == 0, (
            f"{page.name} block {n} ({lang}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
        if page.name == "README.md" and n == 1:  # the Quickstart prints what the README says it prints
            assert proc.stdout.splitlines() == ["Cross-border delivery takes 5 days.", "200"], proc.stdout
