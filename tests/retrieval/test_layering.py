"""retrieval/ stands alone: it imports neither the archive, nor the composition root, nor eval."""

from __future__ import annotations

import ast
from pathlib import Path

RETRIEVAL = Path(__file__).resolve().parents[2] / "retrieval"
FORBIDDEN = ("mnemo_sea.archive", "mnemo_sea.cli.app", "mnemo_sea.eval", "archive", "eval")


def test_retrieval_never_imports_archive_cli_or_eval() -> None:
    offenders = []
    for path in sorted(RETRIEVAL.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                bare = name.lstrip(".")
                if node_level_escapes(name) or any(bare == f or bare.startswith(f + ".") for f in FORBIDDEN):
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


def node_level_escapes(name: str) -> bool:
    """A relative import of two or more dots leaves the package (into mnemo_sea's siblings)."""
    return name.startswith("..")
