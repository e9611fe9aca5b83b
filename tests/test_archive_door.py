"""Above the system, nothing reaches through the facades into the archive's store or the index's
backend: what a surface needs of them is a door (`Archive.ping`, `Archive.authenticate`,
`Archive.outbox_backlog`, `HybridIndex.count_matching`, ...).

The import contracts (pyproject.toml) keep these layers out of `mnemo_sea.archive.storage`; an
attribute reached through an object (`mnemo.archive.store.read()`) is no import, so it is looked
for in the source here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mnemo_sea"
# Every layer above the system (eval is left out: its curation harness injects an outage by
# swapping the store's engine, a fault no door should offer).
ABOVE_THE_SYSTEM = ("cli", "rest", "mcp", "client", "integrations", "demo", "context")
REACH = re.compile(r"\.archive\.store\b|\.index\.backend\b|\bstore\.(?:read|write)\(")


def reaches(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if REACH.search(line)]


@pytest.mark.parametrize("layer", ABOVE_THE_SYSTEM)
def test_no_layer_above_the_system_reaches_into_the_store_or_the_backend(layer: str) -> None:
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        if (hits := reaches(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_check_finds_a_reach() -> None:
    assert reaches("with mnemo.archive.store.read() as conn:\n    pass") != []
    assert reaches("n = mnemo.index.backend.count(spec)") != []
    assert reaches("mnemo.archive.ping()\nmnemo.index.count_matching(spec)") == []
