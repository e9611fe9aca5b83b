"""Each layer loads under one name only: mnemo_sea.archive, mnemo_sea.retrieval, mnemo_sea.eval.

archive/, retrieval/ and eval/ are folders at the repository root, so a Python started there can
find them as top-level packages. Loaded that way they would be a second copy of every class
(an `archive.NotFound` is not a `mnemo_sea.archive.NotFound`), so each refuses the short name.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("archive", "retrieval", "eval")


def python(code: str) -> subprocess.CompletedProcess[str]:
    # From the repository root with "" first on sys.path, as `python -c` puts it: the short
    # names are found, which is the situation the guard is for.
    return subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_refuses_its_short_name_from_the_repository_root(layer: str) -> None:
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.find_spec({layer!r})\n"
        f"assert spec is not None and spec.origin.endswith('{layer}/__init__.py'), spec\n"
        "try:\n"
        f"    import {layer}\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        f"    left = [m for m in sys.modules if m == {layer!r} or m.startswith({layer!r} + '.')]\n"
        "    sys.exit(3 if left else 0)\n"
        "sys.exit(2)\n"
    )
    run = python(probe)
    assert run.returncode == 0, run.stdout + run.stderr  # 2: it imported; 3: a module stayed loaded
    assert run.stdout.strip() == (
        f"import this layer as mnemo_sea.{layer}, not {layer} (the repository root is not a package root)"
    )


@pytest.mark.parametrize("layer", LAYERS)
def test_a_submodule_under_the_short_name_is_refused_too(layer: str) -> None:
    submodule = {"archive": "errors", "retrieval": "errors", "eval": "metrics"}[layer]
    run = python(f"import {layer}.{submodule}")
    assert run.returncode == 1
    assert f"ImportError: import this layer as mnemo_sea.{layer}, not {layer} " in run.stderr


def test_the_canonical_names_still_load_from_the_repository_root() -> None:
    run = python(
        "import mnemo_sea.archive, mnemo_sea.retrieval, mnemo_sea.eval.metrics, mnemo_sea.eval.curation\n"
        "from mnemo_sea import NotFound\n"
        "assert NotFound is mnemo_sea.archive.NotFound\n"
        "print(mnemo_sea.archive.__name__, mnemo_sea.retrieval.__name__, mnemo_sea.eval.__name__)"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["mnemo_sea.archive", "mnemo_sea.retrieval", "mnemo_sea.eval"]
