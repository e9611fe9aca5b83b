"""What every LangGraph store must do, as checks run on LangGraph's own InMemoryStore and on
MnemoStore (in process, and through the REST clients in tests/client): where the two agree, the
same check passes on both, which is the proof that MnemoStore keeps BaseStore's semantics.

Each check takes a store holding nothing yet, and returns nothing; async checks are coroutines.
Orders are asserted only where BaseStore's stores agree (namespaces sorted; items written in
key order within one namespace).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore


def hashed_embeddings(texts: list[str]) -> list[list[float]]:
    """A bag-of-words embedding for InMemoryStore (no model)."""
    vectors = []
    for text in texts:
        vector = [0.0] * 64
        for word in text.lower().replace('"', " ").replace(":", " ").split():
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 64] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        vectors.append([v / norm for v in vector])
    return vectors


def in_memory_store() -> InMemoryStore:
    return InMemoryStore(index={"dims": 64, "embed": hashed_embeddings})


def check_put_get_update_delete(store: BaseStore) -> None:
    ns = ("users", "u-1")
    assert store.get(ns, "prefs") is None
    store.put(ns, "prefs", {"tea": "green", "n": 1})
    first = store.get(ns, "prefs")
    assert first is not None
    assert (first.namespace, first.key, first.value) == (ns, "prefs", {"tea": "green", "n": 1})
    assert first.created_at <= first.updated_at
    store.put(ns, "prefs", {"tea": "black", "n": 2})
    second = store.get(ns, "prefs")
    assert second is not None and second.value == {"tea": "black", "n": 2}
    assert second.updated_at >= first.updated_at
    assert store.get(("users", "u-2"), "prefs") is None  # another namespace
    assert store.get(ns, "other") is None
    store.delete(ns, "prefs")
    assert store.get(ns, "prefs") is None
    store.delete(ns, "prefs")  # deleting a missing item is no error


def check_namespace_rules(store: BaseStore) -> None:
    for bad in [(), ("langgraph", "x")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"a": 1})
    for bad in [("a.b",), ("",), ("a", 3)]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"a": 1})  # type: ignore[arg-type]
        with pytest.raises(InvalidNamespaceError):
            store.get(bad, "k")  # type: ignore[arg-type]
        with pytest.raises(InvalidNamespaceError):
            store.search(bad)  # type: ignore[arg-type]


def _fill_namespaces(store: BaseStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "x"), ("f", "b"), ("users", "u 1", "v1")]:
        store.put(ns, "k", {"at": "/".join(ns)})


def check_list_namespaces(store: BaseStore) -> None:
    _fill_namespaces(store)
    every = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "x"), ("f", "b"), ("users", "u 1", "v1")]
    assert store.list_namespaces() == every
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "x")]
    assert store.list_namespaces(max_depth=1) == [("a",), ("f",), ("users",)]
    assert store.list_namespaces(suffix=("b",)) == [("f", "b")]
    assert store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d", "e"), ("f", "b")]
    assert store.list_namespaces(suffix=("b", "*")) == [("a", "b", "c")]
    assert store.list_namespaces(prefix=("a",), suffix=("c",)) == [("a", "b", "c")]
    assert store.list_namespaces(prefix=("users", "u 1")) == [("users", "u 1", "v1")]
    assert store.list_namespaces(limit=2, offset=1) == every[1:3]
    assert store.list_namespaces(prefix=("zzz",)) == []


def _fill_items(store: BaseStore) -> None:
    for i in range(7):
        store.put(
            ("docs", "d"), f"k{i}", {"i": i, "kind": "even" if i % 2 == 0 else "odd", "tag": {"x": i % 3}}
        )
    store.put(("docs", "e"), "k9", {"i": 9, "kind": "odd", "tag": {"x": 0}})
    store.put(("docsx",), "k0", {"i": 100, "kind": "even"})


def _keys(items: list[Any]) -> list[tuple[tuple[str, ...], str]]:
    return [(item.namespace, item.key) for item in items]


def check_search_filters_and_pages(store: BaseStore) -> None:
    _fill_items(store)
    everything = store.search(("docs",), limit=100)
    assert _keys(everything) == [(("docs", "d"), f"k{i}") for i in range(7)] + [(("docs", "e"), "k9")]
    assert all(item.score is None for item in everything)
    assert store.search(("docs",), limit=3, offset=2) == everything[2:5]
    assert store.search(("docs",), limit=5, offset=6) == everything[6:]
    assert _keys(store.search((), limit=100)) == [*_keys(everything), (("docsx",), "k0")]
    evens = store.search(("docs",), filter={"kind": "even"}, limit=100)
    assert [item.value["i"] for item in evens] == [0, 2, 4, 6]
    page = store.search(("docs",), filter={"kind": "even"}, limit=2, offset=1)
    assert [item.value["i"] for item in page] == [2, 4]
    ops = {
        "$gt": [5, 6, 9],
        "$gte": [4, 5, 6, 9],
        "$lt": [0, 1],
        "$lte": [0, 1, 2],
        "$ne": [0, 1, 2, 3, 5, 6, 9],
        "$eq": [4],
    }
    for op, expected in ops.items():
        bound = {"$gt": 4, "$gte": 4, "$lt": 2, "$lte": 2, "$ne": 4, "$eq": 4}[op]
        found = store.search(("docs",), filter={"i": {op: bound}}, limit=100)
        assert [item.value["i"] for item in found] == expected, op
    both = store.search(("docs",), filter={"i": {"$gte": 2, "$lt": 6}, "kind": "odd"}, limit=100)
    assert [item.value["i"] for item in both] == [3, 5]
    nested = store.search(("docs",), filter={"tag": {"x": 0}}, limit=100)
    assert [item.value["i"] for item in nested] == [0, 3, 6, 9]
    assert store.search(("docs",), filter={"kind": "none"}) == []


def check_query_search(store: BaseStore) -> None:
    ns = ("notes", "u-1")
    store.put(ns, "ferry", {"text": "the okapi ferry leaves from pier four"})
    store.put(ns, "bread", {"text": "sourdough bread needs a starter"})
    store.put(ns, "hidden", {"text": "okapi ferry pier secret"}, index=False)
    store.put(("other",), "ferry", {"text": "the okapi ferry leaves from pier four"})
    found = store.search(("notes",), query="okapi ferry pier", limit=10)
    scored = [item for item in found if item.score is not None]
    assert scored and scored[0].key == "ferry"  # the best match first
    assert {item.namespace for item in found} == {ns}  # the prefix holds for a query too
    # An item put with index=False is never ranked (InMemoryStore appends it unscored).
    assert all(item.key != "hidden" for item in scored)
    assert store.search(("notes",), query="okapi ferry pier", filter={"text": "nothing"}) == []


def check_batch(store: BaseStore) -> None:
    store.put(("b", "1"), "old", {"v": 0})
    store.put(("b", "2"), "gone", {"v": -1})
    # Reads of ("b", "1") and writes of ("b", "2"): the answers do not depend on whether a store
    # answers a batch's reads before its writes (InMemoryStore) or after (PostgresStore, MnemoStore).
    results = store.batch(
        [
            PutOp(("b", "2"), "new", {"v": 1}),
            GetOp(("b", "1"), "old"),
            SearchOp(("b", "1"), None, 10, 0, None),
            ListNamespacesOp(None, None, 10, 0),
            GetOp(("b", "1"), "missing"),
            PutOp(("b", "2"), "gone", None),
        ]
    )
    assert len(results) == 6
    assert results[0] is None and results[5] is None
    got = results[1]
    assert got is not None and got.value == {"v": 0}  # type: ignore[union-attr]
    assert _keys(results[2]) == [(("b", "1"), "old")]  # type: ignore[arg-type]
    assert results[3] == [("b", "1"), ("b", "2")]
    assert results[4] is None
    assert store.get(("b", "2"), "gone") is None
    new = store.get(("b", "2"), "new")
    assert new is not None and new.value == {"v": 1}


async def acheck_async_operations(store: BaseStore) -> None:
    ns = ("async", "u")
    await store.aput(ns, "a", {"x": 1})
    await store.aput(ns, "b", {"x": 2})
    item = await store.aget(ns, "a")
    assert item is not None and item.value == {"x": 1}
    assert [i.key for i in await store.asearch(("async",), filter={"x": {"$gt": 1}})] == ["b"]
    assert await store.alist_namespaces(prefix=("async",)) == [ns]
    await store.adelete(ns, "a")
    assert await store.aget(ns, "a") is None
    results = await store.abatch([GetOp(ns, "b"), PutOp(ns, "c", {"x": 3})])
    assert results[0] is not None and results[1] is None
    assert [i.key for i in await store.asearch(ns)] == ["b", "c"]


CHECKS: list[Callable[[BaseStore], None]] = [
    check_put_get_update_delete,
    check_namespace_rules,
    check_list_namespaces,
    check_search_filters_and_pages,
    check_query_search,
    check_batch,
]
ASYNC_CHECKS: list[Callable[[BaseStore], Awaitable[None]]] = [acheck_async_operations]
