"""LlamaIndex: `MnemoVectorStore`, a llama-index-core vector store kept in the evidence archive.

    store = MnemoVectorStore(mnemo.as_(principal))                 # or AsyncMnemo, MnemoClient, ...
    index = VectorStoreIndex.from_vector_store(store, embed_model=...)
    index.insert(Document(text="The ferry leaves at 07:40.", metadata={"page": 3}))
    nodes = index.as_retriever(similarity_top_k=4, filters=MetadataFilters(...)).retrieve("ferry")

The store keeps text (`stores_text`): each node is one evidence record (see
mnemo_sea.integrations.documents), its text the record's body and its metadata LlamaIndex's
own node dict (`node_to_metadata_dict`: the node's metadata at the top level, where filters
read it, and the rest of the node, relationships included, under `_node_content`), so a query
gives back the node that was added. A batch of nodes is one `ingest`: all or nothing.

Ids: a node of a document is the record `doc:<ref_doc_id>/<node_id>`, a node without one
`node:<node_id>`, each part with every character outside `A-Za-z0-9._:@-` written `#XX` (its
UTF-8 bytes), so the `/` between them is unambiguous and `delete(ref_doc_id)` deletes exactly
the records listed under `doc:<ref_doc_id>/`. `delete_nodes(node_ids)` finds a node's record
among the `doc:` records (one listing of them: it costs as many as there are).

A query is the archive's hybrid search of `query_str` (BM25 and the archive's own embedding
model; `query_embedding` is not used, and a query without `query_str` is NotImplementedError:
vectors from another model cannot be compared with the archive's). `is_embedding_query` is
False, so a `VectorStoreIndex` retriever does not embed queries; inserting still calls the
index's `embed_model`, whose vectors are dropped (give it a `MockEmbedding`). Modes: default
and hybrid are the hybrid search, text_search and sparse its BM25 leg; others are
NotImplementedError. `filters` (MetadataFilters, nested, with AND, OR or NOT; operators EQ, NE,
GT, GTE, LT, LTE, IN, NIN) go to the archive as pre-filters where it has them (`source`,
`scope`, `kind`: the record's fields), the rest are checked on the hits' metadata over a search
widened to 5 k (at most 100), so fewer than k nodes may match; `doc_ids` and `node_ids` are
checked the same way (an empty list is no restriction). A record the store did not write
(ingested another way) comes back as a TextNode with the record's id. Similarities are the
hits' relevance (a cosine, raised by a strong BM25 match).

Deleting needs an admin handle (`delete_evidence`; Forbidden otherwise, before anything is
deleted); the receipts are kept in `last_receipts`. Blocking methods need a blocking handle; the
async ones (`async_add`, `aquery`, `adelete`, `adelete_nodes`) await an async handle natively
and run a blocking one in a worker thread. Needs the `[llama-index]` extra.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import PrivateAttr

from mnemo_sea.integrations import documents as d
from mnemo_sea.integrations.handles import check_handle
from mnemo_sea.integrations.id_escapes import IdEscape
from mnemo_sea.integrations.plans import arun_plan, run_plan
from mnemo_sea.integrations.search import framework_missing

try:
    from llama_index.core.schema import BaseNode, MetadataMode, TextNode
    from llama_index.core.vector_stores.types import (
        BasePydanticVectorStore,
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
        VectorStoreQuery,
        VectorStoreQueryMode,
        VectorStoreQueryResult,
    )
    from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
except ImportError as e:
    raise framework_missing("llama_index_vectorstore", "llama-index-core", "llama-index", e) from e

if TYPE_CHECKING:
    from mnemo_sea.archive import DeletionReceipt
    from mnemo_sea.integrations.handles import AsyncHandle, Handle
    from mnemo_sea.system.mnemo import SearchHit

DEFAULT_SOURCE = "llama_index"
DOCUMENT_PREFIX = "doc:"
NODE_PREFIX = "node:"
# A part of a record id: `/` (between a document's part and a node's) and `#` (the mark) escaped.
_PART = IdEscape(frozenset(string.ascii_letters + string.digits + "._:@-"), "#", upper=True)
_OPERATORS = {
    FilterOperator.EQ: "==",
    FilterOperator.NE: "!=",
    FilterOperator.GT: ">",
    FilterOperator.GTE: ">=",
    FilterOperator.LT: "<",
    FilterOperator.LTE: "<=",
    FilterOperator.IN: "in",
    FilterOperator.NIN: "nin",
}
_MODES = {
    VectorStoreQueryMode.DEFAULT: None,  # the store's mode
    VectorStoreQueryMode.HYBRID: "hybrid",
    VectorStoreQueryMode.TEXT_SEARCH: "bm25",
    VectorStoreQueryMode.SPARSE: "bm25",
}


def evidence_id_of(node_id: str, ref_doc_id: str | None) -> str:
    """The record id of a node (see the module docstring)."""
    if ref_doc_id is None:
        return f"{NODE_PREFIX}{_PART.encode(node_id)}"
    return f"{DOCUMENT_PREFIX}{_PART.encode(ref_doc_id)}/{_PART.encode(node_id)}"


def node_id_of(evidence_id: str) -> str:
    """The node id of one of the store's records; a record it did not write keeps its own id."""
    part = None
    if evidence_id.startswith(DOCUMENT_PREFIX) and "/" in evidence_id:
        part = evidence_id.rsplit("/", 1)[1]
    elif evidence_id.startswith(NODE_PREFIX):
        part = evidence_id[len(NODE_PREFIX) :]
    node_id = None if part is None else _PART.decode(part)
    return evidence_id if node_id is None else node_id


class MnemoVectorStore(BasePydanticVectorStore):
    """Nodes kept as evidence records, searched by the archive (see the module docstring)."""

    stores_text: bool = True
    is_embedding_query: bool = False
    source: str = DEFAULT_SOURCE
    scope: str = "default"
    kinds: tuple[str, ...] | None = ("knowledge",)
    mode: str = "hybrid"

    _handle: Handle | AsyncHandle = PrivateAttr()
    _receipts: list[DeletionReceipt] = PrivateAttr(default_factory=list)

    def __init__(self, handle: Handle | AsyncHandle, **settings: Any) -> None:
        super().__init__(**settings)
        self._handle = check_handle(handle, "MnemoVectorStore")

    @classmethod
    def class_name(cls) -> str:
        return "MnemoVectorStore"

    @property
    def client(self) -> Handle | AsyncHandle:
        """The handle the store acts through."""
        return self._handle

    @property
    def last_receipts(self) -> list[DeletionReceipt]:
        """The receipts of the last delete or delete_nodes, one per record deleted."""
        return self._receipts

    # ---- adding ---------------------------------------------------------------------------------

    def _adding(self, nodes: Sequence[BaseNode]) -> d.Plan[list[str]]:
        new = [
            d.NewDocument(
                evidence_id_of(node.node_id, node.ref_doc_id),
                node.get_content(metadata_mode=MetadataMode.NONE),
                node_to_metadata_dict(node, remove_text=True, flat_metadata=False),
            )
            for node in nodes
        ]
        yield from d.add(d.evidence_inputs(new, source=self.source, scope=self.scope))
        return [node.node_id for node in nodes]

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store the nodes in one ingest (all or nothing); their ids. InvalidBatch names every
        bad node (no text, metadata not JSON, an id given twice, an id the archive refuses)."""
        return run_plan(self._handle, self._adding(nodes))

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await arun_plan(self._handle, self._adding(nodes))

    # ---- deleting -------------------------------------------------------------------------------

    def _deleting_document(self, ref_doc_id: str) -> d.Plan[int]:
        self._receipts = []
        ids = yield from d.ids_starting_with(f"{DOCUMENT_PREFIX}{_PART.encode(ref_doc_id)}/")
        deleted = yield from d.delete(ids, self._receipts)
        return deleted

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the document `ref_doc_id` (nothing when it has none)."""
        run_plan(self._handle, self._deleting_document(ref_doc_id))

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await arun_plan(self._handle, self._deleting_document(ref_doc_id))

    def _deleting_nodes(self, node_ids: list[str] | None, filters: MetadataFilters | None) -> d.Plan[int]:
        if filters is not None or node_ids is None:
            raise NotImplementedError(
                "MnemoVectorStore.delete_nodes deletes by node_ids only, without filters"
            )
        self._receipts = []
        wanted = {_PART.encode(node_id) for node_id in node_ids}
        of_documents = yield from d.ids_starting_with(DOCUMENT_PREFIX)
        ids = [i for i in of_documents if i.rsplit("/", 1)[-1] in wanted]
        ids += [f"{NODE_PREFIX}{part}" for part in sorted(wanted)]
        deleted = yield from d.delete(ids, self._receipts)
        return deleted

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Delete these nodes (a missing one is skipped)."""
        run_plan(self._handle, self._deleting_nodes(node_ids, filters))

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        await arun_plan(self._handle, self._deleting_nodes(node_ids, filters))

    # ---- querying -------------------------------------------------------------------------------

    def _querying(self, query: VectorStoreQuery) -> d.Plan[VectorStoreQueryResult]:
        if not query.query_str:
            raise NotImplementedError(
                "MnemoVectorStore searches by query_str: the archive embeds queries with its own "
                "model, so a query_embedding from another one cannot be compared"
            )
        if query.mode not in _MODES:
            raise NotImplementedError(
                f"MnemoVectorStore does not offer the query mode {query.mode.value!r}; "
                f"one of {', '.join(m.value for m in _MODES)}"
            )
        predicate = _predicate(query.filters)
        # An empty list is no restriction: `VectorStoreIndex.as_retriever` passes the ids of its
        # index struct as node_ids, which is empty for a store that keeps the text (other stores
        # read it the same way).
        if query.doc_ids:
            wanted_docs = d.Condition("ref_doc_id", "in", list(query.doc_ids))
            predicate = wanted_docs if predicate is None else d.AllOf((predicate, wanted_docs))
        nodes = frozenset(query.node_ids) if query.node_ids else None

        def keep(hit: SearchHit) -> bool:
            return node_id_of(hit.evidence_id) in nodes  # type: ignore[operator]

        found = yield from d.search(
            query.query_str,
            query.similarity_top_k,
            d.split(predicate),
            kinds=self.kinds,
            mode=_MODES[query.mode] or self.mode,
            keep=None if nodes is None else keep,
        )
        made = [_node(doc) for doc in found]
        return VectorStoreQueryResult(
            nodes=made,
            similarities=[0.0 if doc.score is None else doc.score for doc in found],
            ids=[node.node_id for node in made],
        )

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return run_plan(self._handle, self._querying(query))

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await arun_plan(self._handle, self._querying(query))


def _node(doc: d.StoredDocument) -> BaseNode:
    if "_node_content" in doc.metadata:
        return metadata_dict_to_node(doc.metadata, text=doc.text)
    return TextNode(id_=doc.evidence_id, text=doc.text, metadata=doc.metadata)


def _predicate(filters: MetadataFilters | None) -> d.Predicate | None:
    """MetadataFilters as a predicate; NotImplementedError names an operator not offered."""
    if filters is None or not filters.filters:
        return None
    parts: list[d.Predicate] = []
    for one in filters.filters:
        if isinstance(one, MetadataFilters):
            inner = _predicate(one)
            if inner is not None:
                parts.append(inner)
            continue
        assert isinstance(one, MetadataFilter)
        if one.operator not in _OPERATORS:
            raise NotImplementedError(
                f"MnemoVectorStore does not offer the filter operator {one.operator.value!r}; "
                f"one of {', '.join(op.value for op in _OPERATORS)}"
            )
        parts.append(d.Condition(one.key, _OPERATORS[one.operator], one.value))
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.OR:
        return d.AnyOf(tuple(parts))
    if condition == FilterCondition.NOT:
        return d.NoneOf(tuple(parts))
    return parts[0] if len(parts) == 1 else d.AllOf(tuple(parts))


__all__ = ["MnemoVectorStore", "evidence_id_of", "node_id_of"]
