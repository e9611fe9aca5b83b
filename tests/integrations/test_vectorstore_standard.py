"""LangChain's standard suites (langchain-tests) for the vector store and the retriever.

`MnemoVectorStore` runs `VectorStoreIntegrationTests` twice: on a blocking handle (its async
methods then run the handle in a worker thread) and on an async handle (`AsyncMnemo`, awaited
natively; the suite's sync tests are off there, by its `has_sync` flag, since a blocking call
cannot await that handle). Each test gets an empty store: a fresh tenant on one Mnemo, as an
admin (the suite deletes). `MnemoRetriever` runs `RetrieversIntegrationTests` on a tenant seeded
with five documents; its number of results is `limit`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests
from vector_helpers import admin

from mnemo_sea.archive import EvidenceInput
from mnemo_sea.integrations.langchain import MnemoRetriever
from mnemo_sea.integrations.langchain_vectorstore import MnemoVectorStore
from mnemo_sea.integrations.search import InProcessSearcher
from mnemo_sea.system.acting import AsyncMnemo
from mnemo_sea.system.mnemo import Mnemo

# pytest-asyncio runs in strict mode here: the suites' coroutine tests need its marker, which
# marks their plain tests too (pytest-asyncio then warns, and runs them as they are).
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:The test <Function .*> is marked with '@pytest.mark.asyncio'"),
]


class TestMnemoVectorStore(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, vector_mnemo: Mnemo) -> Iterator[VectorStore]:
        yield MnemoVectorStore(vector_mnemo.as_(admin()))


class TestMnemoVectorStoreOnAsyncHandle(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, vector_mnemo: Mnemo) -> Iterator[VectorStore]:
        yield MnemoVectorStore(AsyncMnemo(vector_mnemo, admin()))

    @property
    def has_sync(self) -> bool:
        return False  # an async handle's coroutines cannot be run by a blocking call


class TestMnemoRetriever(RetrieversIntegrationTests):
    searcher: InProcessSearcher

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _seeded(cls, vector_mnemo: Mnemo) -> None:
        principal = admin()
        vector_mnemo.ingest(
            principal,
            [
                EvidenceInput(
                    f"The okapi ferry number {i} leaves pier {i} at dawn.", "kb/ferries", f"ferry-{i}"
                )
                for i in range(5)
            ],
        )
        cls.searcher = InProcessSearcher(vector_mnemo, principal)

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return MnemoRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"searcher": self.searcher}

    @property
    def retriever_query_example(self) -> str:
        return "okapi ferry"

    @property
    def num_results_arg_name(self) -> str:
        return "limit"
