"""A LangGraph store kept in the archive: `MnemoStore`, a `BaseStore` of memory facts.

    store = MnemoStore(mnemo.as_(agent))              # or MnemoClient(url, api_key=...)
    graph = builder.compile(store=store)               # nodes get it as `store`

Each item is a memory fact of the handle's tenant (mnemo_sea/integrations/store_items.py):
owner = the namespace (`lg:` and its labels), key = the item's key (any text, escaped
reversibly), value = the item's dict as
JSON, provenance `tool_fact` (the application's code asserts it; a model inference would not be
kept under the default policy), `ttl` (minutes) = the fact's TTL. So an item gets, for free,
versions (`history`), deletion receipts (`delete_with_receipt`), TTL expiry hidden at read time
and purged by the worker or `sweep_ttl`, and hybrid search. The tenant is the handle's, never a
namespace's: another tenant's same namespace is another owner in another tenant.

Semantics, as LangGraph's stores (InMemoryStore, PostgresStore) have them, with these choices:

- `batch` applies its puts and deletes first (the last one of a key wins), then answers its
  reads in order, so a read sees the batch's writes (as PostgresStore; InMemoryStore reads first).
  Every put is validated before the first write (ValueError: a namespace too long to be an owner,
  a key over 100 characters once escaped, a value over 8,000 characters of JSON, a bad TTL), so
  bad input stores nothing; each write is then its own transaction.
- `created_at` is when the item's current run of versions began (a put after expiry or deletion
  starts a new one), `updated_at` when its current version was written.
- `search` without a query lists by namespace, then key; a filter is applied to the facts as
  read, page by page, so `offset`/`limit` count matching items. With a query it is the archive's
  hybrid search over the matching namespaces' owners (kind memory), in its order, `score` the
  hit's relevance (its cosine in [-1, 1], raised by a strong BM25 match); at most the 100 best
  hits of each search are ranked, and an item put with `index=False` is left out (InMemoryStore
  appends such items unscored instead). The archive embeds with its own model: the `index`
  config is accepted for compatibility, and its `dims`, `embed` and `fields` (and a put's list of
  fields) are not used: the whole value is indexed.
- `list_namespaces` lists namespaces holding at least one current item (InMemoryStore keeps one
  that was emptied).
- TTL runs from the item's last put: a read never writes, so `refresh_ttl` / `refresh_on_read`
  are not supported (an explicit `refresh_on_read: True` is a ValueError); an expired item reads
  as missing at once, swept or not. `sweep_interval_minutes` is not run by the store: the
  deployment's worker purges on its own schedule, `sweep_ttl()` now (admin only).

A blocking handle serves `batch`, and `abatch` in a worker thread; an async handle serves
`abatch` natively, and `batch` raises TypeError (its coroutines belong to the caller's loop).
Every operation is written once, as a plan of handle calls (`Plan`) that both runners execute.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from mnemo_sea.archive import (
    DeletionReceipt,
    InvalidInput,
    MemoryFact,
    MemoryIndexId,
    NotFound,
    parse_index_id,
)
from mnemo_sea.integrations.handles import check_handle
from mnemo_sea.integrations.plans import LISTING_PAGE, Plan, arun_plan, every_item, run_plan
from mnemo_sea.integrations.plans import call as _call
from mnemo_sea.integrations.search import framework_missing
from mnemo_sea.integrations.store_items import (
    fact_key,
    is_text,
    item_key,
    matches_filter,
    namespace_matches,
    namespace_of,
    owner_of,
    owner_prefix,
    require_fact_key,
    require_owner,
    stored_value,
    value_text,
)

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        validate_op_namespace,
    )
except ImportError as e:  # pragma: no cover - exercised in a subprocess (tests/integrations/test_imports.py)
    raise framework_missing("langgraph", "langgraph", "langgraph", e) from e

if TYPE_CHECKING:
    from mnemo_sea.archive import MemoryOwner
    from mnemo_sea.integrations.handles import AsyncHandle, Handle

T = TypeVar("T")

PROVENANCE = "tool_fact"
SEARCH_HITS = 100  # the archive's most hits per search (system.operations.SearchOp)
OWNERS_PER_SEARCH = 256  # the most owners one search's pre-filter names (limits.FILTER_VALUES)
_MAX_TTL_MINUTES = 36_500 * 24 * 60  # the archive's longest TTL (RememberOp.ttl_seconds)


def _purge() -> Plan[DeletionReceipt | None]:
    receipt: DeletionReceipt | None = yield from _call("purge_expired")
    return receipt


# ---- what the archive answers, as items -------------------------------------------------------------


@dataclass(frozen=True)
class ItemVersion:
    """One version of an item, as `MnemoStore.history` lists them: `status` is `active`,
    `superseded` or `expired` (past its TTL, until the purge deletes it)."""

    namespace: tuple[str, ...]
    key: str
    version: int
    value: dict[str, Any] | None  # None: a fact under the store's owner the store did not write
    indexed: bool
    status: str
    created_at: datetime
    expires_at: datetime | None


def _current_item(
    namespace: tuple[str, ...], key: str, versions: Sequence[MemoryFact]
) -> tuple[Item, bool] | None:
    """The item of a fact's history (oldest first) and whether it is indexed; None when no
    version is current. It was created when its current run began: the first version after a
    gap (a version that expired before the next was written)."""
    at = next((i for i in range(len(versions) - 1, -1, -1) if versions[i].status == "active"), None)
    if at is None:
        return None
    stored = stored_value(versions[at].value)
    if stored is None:
        return None
    start = at
    while start > 0 and not versions[start - 1].expired(versions[start].created_at):
        start -= 1
    item = Item(
        value=stored.value,
        key=key,
        namespace=namespace,
        created_at=versions[start].created_at,
        updated_at=versions[at].created_at,
    )
    return item, stored.indexed


def _search_item(item: Item, score: float | None = None) -> SearchItem:
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


@dataclass(frozen=True)
class _Write:
    owner: str
    key: str
    text: str | None  # None: delete
    ttl_seconds: float | None


def _check_ttl(minutes: object) -> float | None:
    if minutes is None:
        return None
    if (
        isinstance(minutes, bool)
        or not isinstance(minutes, int | float)
        or not math.isfinite(minutes)
        or not 0 < minutes <= _MAX_TTL_MINUTES
    ):
        raise ValueError(
            f"ttl must be a positive number of minutes, at most {_MAX_TTL_MINUTES}; got {minutes!r}"
        )
    return float(minutes) * 60


def _check_put_namespace(namespace: tuple[str, ...]) -> None:
    # BaseStore.put checks these, but an op handed to batch directly has not been through it.
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace}')


def _prepared_writes(ops: Sequence[Op]) -> list[_Write]:
    """The batch's puts and deletes, the last of each item winning, every one checked: a bad one
    raises before anything is written."""
    writes: dict[tuple[tuple[str, ...], str], _Write | None] = {}
    for op in ops:
        if not isinstance(op, PutOp):
            continue
        namespace = tuple(op.namespace)
        if op.value is None:
            owner = owner_of(namespace)
            # An item that cannot be stored does not exist: deleting it deletes nothing.
            key = fact_key(op.key)
            writes[(namespace, op.key)] = _Write(owner, key, None, None) if owner and key else None
            continue
        _check_put_namespace(namespace)
        text = value_text(op.value, indexed=op.index is not False)
        writes[(namespace, op.key)] = _Write(
            require_owner(namespace), require_fact_key(op.key), text, _check_ttl(op.ttl)
        )
    return [w for w in writes.values() if w is not None]


# ---- the store ---------------------------------------------------------------------------------------


class MnemoStore(BaseStore):
    """A LangGraph `BaseStore` whose items are memory facts of the handle's tenant (see the
    module's docstring for the mapping and the semantics)."""

    supports_ttl = True

    def __init__(
        self, handle: Handle | AsyncHandle, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None
    ) -> None:
        self.handle = check_handle(handle, "MnemoStore")
        if ttl is not None:
            if ttl.get("refresh_on_read") is True:
                raise ValueError(
                    "MnemoStore does not refresh a TTL on read (a read never writes to the archive): "
                    "leave refresh_on_read unset or False; a TTL runs from the item's last put"
                )
            _check_ttl(ttl.get("default_ttl"))
        self.ttl_config = ttl
        # Accepted for compatibility: the archive embeds every fact with its own model.
        self.index_config = index

    def __repr__(self) -> str:
        return f"MnemoStore({self.handle!r})"

    # ---- BaseStore's primitive ----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._blocking(self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._awaited(self._batch(list(ops)))

    # ---- what the archive adds ----------------------------------------------------------------------

    def history(self, namespace: tuple[str, ...], key: str) -> list[ItemVersion]:
        """Every version of an item, oldest first: superseded and expired ones until a delete or the
        purge removes them ([] for an item never stored)."""
        return self._blocking(self._history(tuple(namespace), key))

    async def ahistory(self, namespace: tuple[str, ...], key: str) -> list[ItemVersion]:
        return await self._awaited(self._history(tuple(namespace), key))

    def delete_with_receipt(self, namespace: tuple[str, ...], key: str) -> DeletionReceipt | None:
        """Delete an item with every version, its index points and cached searches, answering the
        archive's signed receipt (check it with `verify_deleted`); None when there was nothing."""
        return self._blocking(self._forget(tuple(namespace), key))

    async def adelete_with_receipt(self, namespace: tuple[str, ...], key: str) -> DeletionReceipt | None:
        return await self._awaited(self._forget(tuple(namespace), key))

    def sweep_ttl(self) -> DeletionReceipt | None:
        """Purge the tenant's expired memory now (every expired fact of the tenant, not only this
        store's), answering the receipt, None when nothing had expired. Needs an admin handle:
        any other raises the archive's Forbidden. Expired items read as missing without it."""
        return self._blocking(_purge())

    async def asweep_ttl(self) -> DeletionReceipt | None:
        return await self._awaited(_purge())

    # ---- runners ------------------------------------------------------------------------------------

    # Input the archive refuses (a query over its length, say) is a ValueError, as LangGraph's
    # stores raise for bad input; the archive's InvalidInput is its cause.

    def _blocking(self, plan: Plan[T]) -> T:
        try:
            return run_plan(self.handle, plan)
        except InvalidInput as e:
            raise ValueError(e.message) from e

    async def _awaited(self, plan: Plan[T]) -> T:
        try:
            return await arun_plan(self.handle, plan)
        except InvalidInput as e:
            raise ValueError(e.message) from e

    # ---- plans --------------------------------------------------------------------------------------

    def _batch(self, ops: list[Op]) -> Plan[list[Result]]:
        for op in ops:
            if not isinstance(op, GetOp | SearchOp | ListNamespacesOp | PutOp):
                raise ValueError(f"Unknown operation type: {type(op)}")
            validate_op_namespace(op)
        for write in _prepared_writes(ops):
            if write.text is None:
                yield from self._forget_owned(write.owner, write.key)
            else:
                yield from _call(
                    "remember", write.owner, write.key, write.text, PROVENANCE, ttl_seconds=write.ttl_seconds
                )
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = yield from self._get(tuple(op.namespace), op.key)
                results.append(found[0] if found else None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list_namespaces(op)))
            else:
                results.append(None)
        return results

    def _get(self, namespace: tuple[str, ...], key: str) -> Plan[tuple[Item, bool] | None]:
        owner, stored_key = owner_of(namespace), fact_key(key)
        if owner is None or stored_key is None:
            return None  # it could not have been stored
        versions = yield from _call("memory_history", owner, stored_key)
        return _current_item(namespace, key, versions)

    def _history(self, namespace: tuple[str, ...], key: str) -> Plan[list[ItemVersion]]:
        owner, stored_key = owner_of(namespace), fact_key(key)
        if owner is None or stored_key is None:
            return []
        versions: list[MemoryFact] = yield from _call("memory_history", owner, stored_key)
        shown = []
        for fact in versions:
            stored = stored_value(fact.value)
            shown.append(
                ItemVersion(
                    namespace,
                    key,
                    fact.version,
                    None if stored is None else stored.value,
                    stored is None or stored.indexed,
                    fact.status,
                    fact.created_at,
                    fact.expires_at,
                )
            )
        return shown

    def _forget(self, namespace: tuple[str, ...], key: str) -> Plan[DeletionReceipt | None]:
        owner, stored_key = owner_of(namespace), fact_key(key)
        if owner is None or stored_key is None:
            return None
        return (yield from self._forget_owned(owner, stored_key))

    def _forget_owned(self, owner: str, key: str) -> Plan[DeletionReceipt | None]:
        try:
            receipt: DeletionReceipt = yield from _call("forget", owner, key)
        except NotFound:
            return None  # deleting a missing item is no error in a store
        else:
            return receipt

    def _owners(self, prefix: Sequence[str]) -> Plan[list[tuple[tuple[str, ...], MemoryOwner]]]:
        """The namespaces starting with `prefix` (`*` labels match any) that hold a current item,
        with their owners, by namespace."""
        literal: list[str] = []
        for label in prefix:
            if label == "*":
                break
            literal.append(label)
        if not all(is_text(label) for label in literal):
            return []  # no namespace the store can hold starts so
        owners: list[MemoryOwner] = yield from every_item("list_memory_owners", prefix=owner_prefix(literal))
        found = []
        for listed in owners:
            namespace = namespace_of(listed.owner)
            if (
                namespace is not None
                and listed.facts > 0
                and namespace_matches(namespace, prefix, suffix=False)
            ):
                found.append((namespace, listed))
        return sorted(found, key=lambda pair: pair[0])

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[list[tuple[str, ...]]]:
        conditions = op.match_conditions or ()
        prefix = next((c.path for c in conditions if c.match_type == "prefix"), ())
        for condition in conditions:
            if condition.match_type not in ("prefix", "suffix"):
                raise ValueError(f"Unsupported match type: {condition.match_type}")
        owners = yield from self._owners(prefix)
        namespaces = [
            ns
            for ns, _ in owners
            if all(namespace_matches(ns, c.path, suffix=c.match_type == "suffix") for c in conditions)
        ]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return namespaces[op.offset : op.offset + op.limit]

    def _search(self, op: SearchOp) -> Plan[list[SearchItem]]:
        if op.offset < 0:
            raise ValueError(f"offset must be 0 or more, got {op.offset}")
        if op.limit <= 0:
            return []
        owners = yield from self._owners(tuple(op.namespace_prefix))
        if op.query:
            return (yield from self._ranked(op, owners))
        return (yield from self._listed(op, owners))

    def _listed(
        self, op: SearchOp, owners: list[tuple[tuple[str, ...], MemoryOwner]]
    ) -> Plan[list[SearchItem]]:
        """The page of matching items, by namespace and key. Without a filter, whole owners are
        skipped by their count of current facts; with one, facts are read and matched in order,
        so `offset` counts matching items. An item with more than one version has its history
        read (when its current run of versions began); one with a single version does not."""
        picked: list[tuple[tuple[str, ...], MemoryFact]] = []
        skip = op.offset  # items still to pass over before the page
        for namespace, listed in owners:
            if not op.filter and skip >= listed.facts:
                skip -= listed.facts
                continue
            start = 0 if op.filter else skip
            skip = skip if op.filter else 0
            while len(picked) < op.limit:
                want = LISTING_PAGE if op.filter else min(op.limit - len(picked), LISTING_PAGE)
                facts: list[MemoryFact] = yield from _call("facts", listed.owner, offset=start, limit=want)
                for fact in facts:
                    stored = stored_value(fact.value)
                    if (
                        stored is None
                        or item_key(fact.key) is None
                        or not matches_filter(stored.value, op.filter)
                    ):
                        continue
                    if skip > 0:
                        skip -= 1
                    elif len(picked) < op.limit:
                        picked.append((namespace, fact))
                if len(facts) < want:
                    break
                start += want
            if len(picked) >= op.limit:
                break
        items = []
        for namespace, fact in picked:
            stored, key = stored_value(fact.value), item_key(fact.key)
            if key is None:
                continue
            if fact.version == 1 and stored is not None:  # its only version: its run began with it
                items.append(SearchItem(namespace, key, stored.value, fact.created_at, fact.created_at))
                continue
            found = yield from self._get(namespace, key)  # the history says when its run began
            if found is not None:
                items.append(_search_item(found[0]))
        return items

    def _ranked(
        self, op: SearchOp, owners: list[tuple[tuple[str, ...], MemoryOwner]]
    ) -> Plan[list[SearchItem]]:
        """The archive's hybrid search over the owners, mapped back to items; a hit of an item put
        with index=False, or failing the filter, is dropped before offset and limit count."""
        by_owner = {listed.owner: namespace for namespace, listed in owners}
        names = sorted(by_owner)
        hits = []
        for start in range(0, len(names), OWNERS_PER_SEARCH):
            result = yield from _call(
                "search",
                op.query,
                limit=SEARCH_HITS,
                kinds=["memory"],
                owners=names[start : start + OWNERS_PER_SEARCH],
            )
            hits.extend(result.raise_for_status().hits)
        if len(names) > OWNERS_PER_SEARCH:  # several searches: relevance compares across them
            hits.sort(key=lambda h: h.relevance if h.relevance is not None else -2.0, reverse=True)
        ranked: list[SearchItem] = []
        for hit in hits:
            if len(ranked) >= op.offset + op.limit:
                break
            ref = parse_index_id(hit.evidence_id)
            if not isinstance(ref, MemoryIndexId) or ref.owner not in by_owner:
                continue
            key = item_key(ref.key)
            if key is None:
                continue
            found = yield from self._get(by_owner[ref.owner], key)
            if found is None or not found[1] or not matches_filter(found[0].value, op.filter):
                continue
            ranked.append(_search_item(found[0], hit.relevance if hit.relevance is not None else hit.score))
        return ranked[op.offset :]


__all__ = ["PROVENANCE", "ItemVersion", "MnemoStore"]
