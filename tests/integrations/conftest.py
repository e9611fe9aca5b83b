"""One seeded Mnemo per test module (see rag_world.py): opening and seeding it is most of the cost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rag_world import World, open_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = open_world(tmp_path_factory.mktemp("rag") / "data")
    try:
        yield w
    finally:
        w.mnemo.close()


@pytest.fixture
def index_down(world: World) -> Iterator[None]:
    """Query embedding fails for the test's duration, so the dense leg cannot run."""
    world.embedder.fail_queries = True
    try:
        yield
    finally:
        world.embedder.fail_queries = False
