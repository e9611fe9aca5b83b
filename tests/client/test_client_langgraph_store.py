"""MnemoStore through the REST clients: the same store checks as in process and on LangGraph's
InMemoryStore (tests/integrations/store_checks.py), on MnemoClient (sync flavour) and natively on
AsyncMnemoClient (async flavour), each in a tenant of its own; what they wrote is counted raw.

Needs the clients' `facts` and `list_memory_owners(prefix=)` and search's `owners` (the core
branch of issue 30)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from client_helpers import Tenant

from mnemo_sea.archive.storage import schema as t
from mnemo_sea.integrations.langgraph import MnemoStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integrations"))
from langgraph.store.base import BaseStore
from store_checks import ASYNC_CHECKS, CHECKS


def _store(tenant: Tenant) -> tuple[MnemoStore, Callable[..., object]]:
    client = tenant.client()
    if tenant.flavour == "sync":
        return MnemoStore(client), asyncio.run
    # SyncOfAsync: the AsyncMnemoClient itself, its coroutines run on the helper's loop.
    return MnemoStore(client.client), client.loop.run_until_complete


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_store_checks_pass_through_the_client(check: Callable[[BaseStore], None], tenant: Tenant) -> None:
    store, _ = _store(tenant)
    if tenant.flavour == "sync":
        check(store)
    else:
        with pytest.raises(TypeError, match="async"):  # an async client serves the async methods only
            store.get(("ns",), "k")


@pytest.mark.parametrize("check", ASYNC_CHECKS, ids=lambda c: c.__name__)
def test_the_async_store_checks_pass_through_the_client(check: Callable[..., object], tenant: Tenant) -> None:
    store, run = _store(tenant)
    run(check(store))
    assert tenant.count(t.memory_facts) == 2  # b and c; a was deleted with its row


def test_another_tenant_s_namespace_reads_as_missing_through_the_api(tenant: Tenant) -> None:
    store, run = _store(tenant)
    other = Tenant(tenant.served, "sync")
    try:
        MnemoStore(other.client()).put(("users", "u1"), "k", {"secret": "okapi ferry"})

        async def reads() -> list[object]:
            return [
                await store.aget(("users", "u1"), "k"),
                await store.asearch(("users",)),
                await store.asearch(("users",), query="okapi ferry"),
                await store.alist_namespaces(),
            ]

        assert run(reads()) == [None, [], [], []]
        assert tenant.count(t.memory_facts) == 0 and other.count(t.memory_facts) == 1
    finally:
        other.close()
