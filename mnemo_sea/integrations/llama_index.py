"""LlamaIndex: `MnemoRetriever`, a llama-index-core `BaseRetriever` over mnemo-sea's hybrid search.

    retriever = MnemoRetriever(InProcessSearcher(mnemo, principal), kinds=["knowledge"])
    retriever = MnemoRetriever(MnemoClient(url, api_key=...))                # remote, same class
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

Each `NodeWithScore` holds a `TextNode` whose text is a hit's hydrated span, whose `id_` is the
hit's stable id (`<evidence_id>@<version>#<start>-<end>`) and whose metadata are the hit's
fields (`mnemo_sea.integrations.search.hit_metadata`), with the hit's fused score. Prompts show
the fields a model cites by (`PROMPT_KEYS`: id, version, locator, source, kind, label), not the
ranking figures; `citation(node.metadata, quote)` builds a citation `Mnemo.check_citations`
checks.

The filters (`limit`, `mode`, `kinds`, `scopes`, `sources`, `as_of`, `score_threshold`) are the
retriever's (LlamaIndex's `retrieve` takes a query only). `score_threshold` is the search's
relevance floor (`min_score`: a hit's `relevance`, its dense cosine raised by a strong BM25 match,
must reach it; a hit holding every query term is always kept); the node's score stays the fused
rank score that orders the hits, and `relevance` is in the node's metadata. `aretrieve` awaits an
async searcher (`AsyncMnemoClient`) and runs a blocking one in a worker thread; `retrieve` with an
async searcher is a TypeError. A search that could not run raises InvalidInput, Forbidden or
IndexUnavailable; only an honest no-match is an empty list.

Needs the `[llama-index]` extra (llama-index-core). Nothing in it downloads: llama-index-core
ships the NLTK data and tiktoken files it uses (`llama_index/core/_static`) and finds them
while NLTK_DATA and TIKTOKEN_CACHE_DIR are unset; pointing either at a folder without them
makes it try to download them on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from mnemo_sea.integrations.search import (
    DEFAULT_LIMIT,
    DEFAULT_MODE,
    PROMPT_KEYS,
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
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as e:
    raise framework_missing("llama_index", "llama-index-core", "llama-index", e) from e

if TYPE_CHECKING:
    from mnemo_sea.system.mnemo import SearchHit


class MnemoRetriever(BaseRetriever):
    """Nodes for a query, from a searcher (see the module docstring)."""

    def __init__(
        self,
        searcher: Searcher | AsyncSearcher,
        *,
        limit: int = DEFAULT_LIMIT,
        mode: str = DEFAULT_MODE,
        kinds: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        as_of: datetime | None = None,
        score_threshold: float | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.searcher = check_searcher(searcher)
        self.filters = SearchFilters(
            limit=limit,
            mode=mode,
            kinds=kinds,
            scopes=scopes,
            sources=sources,
            as_of=as_of,
            min_score=score_threshold,
        )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(hit) for hit in search_hits(self.searcher, query_bundle.query_str, self.filters)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await asearch_hits(self.searcher, query_bundle.query_str, self.filters)
        return [_node(hit) for hit in hits]


def _node(hit: SearchHit) -> NodeWithScore:
    metadata = hit_metadata(hit)
    start, end = hit.span
    node = TextNode(
        id_=hit_id(hit),
        text=hit.snippet,
        metadata=metadata,
        start_char_idx=start,  # where the span is in the version's original, as LlamaIndex means it
        end_char_idx=end,
        excluded_llm_metadata_keys=[k for k in metadata if k not in PROMPT_KEYS],
        # Retrieved, not indexed: should a pipeline embed these nodes again, ids and figures
        # are not content.
        excluded_embed_metadata_keys=list(metadata),
    )
    return NodeWithScore(node=node, score=hit.score)


__all__ = ["InProcessSearcher", "MnemoRetriever", "citation"]
