"""Both vector stores through the REST client against a real API process, blocking and async:
the same classes as in process (tests/integrations/test_vectorstores.py), what they wrote and
deleted read from the archive's tables."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from client_helpers import Served
from langchain_core.documents import Document
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

from mnemo_sea.archive import Forbidden, InvalidBatch
from mnemo_sea.archive.storage import schema as t
from mnemo_sea.client import AsyncMnemoClient, MnemoClient
from mnemo_sea.integrations.langchain_vectorstore import MnemoVectorStore as LangChainStore
from mnemo_sea.integrations.llama_index_vectorstore import MnemoVectorStore as LlamaStore

FERRY = "The okapi ferry leaves pier 4 at dawn."
MAP = "The okapi enclosure is beside the ferry pier."
SOURCE = NodeRelationship.SOURCE


def test_the_langchain_store_through_the_client(served: Served) -> None:
    tenant, other = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    docs = [
        Document(FERRY, id="1", metadata={"n": 1, "tags": ["a"]}),
        Document(MAP, id="2", metadata={"n": 2}),
    ]
    with MnemoClient(served.base_url, api_key=served.key(other, "admin")) as theirs:
        LangChainStore(theirs).add_documents(
            [Document(d.page_content, id=d.id, metadata={"n": 9}) for d in docs]
        )
    with (
        MnemoClient(served.base_url, api_key=served.key(tenant, "admin")) as admin,
        MnemoClient(served.base_url, api_key=served.key(tenant, "agent")) as agent,
    ):
        store = LangChainStore(admin)
        # JSON has no date: sent as it is, the client would turn it into a string the server keeps.
        with pytest.raises(InvalidBatch, match="datetime"):
            store.add_documents([Document(FERRY, id="ok"), Document(MAP, metadata={"at": datetime.now(UTC)})])
        assert served.count(t.evidence, tenant) == 0
        assert store.add_documents(docs) == ["1", "2"]
        found = store.similarity_search("okapi ferry pier", k=5)
        assert sorted(found, key=lambda d: d.id or "") == docs  # whole texts, metadata as added
        assert store.similarity_search("okapi ferry", k=2, filter={"n": 2}) == [docs[1]]
        assert store.get_by_ids(["2", "1", "3"]) == [docs[1], docs[0]]
        with pytest.raises(Forbidden):
            LangChainStore(agent).delete(["1"])
        assert served.count(t.evidence, tenant) == 2
        store.delete(["1", "missing"])
        assert [r.target for r in store.last_receipts] == ["evidence:1"]
    assert served.count(t.evidence, tenant, evidence_id="1") == 0
    assert served.count(t.evidence, tenant) == 1
    assert served.count(t.evidence, other) == 2  # the other tenant's same ids untouched

    async def remote() -> list[Document]:
        async with AsyncMnemoClient(served.base_url, api_key=served.key(tenant, "admin")) as client:
            store = LangChainStore(client)
            await store.aadd_documents([Document(FERRY, id="1", metadata={"n": 3})])
            found = await store.asimilarity_search("okapi ferry dawn", k=5)
            await store.adelete(["2"])
            return found + await store.aget_by_ids(["1", "2"])

    found = asyncio.run(remote())
    assert sorted(d.id or "" for d in found) == ["1", "1", "2"]
    assert all(d.metadata["n"] != 9 for d in found)
    assert served.count(t.evidence, tenant) == 1


def test_the_llama_index_store_through_the_client(served: Served) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    nodes = [
        TextNode(
            text=text,
            id_=node_id,
            metadata={"topic": topic},
            relationships={SOURCE: RelatedNodeInfo(node_id=ref)},
        )
        for text, node_id, topic, ref in [(FERRY, "n1", "ferry", "doc-a"), (MAP, "n2", "map", "doc-b")]
    ]
    with MnemoClient(served.base_url, api_key=served.key(tenant, "admin")) as admin:
        store = LlamaStore(admin)
        assert store.add(nodes) == ["n1", "n2"]
        query = VectorStoreQuery(
            query_str="okapi ferry pier",
            similarity_top_k=2,
            filters=MetadataFilters(filters=[MetadataFilter(key="topic", value="map")]),
        )
        result = store.query(query)
        assert [(n.node_id, n.ref_doc_id, n.get_content()) for n in result.nodes or []] == [
            ("n2", "doc-b", MAP)
        ]
        store.delete("doc-a")
    assert served.count(t.evidence, tenant) == 1

    async def remote() -> list[str]:
        async with AsyncMnemoClient(served.base_url, api_key=served.key(tenant, "admin")) as client:
            store = LlamaStore(client)
            result = await store.aquery(VectorStoreQuery(query_str="okapi", similarity_top_k=5))
            await store.adelete_nodes(["n2"])
            return result.ids or []

    assert asyncio.run(remote()) == ["n2"]
    assert served.count(t.evidence, tenant) == 0
