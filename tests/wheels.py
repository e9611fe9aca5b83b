"""Building the project's wheel the way a release would, from a clean copy of the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def clean_env() -> dict[str, str]:
    """The environment without anything that would let a child see the repository or this venv."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd, check=False, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def build_wheel(root: Path) -> Path:
    """A wheel built in `root` from a copy of the tree (so no build/ or egg-info leftovers leak
    in, and the repository is not written to)."""
    return _build("--wheel", _copy_of_the_tree(root), root / "dist")


def build_sdist(root: Path) -> Path:
    """An sdist built in `root` from a copy of the tree."""
    return _build("--sdist", _copy_of_the_tree(root), root / "dist")


def wheel_of(source: Path, out: Path) -> Path:
    """The wheel built from an unpacked source tree (an sdist's)."""
    return _build("--wheel", source, out)


def _copy_of_the_tree(root: Path) -> Path:
    src = root / "src"
    shutil.copytree(
        REPO,
        src,
        symlinks=True,  # mnemo_sea/archive -> ../archive etc. stay links, as in the repository
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "tests"
        ),
    )
    return src


def _build(kind: str, src: Path, out: Path) -> Path:
    # No isolation: the build backend is in the dev venv already, and needs no download.
    run([sys.executable, "-m", "build", kind, "--no-isolation", "--skip-dependency-check",
         "--outdir", str(out), str(src)], cwd=src.parent)  # fmt: skip
    (built,) = out.glob("mnemo_sea-*.whl" if kind == "--wheel" else "mnemo_sea-*.tar.gz")
    return built
