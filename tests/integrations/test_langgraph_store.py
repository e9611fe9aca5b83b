"""MnemoStore in process: the checks every LangGraph store passes (store_checks.py, also run on
LangGraph's InMemoryStore), then what the archive adds and holds: all-or-nothing puts, versions,
receipts, TTL against the system's clock, and tenants that never see each other's namespaces,
checked in the archive's tables. The REST path is tests/client/test_client_langgraph_store.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypedDict

import pytest
from fakes import ManualWallClock
from hypothesis import given
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp
from sqlalchemy import func, select
from store_checks import ASYNC_CHECKS, CHECKS, in_memory_store

from mnemo_sea.archive import Forbidden, Principal, Role, Sensitivity
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.integrations.langgraph import MnemoStore
from mnemo_sea.integrations.store_items import namespace_of, owner_of
from mnemo_sea.system.acting import AsyncMnemo, MnemoAs
from mnemo_sea.system.mnemo import Mnemo


def principal(tenant: str, role: Role = Role.AGENT) -> Principal:
    return Principal(tenant, "assistant", frozenset({role}), Sensitivity.INTERNAL)


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def rows(mnemo: Mnemo, tenant: str, **where: Any) -> int:
    """Memory versions of `tenant` in the archive's table, read raw."""
    m = t.memory_facts
    stmt = select(func.count()).select_from(m).where(m.c.tenant_id == tenant)
    for column, value in where.items():
        stmt = stmt.where(m.c[column] == value)
    with mnemo.archive.store.read() as conn:
        return int(conn.execute(stmt).scalar_one())


def _store(kind: str, mnemo: Mnemo, tenant: str) -> BaseStore:
    return in_memory_store() if kind == "memory" else MnemoStore(mnemo.as_(principal(tenant)))


@pytest.mark.parametrize("kind", ["memory", "mnemo"])
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_a_store_behaves_as_langgraph_s_own(
    kind: str, check: Callable[[BaseStore], None], mnemo: Mnemo, tenant: str
) -> None:
    check(_store(kind, mnemo, tenant))


@pytest.mark.parametrize("kind", ["memory", "mnemo", "mnemo-async-handle"])
@pytest.mark.parametrize("check", ASYNC_CHECKS, ids=lambda c: c.__name__)
def test_a_store_behaves_as_langgraph_s_own_when_awaited(
    kind: str, check: Callable[[BaseStore], Awaitable[None]], mnemo: Mnemo, tenant: str
) -> None:
    if kind == "mnemo-async-handle":
        store: BaseStore = MnemoStore(AsyncMnemo(mnemo, principal(tenant)))
    else:
        store = _store(kind, mnemo, tenant)
    asyncio.run(check(store))  # type: ignore[arg-type]


# ---- the mapping -------------------------------------------------------------------------------------


@given(
    st.lists(st.text(min_size=1, max_size=6).filter(lambda s: "." not in s and "\x00" not in s), min_size=1)
)
def test_a_namespace_and_its_owner_convert_both_ways(labels: list[str]) -> None:
    owner = owner_of(labels)
    if owner is not None:
        assert namespace_of(owner) == tuple(labels)
        assert owner.startswith("lg:")


def test_an_owner_the_store_did_not_write_is_no_namespace() -> None:
    assert namespace_of("alice") is None
    assert namespace_of("lg:a.2E") is None  # not the canonical escape
    assert namespace_of("lg:a..b") is None
    assert namespace_of("lg:a:b") == ("a", "b")


def test_an_item_is_a_memory_fact_of_the_handle_s_tenant(mnemo: Mnemo, tenant: str) -> None:
    store = MnemoStore(mnemo.as_(principal(tenant)))
    store.put(("users", "u 1"), "prefs", {"tea": "green"}, ttl=None)
    fact = mnemo.current(principal(tenant), "lg:users:u.201", "prefs")
    assert fact is not None
    assert (fact.value, fact.provenance) == ('{"tea":"green"}', "tool_fact")


@pytest.mark.parametrize(
    ("key", "stored"),
    [
        ("m1", "m1"),
        ("prefs/food.v2", "prefs/food.v2"),
        ("food pref", "food:20pref"),
        ("user:42", "user:3a42"),
        ("_draft", "k::_draft"),
        ("", "k::"),
        ("猫の好み", "k::" + "".join(f":{b:02x}" for b in "猫の好み".encode())),
        ("k::x", "k:3a:3ax"),
    ],
)
def test_any_text_key_is_kept_and_read_back(mnemo: Mnemo, tenant: str, key: str, stored: str) -> None:
    # LangGraph's own stores take any string key; the fact's key is its reversible escape.
    store = MnemoStore(mnemo.as_(principal(tenant)))
    store.put(("ns",), key, {"a": key, "t": "okapi"})
    item = store.get(("ns",), key)
    assert item is not None and (item.key, item.value) == (key, {"a": key, "t": "okapi"})
    assert mnemo.current(principal(tenant), "lg:ns", stored) is not None  # the fact's key, raw
    assert [i.key for i in store.search(("ns",))] == [key]
    assert [i.key for i in store.search(("ns",), query="okapi")] == [key]  # a hit's fact key, read back
    store.delete(("ns",), key)
    assert store.get(("ns",), key) is None and rows(mnemo, tenant) == 0


def test_a_fact_key_the_store_could_not_have_written_is_not_an_item(mnemo: Mnemo, tenant: str) -> None:
    # Written by other means under the store's owner: `k::a` would be `a`, and `x:zz` is no escape.
    for key in ("k::a", "x:zz"):
        mnemo.remember(principal(tenant), "lg:ns", key, '{"a":1}', "tool_fact")
    store = MnemoStore(mnemo.as_(principal(tenant)))
    assert store.search(("ns",)) == []
    assert store.get(("ns",), "a") is None


def test_bad_input_stores_nothing_of_the_batch(mnemo: Mnemo, tenant: str) -> None:
    store = MnemoStore(mnemo.as_(principal(tenant)))
    good = PutOp(("ns",), "good", {"a": 1})
    for bad in [
        PutOp(("ns",), "big", {"a": "x" * 8_000}),
        PutOp(("ns",), "é" * 17, {"a": 1}),  # 17 characters, 102 once escaped (two bytes, three each)
        PutOp(("ns",), "\ud800", {"a": 1}),  # a key that is not text
        PutOp(("ns",), "k" * 101, {"a": 1}),
        PutOp(("n" * 130,), "k", {"a": 1}),
        PutOp(("ns",), "nan", {"a": float("nan")}),
        PutOp(("ns",), "obj", {"a": object()}),
        PutOp(("ns",), "ttl", {"a": 1}, ttl=-1),
        PutOp(("ns",), "surrogate", {"a": "\ud800"}),  # not UTF-8: the archive could not store it
        PutOp(("\ud800",), "k", {"a": 1}),
    ]:
        with pytest.raises(ValueError):
            store.batch([good, bad])
    assert rows(mnemo, tenant) == 0
    assert store.get(("n" * 130,), "k") is None  # an item that cannot be stored reads as missing
    assert store.get(("\ud800",), "k") is None
    assert store.search(("\ud800",)) == []
    with pytest.raises(InvalidNamespaceError):  # an op handed to batch directly is checked too
        store.batch([good, GetOp(("a.b",), "k")])
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("langgraph",), "k", {"a": 1})])
    assert rows(mnemo, tenant) == 0
    store.put(("ns",), "k", {"a": 1})
    with pytest.raises(ValueError, match="query"):  # the archive's own refusal, as LangGraph raises it
        store.search(("ns",), query="x" * 20_000)


def test_a_batch_answers_its_reads_after_its_writes(mnemo: Mnemo, tenant: str) -> None:
    store = MnemoStore(mnemo.as_(principal(tenant)))
    got, _, _ = store.batch(
        [GetOp(("ns",), "k"), PutOp(("ns",), "k", {"v": 1}), PutOp(("ns",), "k", {"v": 2})]
    )
    assert got is not None and got.value == {"v": 2}  # type: ignore[union-attr]
    assert rows(mnemo, tenant) == 1  # the last put of a key wins; the first is never written


def test_updates_are_versions_and_created_at_is_kept(mnemo: Mnemo, tenant: str) -> None:
    store = MnemoStore(mnemo.as_(principal(tenant)))
    store.put(("ns",), "k", {"v": 1})
    store.put(("ns",), "k", {"v": 2}, index=False)
    item = store.get(("ns",), "k")
    history = store.history(("ns",), "k")
    assert [(v.version, v.value, v.indexed, v.status) for v in history] == [
        (1, {"v": 1}, True, "superseded"),
        (2, {"v": 2}, False, "active"),
    ]
    assert item is not None
    assert (item.created_at, item.updated_at) == (history[0].created_at, history[1].created_at)


class CountingHandle(MnemoAs):
    """A blocking in-process handle that counts the reads of a fact's history."""

    histories = 0

    def memory_history(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.histories += 1
        return super().memory_history(*args, **kwargs)


def test_a_listing_reads_the_history_of_updated_items_only(mnemo: Mnemo, tenant: str) -> None:
    handle = CountingHandle(mnemo, principal(tenant))
    store = MnemoStore(handle)
    store.put(("ns",), "a", {"v": 1})
    store.put(("ns",), "a", {"v": 2})
    for key in ("b", "c"):
        store.put(("ns",), key, {"v": 0})
    handle.histories = 0
    listed = store.search(("ns",))
    assert handle.histories == 1  # a's: when its run of versions began; b and c have one version
    (first, _) = store.history(("ns",), "a")
    assert [(i.key, i.value, i.created_at) for i in listed][:1] == [("a", {"v": 2}, first.created_at)]
    assert all(i.created_at == i.updated_at for i in listed[1:])


def test_a_delete_leaves_no_row_and_answers_a_receipt(mnemo: Mnemo, tenant: str) -> None:
    store = MnemoStore(mnemo.as_(principal(tenant)))
    store.put(("ns",), "k", {"v": 1})
    store.put(("ns",), "k", {"v": 2})
    receipt = store.delete_with_receipt(("ns",), "k")
    assert receipt is not None and len(receipt.memory_facts) == 2
    assert rows(mnemo, tenant) == 0
    assert mnemo.verify_deleted(principal(tenant, Role.ADMIN), receipt).ok
    assert store.delete_with_receipt(("ns",), "k") is None
    assert store.history(("ns",), "k") == []


def test_another_tenant_s_same_namespace_reads_as_missing(mnemo: Mnemo, tenant: str) -> None:
    other = f"{tenant}-b"
    MnemoStore(mnemo.as_(principal(other))).put(("users", "u1"), "k", {"secret": "okapi ferry"})
    store = MnemoStore(mnemo.as_(principal(tenant)))
    assert store.get(("users", "u1"), "k") is None
    assert store.search(("users",)) == []
    assert store.search(("users",), query="okapi ferry") == []
    assert store.list_namespaces() == []
    assert store.delete_with_receipt(("users", "u1"), "k") is None
    assert rows(mnemo, tenant) == 0
    assert rows(mnemo, other) == 1


# ---- TTL against the system's clock ------------------------------------------------------------------


def test_an_item_expires_ttl_minutes_after_its_put(
    mnemo: Mnemo, tenant: str, wall_clock: ManualWallClock
) -> None:
    store = MnemoStore(mnemo.as_(principal(tenant)), ttl={"default_ttl": 5})
    assert store.supports_ttl
    store.put(("ns",), "short", {"v": 1})  # the store's default TTL
    store.put(("ns",), "long", {"v": 2}, ttl=60)
    store.put(("ns",), "kept", {"v": 3}, ttl=None)
    (short,) = store.history(("ns",), "short")
    assert short.expires_at == short.created_at + timedelta(minutes=5)
    wall_clock.advance(6 * 60)
    assert store.get(("ns",), "short") is None
    assert [i.key for i in store.search(("ns",))] == ["kept", "long"]
    wall_clock.advance(60 * 60)
    assert [i.key for i in store.search(("ns",))] == ["kept"]
    assert store.list_namespaces() == [("ns",)]
    assert rows(mnemo, tenant) == 3  # hidden, not yet purged
    with pytest.raises(Forbidden):
        store.sweep_ttl()  # an agent may not purge
    receipt = MnemoStore(mnemo.as_(principal(tenant, Role.ADMIN))).sweep_ttl()
    assert receipt is not None and len(receipt.memory_facts) == 2
    assert rows(mnemo, tenant) == 1
    store.put(("ns",), "short", {"v": 4}, ttl=1)  # a new run: created anew
    again = store.get(("ns",), "short")
    assert again is not None and again.created_at == again.updated_at


def test_refresh_on_read_is_refused_rather_than_ignored(mnemo: Mnemo, tenant: str) -> None:
    with pytest.raises(ValueError, match="refresh"):
        MnemoStore(mnemo.as_(principal(tenant)), ttl={"refresh_on_read": True})


def test_an_async_handle_serves_only_the_async_methods(mnemo: Mnemo, tenant: str) -> None:
    store = MnemoStore(AsyncMnemo(mnemo, principal(tenant)))
    with pytest.raises(TypeError, match="async"):
        store.get(("ns",), "k")
    with pytest.raises(TypeError, match="handle"):
        MnemoStore(mnemo)  # type: ignore[arg-type]


# ---- a graph -----------------------------------------------------------------------------------------


class Turn(TypedDict):
    user: str
    said: str
    recalled: list[str]


def remember_and_recall(state: Turn, *, store: BaseStore) -> dict[str, Any]:
    ns = ("memories", state["user"])
    store.put(ns, f"m{len(store.search(ns, limit=100))}", {"text": state["said"]})
    return {"recalled": [item.value["text"] for item in store.search(ns, query=state["said"], limit=3)]}


def test_a_graph_s_memories_land_in_the_archive(mnemo: Mnemo, tenant: str) -> None:
    builder = StateGraph(Turn)
    builder.add_node("remember_and_recall", remember_and_recall)
    builder.add_edge(START, "remember_and_recall")
    builder.add_edge("remember_and_recall", END)
    graph = builder.compile(store=MnemoStore(mnemo.as_(principal(tenant))))
    graph.invoke({"user": "u-1", "said": "I keep okapis", "recalled": []})
    out = graph.invoke({"user": "u-1", "said": "my okapis like ferries", "recalled": []})
    assert set(out["recalled"]) == {"I keep okapis", "my okapis like ferries"}
    assert rows(mnemo, tenant, owner="lg:memories:u-1") == 2
    hits = mnemo.search(principal(tenant), "okapis ferries", kinds=["memory"]).raise_for_status().hits
    assert {h.evidence_id for h in hits} == {"memory:lg:memories:u-1/m0", "memory:lg:memories:u-1/m1"}
