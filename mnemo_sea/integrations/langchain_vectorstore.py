"""LangChain: `MnemoVectorStore`, a langchain-core `VectorStore` kept in the evidence archive.

    store = MnemoVectorStore(mnemo.as_(principal))                 # or AsyncMnemo, MnemoClient, ...
    ids = store.add_documents([Document("The ferry leaves at 07:40.", metadata={"page": 3})])
    docs = store.similarity_search("when does the ferry leave", k=4, filter={"page": 3})
    retriever = store.as_retriever(search_kwargs={"k": 4})

Each `Document` is one evidence record (mnemo_sea.integrations.documents): its `id` the record's
id (a uuid4 when it has none), its `page_content` the record's body, its `metadata` the
version's metadata, kept as given (a plain JSON object; anything else is InvalidBatch before
anything is stored). A batch is one `ingest`: all or nothing. The record's source is the
metadata's "source" when it is a string (what LangChain's loaders put there), else the store's
`source`; its scope is the store's `scope`. Adding a document again under its id supersedes it
when its text or metadata changed (the archive keeps the old version in its history) and does
nothing when neither did.

A search is the archive's hybrid search (BM25 and the archive's own embedding model, fused),
restricted to the store's `kinds` (knowledge: what documents are stored as) unless the filter
names kinds. Each hit comes back as the Document that was added (its whole text, read back:
a hit's snippet is only a span of it), with its id and metadata. The score is the hit's
relevance (the cosine of the archive's embeddings, raised by a strong BM25 match; higher is
closer), clipped to [0, 1] for LangChain's relevance scores. `filter` takes
`{"key": value}` (equality), `{"key": {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" | "$in" |
"$nin": value}}` and `{"$and" | "$or": [filters]}`; the keys `source`, `scope` and `kind` name the
record's fields, pre-filtered by the archive, and every other key a metadata key, checked on the
hits of a search widened to 5 k (at most 100), so fewer than k documents may match.

There are no vectors to give: the archive embeds with its own model, so `embeddings` is None
and `similarity_search_by_vector` raises NotImplementedError; `max_marginal_relevance_search`
needs vectors too and is not offered. `delete(ids)` deletes each record with every version and
what was derived from it (`delete_evidence`: the handle's principal must be an admin, else
Forbidden is raised at the first id, before anything is deleted); a missing id is skipped, the
receipts are kept in `last_receipts`. The tenant is the handle's, never a store setting.

Blocking methods need a blocking handle (`mnemo.as_(principal)`, `MnemoClient`); the async ones
(`aadd_documents`, `asimilarity_search`, `adelete`, `aget_by_ids`, ...) await an async handle
natively and run a blocking one in a worker thread. Needs the `[langchain]` extra.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from mnemo_sea.integrations import documents as d
from mnemo_sea.integrations.handles import check_handle
from mnemo_sea.integrations.plans import arun_plan, run_plan
from mnemo_sea.integrations.search import framework_missing

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore
except ImportError as e:
    raise framework_missing("langchain_vectorstore", "langchain-core", "langchain", e) from e

if TYPE_CHECKING:
    from collections.abc import Callable

    from mnemo_sea.archive import DeletionReceipt
    from mnemo_sea.integrations.handles import AsyncHandle, Handle

DEFAULT_SOURCE = "langchain"
DEFAULT_KINDS = ("knowledge",)
_OPERATORS = {
    "$eq": "==",
    "$ne": "!=",
    "$gt": ">",
    "$gte": ">=",
    "$lt": "<",
    "$lte": "<=",
    "$in": "in",
    "$nin": "nin",
}


class MnemoVectorStore(VectorStore):
    """Documents kept as evidence records, searched by the archive (see the module docstring)."""

    def __init__(
        self,
        handle: Handle | AsyncHandle,
        *,
        source: str = DEFAULT_SOURCE,
        scope: str = "default",
        kinds: Sequence[str] | None = DEFAULT_KINDS,
        mode: str = "hybrid",
    ) -> None:
        self.handle = check_handle(handle, "MnemoVectorStore")
        self.source = source
        self.scope = scope
        self.kinds = None if kinds is None else tuple(kinds)
        self.mode = mode
        self.last_receipts: list[DeletionReceipt] = []

    @property
    def embeddings(self) -> Embeddings | None:
        """None: the archive embeds documents and queries with its own model (the one its index
        was built with), so there is no LangChain embedding to use or to give."""
        return None

    # ---- adding ---------------------------------------------------------------------------------

    def _new(self, documents: Sequence[Document], ids: Sequence[str | None] | None) -> list[d.NewDocument]:
        if ids is not None and len(ids) != len(documents):
            raise ValueError(f"{len(ids)} ids for {len(documents)} documents")
        given = list(ids) if ids is not None else [doc.id for doc in documents]
        return [
            d.NewDocument(evidence_id or str(uuid.uuid4()), doc.page_content, doc.metadata)
            for doc, evidence_id in zip(documents, given, strict=True)
        ]

    def _adding(self, documents: Sequence[Document], kwargs: dict[str, Any]) -> d.Plan[list[str]]:
        ids = kwargs.pop("ids", None)
        if kwargs:
            raise TypeError(f"unknown argument(s) {', '.join(sorted(kwargs))}; add_documents takes ids")
        items = d.evidence_inputs(self._new(documents, ids), source=self.source, scope=self.scope)
        return d.add(items)

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Store the documents in one ingest (all or nothing); their ids, `ids=[...]` first,
        else each document's own, else a new uuid4. InvalidBatch names every bad document."""
        return run_plan(self.handle, self._adding(documents, kwargs))

    async def aadd_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        return await arun_plan(self.handle, self._adding(documents, kwargs))

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        return self.add_documents(_documents(texts, metadatas), ids=ids, **kwargs)

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        return await self.aadd_documents(_documents(texts, metadatas), ids=ids, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A store on `handle=` (required keyword) holding `texts`. `embedding` is ignored: the
        archive embeds with its own model. Other keywords are the constructor's."""
        store = cls._made(kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    async def afrom_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> Self:
        store = cls._made(kwargs)
        await store.aadd_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    def _made(cls, kwargs: dict[str, Any]) -> Self:
        if "handle" not in kwargs:
            raise TypeError(
                "MnemoVectorStore.from_texts needs handle=...: mnemo.as_(principal), "
                "AsyncMnemo(mnemo, principal), MnemoClient or AsyncMnemoClient"
            )
        return cls(**kwargs)

    # ---- reading and deleting -------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents of these ids, in that order; a missing id is skipped."""
        return [_document(doc) for doc in run_plan(self.handle, d.read(ids))]

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return [_document(doc) for doc in await arun_plan(self.handle, d.read(ids))]

    def _deleting(self, ids: list[str] | None, kwargs: dict[str, Any]) -> d.Plan[int]:
        if ids is None:
            raise ValueError(
                "MnemoVectorStore.delete needs the ids to delete: deleting a whole tenant's "
                "documents is not offered"
            )
        if kwargs:
            raise TypeError(f"unknown argument(s) {', '.join(sorted(kwargs))}; delete takes ids")
        self.last_receipts = []
        return d.delete(ids, self.last_receipts)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete each document (every version of its record and what was derived from it);
        True. A missing id is skipped. Needs an admin handle (Forbidden otherwise, before
        anything is deleted). Each deletion's receipt is in `last_receipts` (those done so far
        when one fails: each id is its own deletion)."""
        run_plan(self.handle, self._deleting(ids, kwargs))
        return True

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        await arun_plan(self.handle, self._deleting(ids, kwargs))
        return True

    # ---- searching ------------------------------------------------------------------------------

    def _searching(self, query: str, k: int, kwargs: dict[str, Any]) -> d.Plan[list[d.StoredDocument]]:
        predicate = _predicate(kwargs.pop("filter", None))
        min_score = kwargs.pop("min_score", None)
        if kwargs:
            raise TypeError(
                f"unknown search argument(s) {', '.join(sorted(kwargs))}; "
                "a search takes k, filter and min_score"
            )
        return d.search(query, k, d.split(predicate), kinds=self.kinds, mode=self.mode, min_score=min_score)

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k documents closest to `query`, best first, each with its relevance (higher is
        closer). Keywords: `filter` (see the module docstring), `min_score` (the archive's
        relevance floor)."""
        found = run_plan(self.handle, self._searching(query, k, kwargs))
        return [(_document(doc), _score(doc)) for doc in found]

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        found = await arun_plan(self.handle, self._searching(query, k, kwargs))
        return [(_document(doc), _score(doc)) for doc in found]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in await self.asimilarity_search_with_score(query, k, **kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # A hit's relevance is a cosine (in [-1, 1]) raised by BM25: below 0 is unrelated.
        return lambda score: min(1.0, max(0.0, score))

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        raise NotImplementedError(
            "MnemoVectorStore searches by text only: the archive embeds queries with its own model, "
            "so a vector from another one cannot be compared; call similarity_search(query)"
        )

    async def asimilarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        return self.similarity_search_by_vector(embedding, k, **kwargs)


def _documents(texts: Iterable[str], metadatas: list[dict[str, Any]] | None) -> list[Document]:
    texts = list(texts)
    if metadatas is not None and len(metadatas) != len(texts):
        raise ValueError(f"{len(metadatas)} metadatas for {len(texts)} texts")
    return [
        Document(page_content=text, metadata=metadatas[i] if metadatas is not None else {})
        for i, text in enumerate(texts)
    ]


def _document(doc: d.StoredDocument) -> Document:
    return Document(page_content=doc.text, metadata=doc.metadata, id=doc.evidence_id)


def _score(doc: d.StoredDocument) -> float:
    return 0.0 if doc.score is None else doc.score


def _predicate(spec: object) -> d.Predicate | None:
    """A LangChain filter dict as a predicate; ValueError naming what is not understood."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValueError(f"filter must be a dict, got {type(spec).__name__}")
    parts: list[d.Predicate] = []
    for key, value in spec.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise ValueError(f"filter {key} needs a non-empty list of filters, got {value!r}")
            inner = tuple(p for p in (_predicate(v) for v in value) if p is not None)
            parts.append(d.AllOf(inner) if key == "$and" else d.AnyOf(inner))
        elif not isinstance(key, str) or key.startswith("$"):
            raise ValueError(f"unknown filter operator {key!r}; $and and $or combine filters")
        elif isinstance(value, Mapping):
            for op, operand in value.items():
                if op not in _OPERATORS:
                    raise ValueError(
                        f"unknown filter operator {op!r} on {key!r}; one of {', '.join(_OPERATORS)}"
                    )
                parts.append(d.Condition(key, _OPERATORS[op], operand))
        else:
            parts.append(d.Condition(key, "==", value))
    return parts[0] if len(parts) == 1 else d.AllOf(tuple(parts))


__all__ = ["MnemoVectorStore"]
