"""The vector stores (LangChain's and LlamaIndex's MnemoVectorStore) in process: what a user
relies on beyond the standard suite, checked against the archive's tables where it is state.

Each test takes fresh tenants on one Mnemo (hashing embedder): a store starts empty.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import Document as LlamaDocument
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from vector_helpers import admin, agent, blob_rows, evidence_rows, tenant

from mnemo_sea.archive import EvidenceInput, Forbidden, InvalidBatch, InvalidInput
from mnemo_sea.integrations.langchain_vectorstore import MnemoVectorStore as LangChainStore
from mnemo_sea.integrations.llama_index_vectorstore import MnemoVectorStore as LlamaStore
from mnemo_sea.integrations.llama_index_vectorstore import evidence_id_of, node_id_of
from mnemo_sea.system.acting import AsyncMnemo, MnemoAs
from mnemo_sea.system.mnemo import Mnemo

FERRY = "The okapi ferry leaves pier 4 at dawn."
MAP = "The okapi enclosure is beside the ferry pier."
BUS = "The night bus stops at the zoo gate."
METADATA = {
    "page": 3,
    "tags": ["ferry", "timetable"],
    "nested": {"ok": True, "x": 1.5, "none": None},
    "é": "ü",
}


def lc_store(mnemo: Mnemo, **settings: Any) -> LangChainStore:
    return LangChainStore(mnemo.as_(admin()), **settings)


class SpyHandle(MnemoAs):
    """A blocking in-process handle that records the keyword arguments of each search."""

    searches: list[dict[str, Any]]

    def search(self, query: str, /, **kwargs: Any) -> Any:  # type: ignore[override]
        self.searches.append(kwargs)
        return super().search(query, **kwargs)


# ---- LangChain -----------------------------------------------------------------------------------


def test_a_document_comes_back_whole_with_its_metadata(vector_mnemo: Mnemo) -> None:
    store = lc_store(vector_mnemo)
    long_text = FERRY + " " + " ".join(f"Filler sentence number {i} about nothing." for i in range(300))
    (doc_id,) = store.add_documents([Document(long_text, metadata=METADATA)])
    (found,) = store.similarity_search("okapi ferry dawn", k=1)
    assert found == Document(long_text, metadata=METADATA, id=doc_id)  # the whole text, not a span
    assert store.get_by_ids([doc_id, "missing"]) == [found]
    ((scored, score),) = store.similarity_search_with_relevance_scores("okapi ferry dawn", k=1)
    assert scored == found and 0.0 <= score <= 1.0


def test_the_metadata_source_names_the_record_source_and_filters_are_pre_or_post(vector_mnemo: Mnemo) -> None:
    principal = admin()
    handle = SpyHandle(vector_mnemo, principal)
    handle.searches = []
    store = LangChainStore(handle, scope="zoo")
    store.add_documents(
        [
            Document(FERRY, metadata={"source": "kb/ferry", "page": 1}, id="ferry"),
            Document(MAP, metadata={"source": "kb/map", "page": 2}, id="map"),
            Document(BUS, metadata={"page": 3}, id="bus"),
        ]
    )
    record, _ = vector_mnemo.get_evidence(principal, "bus")
    assert (record.source, record.scope) == ("langchain", "zoo")

    def ids(**kwargs: Any) -> list[str | None]:
        return sorted(doc.id for doc in store.similarity_search("okapi ferry pier bus", k=3, **kwargs))

    assert ids(filter={"source": "kb/map"}) == ["map"]
    assert handle.searches[-1]["sources"] == ["kb/map"] and handle.searches[-1]["limit"] == 3
    assert ids(filter={"page": {"$gte": 2}}) == ["bus", "map"]
    assert handle.searches[-1]["sources"] is None and handle.searches[-1]["limit"] == 15  # widened
    assert ids(filter={"$or": [{"page": 1}, {"source": "langchain"}]}) == ["bus", "ferry"]
    assert ids(filter={"page": {"$in": [1, 3]}, "scope": "zoo"}) == ["bus", "ferry"]
    assert handle.searches[-1]["scopes"] == ["zoo"]
    assert ids(filter={"page": {"$nin": [1, 3]}}) == ["map"]
    assert ids(filter={"page": {"$ne": 2}, "kind": "knowledge"}) == ["bus", "ferry"]
    assert ids(filter={"absent": "x"}) == []
    with pytest.raises(ValueError, match="unknown filter operator"):
        store.similarity_search("okapi", filter={"page": {"$near": 1}})


def test_adding_is_all_or_nothing_and_bad_metadata_stores_nothing(vector_mnemo: Mnemo) -> None:
    principal = admin()
    store = LangChainStore(vector_mnemo.as_(principal))
    bad: list[dict[str, Any]] = [
        {"when": datetime(2024, 1, 1, tzinfo=UTC)},
        {"pair": {1, 2}},
        {"x": math.nan},
        {"nested": {1: "int key"}},
        {"long": "x" * 70_000},  # over the archive's 64 KiB of metadata
    ]
    for metadata in bad:
        with pytest.raises(InvalidBatch) as raised:
            store.add_documents([Document(FERRY, metadata={"ok": 1}), Document(MAP, metadata=metadata)])
        assert isinstance(raised.value, InvalidInput)
        assert [p["index"] for p in raised.value.detail["problems"]] == [1]
    with pytest.raises(InvalidBatch):
        store.add_documents([Document(FERRY), Document("   ")])
    with pytest.raises(InvalidBatch, match="also the id of item 0"):
        store.add_documents([Document(FERRY, id="a"), Document(MAP, id="a")])
    with pytest.raises(InvalidBatch):  # an id the archive refuses: the archive's own check, same batch
        store.add_documents([Document(FERRY, id="ok"), Document(MAP, id="no spaces allowed")])
    assert evidence_rows(vector_mnemo, principal.tenant_id) == 0
    assert blob_rows(vector_mnemo, principal.tenant_id) == 0


def test_deleting_leaves_no_row_and_needs_an_admin(vector_mnemo: Mnemo) -> None:
    principal = admin()
    store = LangChainStore(vector_mnemo.as_(principal))
    store.add_documents([Document(FERRY, id="ferry"), Document(MAP, id="map"), Document(BUS, id="bus")])
    store.add_documents([Document(FERRY + " Also at noon.", id="ferry")])  # a second version
    assert evidence_rows(vector_mnemo, principal.tenant_id, evidence_id="ferry") == 2

    refused = LangChainStore(vector_mnemo.as_(agent(principal.tenant_id)))
    with pytest.raises(Forbidden):
        refused.delete(["ferry", "map"])
    assert evidence_rows(vector_mnemo, principal.tenant_id) == 4  # nothing deleted

    assert store.delete(["ferry", "missing", "map"]) is True
    assert [r.target for r in store.last_receipts] == ["evidence:ferry", "evidence:map"]
    for receipt in store.last_receipts:
        check = vector_mnemo.verify_deleted(principal, receipt)
        assert check.archive_leftovers == () and check.index_leftovers == ()
    assert evidence_rows(vector_mnemo, principal.tenant_id, evidence_id="ferry") == 0
    assert evidence_rows(vector_mnemo, principal.tenant_id, evidence_id="map") == 0
    assert [d.id for d in store.similarity_search("okapi ferry", k=5)] == ["bus"]
    store.delete(["bus"])
    assert evidence_rows(vector_mnemo, principal.tenant_id) == 0
    assert blob_rows(vector_mnemo, principal.tenant_id) == 0


def test_another_tenant_with_the_same_ids_and_texts_is_never_seen(vector_mnemo: Mnemo) -> None:
    mine, theirs = lc_store(vector_mnemo), lc_store(vector_mnemo)
    docs = [Document(FERRY, id="1"), Document(MAP, id="2")]
    theirs.add_documents([Document(d.page_content, id=d.id, metadata={"owner": "them"}) for d in docs])
    theirs.add_documents([Document(BUS, id="3", metadata={"owner": "them"})])
    mine.add_documents([Document(d.page_content, id=d.id, metadata={"owner": "me"}) for d in docs])

    seen = mine.similarity_search("okapi ferry night bus zoo", k=10) + mine.get_by_ids(["1", "2", "3"])
    assert [d.metadata["owner"] for d in seen].count("them") == 0
    assert sorted(d.id for d in mine.similarity_search("night bus zoo gate", k=10)) == ["1", "2"]
    mine.delete(["1", "2", "3"])  # "3" is theirs: missing here, skipped
    assert len(mine.last_receipts) == 2
    other = theirs.handle.principal  # type: ignore[union-attr]
    assert evidence_rows(vector_mnemo, other.tenant_id) == 3
    assert sorted(d.id for d in theirs.get_by_ids(["1", "2", "3"])) == ["1", "2", "3"]


def test_no_vectors_and_no_blocking_call_on_an_async_handle(vector_mnemo: Mnemo) -> None:
    store = lc_store(vector_mnemo)
    assert store.embeddings is None
    with pytest.raises(NotImplementedError, match="searches by text only"):
        store.similarity_search_by_vector([0.1, 0.2])
    with pytest.raises(TypeError, match="needs handle="):
        LangChainStore.from_texts([FERRY])
    awaited = LangChainStore(AsyncMnemo(vector_mnemo, admin()))
    with pytest.raises(TypeError, match="is async"):
        awaited.add_texts([FERRY])
    with pytest.raises(TypeError, match="not a Mnemo"):
        LangChainStore(vector_mnemo)  # type: ignore[arg-type]


def test_from_texts_and_the_retriever(vector_mnemo: Mnemo) -> None:
    handle = vector_mnemo.as_(admin())
    store = LangChainStore.from_texts([FERRY, MAP, BUS], None, [{"n": 1}, {"n": 2}, {"n": 3}], handle=handle)
    retriever = store.as_retriever(search_kwargs={"k": 2, "filter": {"n": {"$lte": 2}}})
    docs = retriever.invoke("okapi ferry pier")
    assert sorted(d.metadata["n"] for d in docs) == [1, 2]
    threshold = store.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.99}
    )
    assert all(d.page_content in (FERRY, MAP, BUS) for d in threshold.invoke("okapi ferry"))


def test_async_methods_await_an_async_handle(vector_mnemo: Mnemo) -> None:
    principal = admin()

    async def main() -> tuple[list[str], list[Document], list[Document]]:
        store = LangChainStore(AsyncMnemo(vector_mnemo, principal))
        ids = await store.aadd_texts([FERRY, MAP], [{"n": 1}, {"n": 2}])
        found = await store.asimilarity_search("okapi", k=2, filter={"n": 2})
        await store.adelete([ids[0]])
        return ids, found, await store.aget_by_ids(ids)

    ids, found, left = asyncio.run(main())
    assert [d.page_content for d in found] == [MAP]
    assert [d.id for d in left] == [ids[1]]
    assert evidence_rows(vector_mnemo, principal.tenant_id) == 1


# ---- LlamaIndex -----------------------------------------------------------------------------------


def test_node_ids_map_to_record_ids_and_back() -> None:
    for node_id, ref in [("n-1", "doc-1"), ("a/b#c d", "/home/x/file.txt"), ("ü", None)]:
        evidence_id = evidence_id_of(node_id, ref)
        assert node_id_of(evidence_id) == node_id
        assert evidence_id.startswith("doc:" if ref else "node:")
    assert evidence_id_of("n", "a/b") == "doc:a#2Fb/n"  # the document's part holds no "/"
    # A record the store did not write keeps its own id, even when it looks like an escape.
    for foreign in ("node:#zz", "doc:a/b#C3", "node:#2f", "doc:x/#"):
        assert node_id_of(foreign) == foreign


TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)  # Unicode text: no lone surrogate


@given(TEXT, st.none() | TEXT)
def test_any_node_id_comes_back_from_its_record_id(node_id: str, ref: str | None) -> None:
    assert node_id_of(evidence_id_of(node_id, ref)) == node_id


def llama_index(mnemo: Mnemo) -> tuple[VectorStoreIndex, LlamaStore, str]:
    principal = admin()
    store = LlamaStore(mnemo.as_(principal), scope="zoo")
    index = VectorStoreIndex.from_vector_store(store, embed_model=MockEmbedding(embed_dim=8))
    for doc_id, text, metadata in [
        ("timetable", FERRY, {"page": 1, "topic": "ferry"}),
        ("map", MAP, {"page": 2, "topic": "zoo"}),
        ("buses", BUS, {"page": 3, "topic": "bus"}),
    ]:
        index.insert(LlamaDocument(text=text, id_=doc_id, metadata=metadata))
    return index, store, principal.tenant_id


def test_an_index_retrieves_the_nodes_it_inserted(vector_mnemo: Mnemo) -> None:
    index, _, tenant_id = llama_index(vector_mnemo)
    (hit,) = index.as_retriever(similarity_top_k=1).retrieve("okapi ferry dawn")
    assert hit.node.get_content() == FERRY
    assert hit.node.metadata == {"page": 1, "topic": "ferry"}
    assert hit.node.ref_doc_id == "timetable"
    assert hit.score is not None
    assert (
        evidence_rows(vector_mnemo, tenant_id, evidence_id=evidence_id_of(hit.node.node_id, "timetable")) == 1
    )


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ([MetadataFilter(key="page", value=1)], ["ferry"]),
        ([MetadataFilter(key="page", value=1, operator=FilterOperator.NE)], ["bus", "zoo"]),
        ([MetadataFilter(key="page", value=2, operator=FilterOperator.GT)], ["bus"]),
        ([MetadataFilter(key="page", value=2, operator=FilterOperator.GTE)], ["bus", "zoo"]),
        ([MetadataFilter(key="page", value=2, operator=FilterOperator.LT)], ["ferry"]),
        ([MetadataFilter(key="page", value=2, operator=FilterOperator.LTE)], ["ferry", "zoo"]),
        ([MetadataFilter(key="topic", value=["zoo", "bus"], operator=FilterOperator.IN)], ["bus", "zoo"]),
        ([MetadataFilter(key="topic", value=["zoo", "bus"], operator=FilterOperator.NIN)], ["ferry"]),
        ([MetadataFilter(key="page", value=1), MetadataFilter(key="topic", value="zoo")], []),
        ([MetadataFilter(key="scope", value="zoo"), MetadataFilter(key="page", value=3)], ["bus"]),
    ],
)
def test_metadata_filters(vector_mnemo: Mnemo, filters: list[MetadataFilter], expected: list[str]) -> None:
    index, _, _ = llama_index(vector_mnemo)
    retriever = index.as_retriever(similarity_top_k=3, filters=MetadataFilters(filters=filters))
    assert (
        sorted(n.node.metadata["topic"] for n in retriever.retrieve("okapi ferry pier bus zoo")) == expected
    )


def test_or_and_nested_filters_and_the_ids_of_a_query(vector_mnemo: Mnemo) -> None:
    _, store, _ = llama_index(vector_mnemo)
    either = MetadataFilters(
        filters=[
            MetadataFilter(key="page", value=1),
            MetadataFilters(
                filters=[
                    MetadataFilter(key="topic", value="bus"),
                    MetadataFilter(key="source", value="llama_index"),
                ]
            ),
        ],
        condition=FilterCondition.OR,
    )
    result = store.query(
        VectorStoreQuery(query_str="okapi ferry pier bus zoo", similarity_top_k=3, filters=either)
    )
    assert sorted(n.metadata["topic"] for n in result.nodes or []) == ["bus", "ferry"]
    assert result.ids == [n.node_id for n in result.nodes or []]
    by_doc = store.query(
        VectorStoreQuery(query_str="okapi ferry pier bus", similarity_top_k=3, doc_ids=["map"])
    )
    assert [n.ref_doc_id for n in by_doc.nodes or []] == ["map"]
    with pytest.raises(NotImplementedError, match="query_str"):
        store.query(VectorStoreQuery(query_embedding=[0.1] * 8, similarity_top_k=1))
    with pytest.raises(NotImplementedError, match="text_match"):
        store.query(
            VectorStoreQuery(
                query_str="okapi",
                filters=MetadataFilters(
                    filters=[MetadataFilter(key="t", value="x", operator=FilterOperator.TEXT_MATCH)]
                ),
            )
        )


def test_deleting_a_document_deletes_its_nodes_only(vector_mnemo: Mnemo) -> None:
    index, store, tenant_id = llama_index(vector_mnemo)
    index.insert_nodes([TextNode(text=BUS + " Extra.", id_="lonely", metadata={"topic": "lonely"})])
    assert evidence_rows(vector_mnemo, tenant_id) == 4
    (timetable,) = index.as_retriever(similarity_top_k=1).retrieve("okapi ferry dawn")
    index.delete_ref_doc("timetable")
    assert [r.target for r in store.last_receipts] == [
        f"evidence:{evidence_id_of(timetable.node.node_id, 'timetable')}"
    ]
    assert evidence_rows(vector_mnemo, tenant_id) == 3
    topics = {
        n.node.metadata["topic"] for n in index.as_retriever(similarity_top_k=5).retrieve("okapi ferry dawn")
    }
    assert topics == {"zoo", "bus", "lonely"}
    store.delete_nodes(["lonely"])
    store.delete("missing-document")
    assert evidence_rows(vector_mnemo, tenant_id) == 2
    (map_node,) = (
        store.query(VectorStoreQuery(query_str="enclosure", similarity_top_k=1, doc_ids=["map"])).nodes or []
    )
    store.delete_nodes([map_node.node_id])
    assert evidence_rows(vector_mnemo, tenant_id) == 1


def test_a_query_by_node_ids_passes_over_records_written_another_way(vector_mnemo: Mnemo) -> None:
    index, store, _ = llama_index(vector_mnemo)
    handle = store.client
    handle.ingest([EvidenceInput(FERRY, "elsewhere", evidence_id="doc:x/#zz")])  # type: ignore[union-attr]
    (wanted,) = index.as_retriever(similarity_top_k=1).retrieve("okapi enclosure beside")
    found = store.query(
        VectorStoreQuery(query_str="okapi ferry pier", similarity_top_k=5, node_ids=[wanted.node.node_id])
    )
    assert found.ids == [wanted.node.node_id]


def test_a_batch_of_nodes_is_all_or_nothing(vector_mnemo: Mnemo) -> None:
    principal = admin()
    store = LlamaStore(vector_mnemo.as_(principal))
    with pytest.raises(InvalidBatch):
        store.add([TextNode(text=FERRY, id_="a"), TextNode(text="", id_="b")])
    assert evidence_rows(vector_mnemo, principal.tenant_id) == 0


def test_llama_isolation_and_async(vector_mnemo: Mnemo) -> None:
    _, _, their_tenant = llama_index(vector_mnemo)
    principal = admin(tenant())
    mine = LlamaStore(AsyncMnemo(vector_mnemo, principal))

    async def main() -> tuple[list[str], list[str]]:
        await mine.async_add([TextNode(text=FERRY, id_="same", metadata={"topic": "mine"})])
        result = await mine.aquery(
            VectorStoreQuery(query_str="okapi ferry pier bus zoo", similarity_top_k=10)
        )
        await mine.adelete_nodes(["same"])
        await mine.adelete("timetable")  # theirs: not found here
        return [n.metadata["topic"] for n in result.nodes or []], result.ids or []

    topics, ids = asyncio.run(main())
    assert topics == ["mine"] and ids == ["same"]
    assert evidence_rows(vector_mnemo, principal.tenant_id) == 0
    assert evidence_rows(vector_mnemo, their_tenant) == 3
    assert mine.last_receipts == []  # adelete("timetable") found nothing of theirs to delete
