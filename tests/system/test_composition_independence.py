"""The caches and citation checks stand apart from the retrieval layer (the facade wires them)."""

from __future__ import annotations

import subprocess
import sys


def test_caches_and_citations_load_without_the_retrieval_layer() -> None:
    code = (
        "import sys, mnemo_sea.system.caches, mnemo_sea.system.citations; "
        "loaded = sorted(m for m in sys.modules if m.startswith('mnemo_sea.retrieval')); "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
