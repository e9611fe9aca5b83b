from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mnemo_sea.retrieval import (
    CachingEmbedder,
    Embedder,
    EmbeddingCache,
    EvidenceDocument,
    HybridIndex,
    InMemoryEmbeddingCache,
    SqliteEmbeddingCache,
    sha256_hex,
)
from mnemo_sea.retrieval.embedding import embeds_cheaply


def vec(x: float) -> np.ndarray:
    return np.full(4, x, dtype=np.float32)


@pytest.fixture(params=["memory", "sqlite"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> EmbeddingCache:
    return (
        InMemoryEmbeddingCache() if request.param == "memory" else SqliteEmbeddingCache(tmp_path / "c.sqlite")
    )


def test_round_trip_is_keyed_by_model_and_content(cache: EmbeddingCache) -> None:
    cache.put_many("m1", {"h1": vec(1), "h2": vec(2)})
    cache.put_many("m2", {"h1": vec(9)})
    got = cache.get_many("m1", ["h1", "h2", "h3"])
    assert set(got) == {"h1", "h2"}
    np.testing.assert_array_equal(got["h2"], vec(2))
    np.testing.assert_array_equal(cache.get_many("m2", ["h1"])["h1"], vec(9))


def test_discard_drops_a_content_under_every_model(cache: EmbeddingCache) -> None:
    cache.put_many("m1", {"h1": vec(1), "h2": vec(2)})
    cache.put_many("m2", {"h1": vec(3)})
    assert cache.discard(["h1"]) == 2
    assert cache.get_many("m1", ["h1"]) == {} == cache.get_many("m2", ["h1"])
    assert set(cache.get_many("m1", ["h2"])) == {"h2"}
    assert cache.discard(["h1"]) == 0


def test_sqlite_cache_survives_reopen(tmp_path: Path) -> None:
    first = SqliteEmbeddingCache(tmp_path / "c.sqlite")
    first.put_many("m", {"h": vec(5)})
    first.close()
    np.testing.assert_array_equal(
        SqliteEmbeddingCache(tmp_path / "c.sqlite").get_many("m", ["h"])["h"], vec(5)
    )


def test_memory_cache_evicts_least_recently_used() -> None:
    cache = InMemoryEmbeddingCache(max_entries=2)
    cache.put_many("m", {"a": vec(1), "b": vec(2)})
    cache.get_many("m", ["a"])  # a is now fresher than b
    cache.put_many("m", {"c": vec(3)})
    assert set(cache.get_many("m", ["a", "b", "c"])) == {"a", "c"}


def test_caching_embedder_embeds_only_new_distinct_texts(embedder_factory: type) -> None:
    inner = embedder_factory()
    cached = CachingEmbedder(inner, InMemoryEmbeddingCache())
    first = cached.embed_documents(["refund policy", "carrier delay", "refund policy"])
    assert inner.documents_embedded == 2  # the duplicate is embedded once
    second = cached.embed_documents(["carrier delay", "new text"])
    assert inner.documents_embedded == 3
    np.testing.assert_array_equal(first[1], second[0])
    np.testing.assert_array_equal(first[0], inner.embed_queries(["refund policy"])[0])
    assert (cached.stats.hits, cached.stats.misses) == (1, 3)  # served from cache; embedded


def test_reingesting_into_a_fresh_index_with_a_warm_cache_embeds_nothing(
    tmp_path: Path, embedder_factory: type
) -> None:
    docs = [
        EvidenceDocument(tenant_id="acme", evidence_id=f"d{i}", version=1, text=f"text {i}")
        for i in range(20)
    ]
    inner = embedder_factory()
    shared = tmp_path / "shared.sqlite"
    with HybridIndex.open(tmp_path / "a", embedder=inner, cache=SqliteEmbeddingCache(shared)) as index:
        index.upsert(docs)
    assert inner.documents_embedded == 20
    with HybridIndex.open(tmp_path / "b", embedder=inner, cache=SqliteEmbeddingCache(shared)) as index:
        report = index.upsert(docs)
    assert report.written == 20 and inner.documents_embedded == 20
    assert SqliteEmbeddingCache(shared).get_many(inner.model_id, [sha256_hex("text 3")])


def _cheap(factory: type) -> Embedder:
    """The fake model, declaring itself cheaper than the cache (as the hashing embedder does)."""
    embedder = factory()
    embedder.cheap_to_embed = True
    return embedder  # type: ignore[no-any-return]


@pytest.mark.parametrize("cheap", [False, True], ids=["model", "cheap"])
def test_only_an_embedder_worth_caching_is_cached_and_deletion_discards_it(
    cheap: bool, tmp_path: Path, embedder_factory: type
) -> None:
    inner = _cheap(embedder_factory) if cheap else embedder_factory()
    assert embeds_cheaply(inner) is cheap
    shared = tmp_path / "shared.sqlite"
    doc = EvidenceDocument(tenant_id="acme", evidence_id="d1", version=1, text="refund policy")
    key = [sha256_hex("refund policy")]
    with HybridIndex.open(tmp_path / "a", embedder=inner, cache=SqliteEmbeddingCache(shared)) as index:
        index.upsert([doc])
        assert bool(SqliteEmbeddingCache(shared).get_many(inner.model_id, key)) is not cheap
        with HybridIndex.open(tmp_path / "b", embedder=inner, cache=SqliteEmbeddingCache(shared)) as again:
            again.upsert([doc])  # a fresh index: the model is served from the cache, the cheap one asked
        assert inner.documents_embedded == (2 if cheap else 1)
        report = index.delete("acme", "d1")
        assert (report.points_removed, report.embeddings_discarded) == (1, 0 if cheap else 1)
        assert SqliteEmbeddingCache(shared).get_many(inner.model_id, key) == {}
