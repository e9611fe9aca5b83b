"""The README's Quickstart stays a quickstart: at most ten lines. That it runs as printed, on
the embedded default with the real model, is test_runnable_docs.py's (it is marked runnable).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quickstart() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_quickstart_is_at_most_ten_lines() -> None:
    assert len(quickstart().splitlines()) <= 10
