"""Fixtures of the MCP server tests: one embedded system per run, with evidence in two tenants.

Opening the system and importing the SDK take seconds, so the system is shared by the whole
directory; each test works in sessions of its own (`session_id`), so tests do not see each
other's results. The embedder is the deterministic hashing one: the model is not the subject.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_helpers import AMOXICILLIN, CLINIC, SHOP

from mnemo_sea.archive import EvidenceInput
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder


@pytest.fixture(scope="session")
def mnemo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mnemo]:
    folder: Path = tmp_path_factory.mktemp("mcp-system")
    system = Mnemo.open(folder, embedder=HashingEmbedder())
    system.ingest(
        CLINIC,
        [EvidenceInput(body=AMOXICILLIN, source="formulary", evidence_id="amox-dose", locator="p. 12")],
    )
    system.ingest(
        SHOP,
        [EvidenceInput(body="Blue widgets cost 4 EUR each.", source="catalogue", evidence_id="widget-price")],
    )
    try:
        yield system
    finally:
        system.close()


@pytest.fixture
def session_id() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"
