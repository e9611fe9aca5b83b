"""One seeded Mnemo per test module (see rag_world.py): opening and seeding it is most of the cost;
one empty Mnemo for the vector store tests; and an empty one per module for the adapters' tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import HashingEmbedder
from rag_world import World, open_world

from mnemo_sea.system.mnemo import Mnemo


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = open_world(tmp_path_factory.mktemp("rag") / "data")
    try:
        yield w
    finally:
        w.mnemo.close()


@pytest.fixture(scope="module")
def mnemo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mnemo]:
    """An empty Mnemo (hashing embedder) of the test module's own; its tests take tenants of
    their own, so they need not reopen it."""
    opened = Mnemo.open(tmp_path_factory.mktemp(request.module.__name__) / "data", embedder=HashingEmbedder())
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def index_down(world: World) -> Iterator[None]:
    """Query embedding fails for the test's duration, so the dense leg cannot run."""
    world.embedder.fail_queries = True
    try:
        yield
    finally:
        world.embedder.fail_queries = False


@pytest.fixture(scope="package")
def vector_mnemo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mnemo]:
    """One Mnemo (hashing embedder) for the vector store tests; each test takes fresh tenants
    (vector_helpers.tenant), so each store starts empty without reopening anything."""
    mnemo = Mnemo.open(tmp_path_factory.mktemp("vectors") / "data", embedder=HashingEmbedder())
    try:
        yield mnemo
    finally:
        mnemo.close()
