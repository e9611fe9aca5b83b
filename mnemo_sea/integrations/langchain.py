"""LangChain: `MnemoRetriever`, a langchain-core `BaseRetriever` over mnemo-sea's hybrid search.

    retriever = MnemoRetriever(searcher=InProcessSearcher(mnemo, principal), kinds=["knowledge"])
    retriever = MnemoRetriever(searcher=MnemoClient(url, api_key=...))        # remote, same class
    docs = retriever.invoke("when does the ferry leave", sources=["kb/timetable"])

Each `Document`'s `page_content` is a hit's hydrated span, its `id` the hit's stable id and its
`metadata` the hit's fields (`mnemo_sea.integrations.search.hit_metadata`), enough to build a
citation (`citation(doc.metadata, quote)`) and check it with `Mnemo.check_citations`.

`score_threshold` is the search's relevance floor (`min_score`: a hit's `relevance`, its dense
cosine raised by a strong BM25 match, must reach it; a hit holding every query term is always
kept), as LangChain's `similarity_score_threshold` search keeps only documents at or above it.

The filters (`limit`, `mode`, `kinds`, `scopes`, `sources`, `as_of`, `score_threshold`) are fields
of the retriever and can be replaced for one call as keyword arguments of `invoke`/`ainvoke` (an
unknown one is a TypeError), or made run-time settings with LangChain's `configurable_fields`.
`ainvoke` awaits an async searcher (`AsyncMnemoClient`) and runs a blocking one in a
worker thread; `invoke` with an async searcher is a TypeError. A search that could not run
raises InvalidInput, Forbidden or IndexUnavailable; only an honest no-match is an empty list.

Needs the `[langchain]` extra (langchain-core).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, field_validator

from mnemo_sea.integrations.search import (
    DEFAULT_LIMIT,
    DEFAULT_MODE,
    AsyncSearcher,
    InProcessSearcher,
    Searcher,
    SearchFilters,
    asearch_hits,
    check_searcher,
    citation,
    framework_missing,
    hit_id,
    hit_metadata,
    search_hits,
)

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:
    raise framework_missing("langchain", "langchain-core", "langchain", e) from e

if TYPE_CHECKING:
    from mnemo_sea.system.mnemo import SearchHit


class MnemoRetriever(BaseRetriever):
    """Documents for a query, from a searcher (see the module docstring)."""

    # The searcher is a plain object checked by `check_searcher`, not a pydantic model.
    model_config = ConfigDict(arbitrary_types_allowed=True)

    searcher: Searcher | AsyncSearcher
    limit: int = DEFAULT_LIMIT
    mode: str = DEFAULT_MODE
    kinds: tuple[str, ...] | None = None
    scopes: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    as_of: datetime | None = None
    score_threshold: float | None = None

    @field_validator("searcher", mode="before")
    @classmethod
    def _check_searcher(cls, value: object) -> Searcher | AsyncSearcher:
        return check_searcher(value)

    def _filters(self, overrides: dict[str, Any]) -> SearchFilters:
        # LangChain hands `verbose` (which it reads for its callbacks) on to the retriever with
        # the caller's other keyword arguments: it is not a search parameter.
        overrides.pop("verbose", None)
        if "score_threshold" in overrides:  # the retriever's name for the search's min_score
            overrides["min_score"] = overrides.pop("score_threshold")
        filters = SearchFilters(
            limit=self.limit,
            mode=self.mode,
            kinds=self.kinds,
            scopes=self.scopes,
            sources=self.sources,
            as_of=self.as_of,
            min_score=self.score_threshold,
        )
        return filters.overridden(overrides) if overrides else filters

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        return [_document(hit) for hit in search_hits(self.searcher, query, self._filters(overrides))]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        hits = await asearch_hits(self.searcher, query, self._filters(overrides))
        return [_document(hit) for hit in hits]


def _document(hit: SearchHit) -> Document:
    return Document(page_content=hit.snippet, metadata=hit_metadata(hit), id=hit_id(hit))


__all__ = ["InProcessSearcher", "MnemoRetriever", "citation"]
