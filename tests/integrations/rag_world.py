"""The seeded system and the test doubles of the framework retriever tests.

Two tenants in one embedded Mnemo (hashing embedder). Tenant A holds a timetable record in two
versions (the ferry left at noon, then at one o'clock), a map record and a memory fact; tenant B
a record with the same words, so a search leaking across tenants would find it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fakes import HashingEmbedder

from mnemo_sea.archive import EvidenceInput, Principal, Role, Sensitivity
from mnemo_sea.integrations.search import InProcessSearcher
from mnemo_sea.system.mnemo import Mnemo, SearchHit, SearchResult

AGENT_A = Principal("clinic-a", "assistant", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
NOBODY_A = Principal("clinic-a", "visitor", frozenset(), Sensitivity.INTERNAL)  # no reader role
AGENT_B = Principal("shop-b", "assistant", frozenset({Role.AGENT}), Sensitivity.INTERNAL)
B_IDS = frozenset({"b-ferry"})
QUERY = "okapi ferry pier"
LONG_AGO = datetime(1971, 1, 1, tzinfo=UTC)


class QueryEmbedder(HashingEmbedder):
    """Can fail on queries: the dense leg then cannot run and the search answers `unavailable`."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_queries = False

    def embed_queries(self, texts: Sequence[str]) -> Any:
        if self.fail_queries:
            from mnemo_sea.retrieval import IndexUnavailable

            raise IndexUnavailable("embedder", "test model switched off for queries")
        return super().embed_queries(texts)


@dataclass
class World:
    mnemo: Mnemo
    embedder: QueryEmbedder
    before_v2: datetime  # ferry@1 is current, nothing else of A exists yet

    def searcher(self, principal: Principal = AGENT_A) -> InProcessSearcher:
        return InProcessSearcher(self.mnemo, principal)


def _tick() -> datetime:
    time.sleep(0.005)
    moment = datetime.now(UTC)
    time.sleep(0.005)
    return moment


def open_world(folder: Path) -> World:
    embedder = QueryEmbedder()
    mnemo = Mnemo.open(folder, embedder=embedder)
    timetable = {"source": "kb/timetable", "evidence_id": "ferry", "locator": "p. 1", "scope": "transport"}
    mnemo.ingest(AGENT_A, [EvidenceInput(body="The okapi ferry leaves at noon from pier 4.", **timetable)])
    before_v2 = _tick()
    mnemo.ingest(
        AGENT_A,
        [
            EvidenceInput(body="The okapi ferry leaves at one o'clock from pier 4.", **timetable),
            EvidenceInput(
                body="The okapi enclosure is beside the ferry pier.",
                source="kb/map",
                evidence_id="map",
                locator="sheet 2",
                scope="zoo",
            ),
        ],
    )
    mnemo.remember(
        AGENT_A, "alice", "ferry", "alice takes the okapi ferry to the pier on Fridays", "user_claim"
    )
    mnemo.ingest(
        AGENT_B,
        [
            EvidenceInput(
                body="The okapi ferry of shop B leaves the pier at dawn.",
                source="kb/timetable",
                evidence_id="b-ferry",
            )
        ],
    )
    return World(mnemo, embedder, before_v2)


def expected_metadata(hit: SearchHit) -> dict[str, Any]:
    """What a retrieved document's metadata must say about the facade's hit: every field but
    the text, which is the document's content."""
    return {
        "evidence_id": hit.evidence_id,
        "version": hit.version,
        "kind": hit.kind,
        "source": hit.source,
        "scope": hit.scope,
        "locator": hit.locator,
        "score": hit.score,
        "bm25_rank": hit.bm25_rank,
        "bm25_score": hit.bm25_score,
        "dense_rank": hit.dense_rank,
        "dense_score": hit.dense_score,
        "relevance": hit.relevance,
        "span": [hit.span[0], hit.span[1]],
        "label": hit.label,
        "lines": None if hit.lines is None else list(hit.lines),
        "byte_range": None if hit.byte_range is None else list(hit.byte_range),
        "metadata": hit.metadata,
    }


class CountingExecutor(ThreadPoolExecutor):
    """A loop's default executor that counts what it is given (asyncio.to_thread uses it)."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def run_counting_threads(make: Callable[[], Awaitable[Any]]) -> tuple[Any, int, int]:
    """Await `make()` on a fresh loop: its result, the loop's thread and how many calls went to
    the default executor."""
    executor = CountingExecutor()

    async def main() -> tuple[Any, int]:
        asyncio.get_running_loop().set_default_executor(executor)
        return await make(), threading.get_ident()

    try:
        result, thread = asyncio.run(main())
    finally:
        executor.shutdown()
    return result, thread, executor.submitted


# ---- searchers standing in for the REST client ------------------------------------------------------


@dataclass
class AwaitedSearcher:
    """An async searcher (as AsyncMnemoClient is): records the thread each search ran on."""

    inner: InProcessSearcher
    threads: list[int] = field(default_factory=list)

    async def search(
        self,
        query: str,
        /,
        *,
        limit: int = 10,
        mode: str = "hybrid",
        kinds: list[str] | None = None,
        scopes: list[str] | None = None,
        sources: list[str] | None = None,
        as_of: datetime | None = None,
        min_score: float | None = None,
    ) -> SearchResult:
        self.threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return self.inner.search(
            query,
            limit=limit,
            mode=mode,
            kinds=kinds,
            scopes=scopes,
            sources=sources,
            as_of=as_of,
            min_score=min_score,
        )


@dataclass
class BlockingSearcher:
    """A blocking searcher (as MnemoClient is): records the thread each search ran on."""

    inner: InProcessSearcher
    threads: list[int] = field(default_factory=list)

    def search(self, query: str, /, **filters: Any) -> SearchResult:
        self.threads.append(threading.get_ident())
        return self.inner.search(query, **filters)


@dataclass
class AnsweringSearcher:
    """Answers every search with one result, as a server would."""

    result: SearchResult
    calls: int = 0

    def search(self, query: str, /, **filters: Any) -> SearchResult:
        self.calls += 1
        return self.result
