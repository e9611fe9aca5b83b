"""The LlamaIndex retriever, in a real query engine (MockLLM), in process on an embedded Mnemo.

The same promises as the LangChain retriever (test_langchain.py), as `NodeWithScore`s: nodes
are the facade's hits with a stable id and the fused score; the filters reach the search; no
other tenant's evidence; `aretrieve`/`aquery` await; failures raise, no-match is []; node
metadata cites. And the prompt shows the model the fields it cites by, not the ranking figures.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from rag_world import (
    AGENT_A,
    AGENT_B,
    B_IDS,
    LONG_AGO,
    NOBODY_A,
    QUERY,
    AnsweringSearcher,
    AwaitedSearcher,
    BlockingSearcher,
    World,
    expected_metadata,
    run_counting_threads,
)

from mnemo_sea.archive import Forbidden, InvalidInput
from mnemo_sea.integrations.llama_index import InProcessSearcher, MnemoRetriever, citation
from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.system.mnemo import SearchResult

REPO = Path(__file__).resolve().parents[2]


def retriever(world: World, **filters: Any) -> MnemoRetriever:
    return MnemoRetriever(world.searcher(), **filters)


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.metadata["evidence_id"] for n in nodes]


def text(n: NodeWithScore) -> str:
    assert isinstance(n.node, TextNode)
    return n.node.text


# ---- nodes are the facade's hits -------------------------------------------------------------------


def test_nodes_are_the_facade_s_hits_in_rank_order(world: World) -> None:
    hits = world.mnemo.search(AGENT_A, QUERY).hits
    assert {h.evidence_id for h in hits} == {"ferry", "map", "memory:alice/ferry"}
    nodes = retriever(world).retrieve(QUERY)
    assert [text(n) for n in nodes] == [h.snippet for h in hits]
    assert [n.node.metadata for n in nodes] == [expected_metadata(h) for h in hits]
    assert [n.score for n in nodes] == [h.score for h in hits]
    assert [n.node.node_id for n in nodes] == [
        f"{h.evidence_id}@{h.version}#{h.span[0]}-{h.span[1]}" for h in hits
    ]
    assert [(n.node.start_char_idx, n.node.end_char_idx) for n in nodes] == [h.span for h in hits]
    # The same span of the same version is the same node in every search.
    assert [n.node.node_id for n in retriever(world).retrieve(QUERY)] == [n.node.node_id for n in nodes]


def test_a_query_engine_answers_from_the_retrieved_text_and_its_citations_hold(world: World) -> None:
    engine = RetrieverQueryEngine.from_args(retriever(world), llm=MockLLM())
    response = engine.query(QUERY)
    nodes = response.source_nodes
    assert ids(nodes) == ids(retriever(world).retrieve(QUERY))
    # MockLLM answers with its prompt: what the model was shown. Each hit's text, with the
    # fields it is cited by, and none of the ranking figures.
    shown = str(response)
    for n in nodes:
        assert text(n) in shown
        assert (
            f"evidence_id: {n.node.metadata['evidence_id']}\nversion: {n.node.metadata['version']}" in shown
        )
    assert "locator: p. 1" in shown and "label: evidence" in shown
    assert "bm25_rank" not in shown and "score" not in shown and "span" not in shown

    report = world.mnemo.check_citations(AGENT_A, [citation(n.node.metadata, text(n)) for n in nodes])
    assert [c.verdict for c in report.checks] == ["ok"] * len(nodes)
    ferry = nodes[ids(nodes).index("ferry")].node.metadata
    checks = world.mnemo.check_citations(
        AGENT_A, [citation(ferry, "one o'clock from pier 4"), citation(ferry, "leaves at midnight")]
    ).checks
    assert [c.verdict for c in checks] == ["ok", "quote_not_found"]


# ---- filters -------------------------------------------------------------------------------------


def test_filters_of_the_retriever_reach_the_search(world: World) -> None:
    assert ids(retriever(world, kinds=["memory"]).retrieve(QUERY)) == ["memory:alice/ferry"]
    assert set(ids(retriever(world, kinds=["knowledge"]).retrieve(QUERY))) == {"ferry", "map"}
    assert ids(retriever(world, sources=["kb/map"]).retrieve(QUERY)) == ["map"]
    assert ids(retriever(world, scopes=["transport"]).retrieve(QUERY)) == ["ferry"]
    assert len(retriever(world, limit=1).retrieve(QUERY)) == 1
    old = retriever(world, as_of=world.before_v2).retrieve(QUERY)
    assert [(n.node.metadata["version"], text(n)) for n in old] == [
        (1, "The okapi ferry leaves at noon from pier 4.")
    ]
    lexical = retriever(world, mode="bm25").retrieve(QUERY)
    assert lexical and all(n.node.metadata["dense_rank"] is None for n in lexical)


def test_a_single_string_is_not_a_list_of_names(world: World) -> None:
    with pytest.raises(InvalidInput, match="kinds"):
        retriever(world, kinds="memory")


# ---- tenants -------------------------------------------------------------------------------------


def test_a_retriever_never_returns_another_tenant_s_evidence(world: World) -> None:
    mine = MnemoRetriever(InProcessSearcher(world.mnemo, AGENT_A), limit=50).retrieve(QUERY)
    theirs = MnemoRetriever(InProcessSearcher(world.mnemo, AGENT_B), limit=50).retrieve(QUERY)
    assert set(ids(theirs)) == B_IDS
    assert sum(n.node.metadata["evidence_id"] in B_IDS for n in mine) == 0
    engine = RetrieverQueryEngine.from_args(MnemoRetriever(world.searcher(AGENT_A), limit=50), llm=MockLLM())
    assert "shop B" not in str(engine.query(QUERY))


# ---- async ----------------------------------------------------------------------------------------


def test_aretrieve_and_aquery_give_what_the_blocking_calls_give(world: World) -> None:
    r = retriever(world, kinds=["knowledge"])
    assert asyncio.run(r.aretrieve(QUERY)) == r.retrieve(QUERY)
    engine = RetrieverQueryEngine.from_args(r, llm=MockLLM())
    response = asyncio.run(engine.aquery(QUERY))
    assert ids(response.source_nodes) == ids(r.retrieve(QUERY))
    assert str(response) == str(engine.query(QUERY))


def test_an_async_searcher_is_awaited_on_the_loop_and_a_blocking_one_runs_off_it(world: World) -> None:
    awaited, blocking = AwaitedSearcher(world.searcher()), BlockingSearcher(world.searcher())
    a, loop_thread, a_threads = run_counting_threads(lambda: MnemoRetriever(awaited).aretrieve(QUERY))
    assert (awaited.threads, a_threads) == ([loop_thread], 0)
    b, loop_thread, b_threads = run_counting_threads(lambda: MnemoRetriever(blocking).aretrieve(QUERY))
    assert b_threads == 1 and blocking.threads != [loop_thread]
    assert a == b == retriever(world).retrieve(QUERY)


def test_retrieve_with_an_async_searcher_says_to_await(world: World) -> None:
    awaited = AwaitedSearcher(world.searcher())
    with pytest.raises(TypeError, match="is async: call the retriever's async method"):
        MnemoRetriever(awaited).retrieve(QUERY)
    assert awaited.threads == []


# ---- a search that could not run ------------------------------------------------------------------


def test_a_principal_without_the_reader_role_is_forbidden(world: World) -> None:
    r = MnemoRetriever(world.searcher(NOBODY_A))
    with pytest.raises(Forbidden, match="reader role"):
        r.retrieve(QUERY)
    with pytest.raises(Forbidden, match="reader role"):
        asyncio.run(RetrieverQueryEngine.from_args(r, llm=MockLLM()).aquery(QUERY))


@pytest.mark.usefixtures("index_down")
def test_an_index_that_cannot_answer_raises_instead_of_returning_nothing(world: World) -> None:
    r = retriever(world)
    with pytest.raises(IndexUnavailable, match="dense leg"):
        r.retrieve("okapi map while the model is down")
    with pytest.raises(IndexUnavailable, match="dense leg"):
        RetrieverQueryEngine.from_args(r, llm=MockLLM()).query("okapi map while the model is still down")


@pytest.mark.parametrize(
    ("status", "error"),
    [("invalid", InvalidInput), ("forbidden", Forbidden), ("unavailable", IndexUnavailable)],
)
def test_every_status_that_is_not_an_answer_raises_its_error(status: str, error: type[Exception]) -> None:
    r = MnemoRetriever(AnsweringSearcher(SearchResult(status=status, reason="as the server said")))
    with pytest.raises(error):
        r.retrieve(QUERY)
    with pytest.raises(error):
        asyncio.run(r.aretrieve(QUERY))


def test_an_invalid_search_raises_invalid_input(world: World) -> None:
    with pytest.raises(InvalidInput, match="query"):
        retriever(world, mode="fuzzy").retrieve(QUERY)


def test_an_honest_no_match_is_an_empty_list(world: World) -> None:
    assert world.mnemo.search(AGENT_A, QUERY, as_of=LONG_AGO).status == "no_match"
    assert retriever(world, as_of=LONG_AGO).retrieve(QUERY) == []
    assert asyncio.run(retriever(world, sources=["kb/nowhere"]).aretrieve(QUERY)) == []


def test_a_mnemo_is_not_a_searcher(world: World) -> None:
    with pytest.raises(TypeError, match=r"pass InProcessSearcher\(mnemo, principal\)"):
        MnemoRetriever(world.mnemo)  # type: ignore[arg-type]


# ---- offline ---------------------------------------------------------------------------------------

# Runs in a fresh interpreter with NLTK_DATA and TIKTOKEN_CACHE_DIR unset and an empty home: the
# retriever in a query engine (whose prompt packing counts tokens with tiktoken) and the NLTK data
# a pipeline's sentence splitter needs, with every attempt to reach a host recorded.
OFFLINE_PROBE = r"""
import sys
attempts = []
sys.addaudithook(lambda event, args: attempts.append((event, str(args)[:80]))
                 if event in ("socket.getaddrinfo", "socket.connect") else None)
from datetime import datetime
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.utils import globals_helper
from mnemo_sea.integrations.llama_index import MnemoRetriever
from mnemo_sea.system.mnemo import SearchHit, SearchResult

class OneHit:
    def search(self, query, /, **filters):
        hit = SearchHit("ferry", 1, "knowledge", "kb", "default", "p. 1", "The okapi ferry leaves at noon.",
                        0.5, 1, 1, (0, 31))
        return SearchResult(status="results", hits=(hit,))

response = RetrieverQueryEngine.from_args(MnemoRetriever(OneHit()), llm=MockLLM()).query("ferry")
assert "The okapi ferry leaves at noon." in str(response), str(response)
assert "the" in globals_helper.stopwords
assert globals_helper.punkt_tokenizer.tokenize("One. Two.") == ["One.", "Two."]
print(attempts)
"""


def test_llama_index_needs_no_network(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"NLTK_DATA", "TIKTOKEN_CACHE_DIR"}}
    env |= {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-c", OFFLINE_PROBE],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "[]", run.stdout  # no host looked up, no connection tried


def test_score_threshold_is_the_search_s_relevance_floor(world: World) -> None:
    # No document holds every term of this query, which would keep it under any floor.
    query = "okapi ferry schedule"
    hits = world.mnemo.search(AGENT_A, query).hits
    floor = max(h.relevance for h in hits if h.relevance is not None)
    above = world.mnemo.search(AGENT_A, query, min_score=floor).hits
    assert 0 < len(above) < len(hits) and all(h.relevance >= floor for h in above)
    nodes = retriever(world, score_threshold=floor).retrieve(query)
    assert ids(nodes) == [h.evidence_id for h in above]
    assert [n.score for n in nodes] == [h.score for h in above]  # the node's score orders, as before
    assert all(n.node.metadata["relevance"] >= floor for n in nodes)
    assert ids(asyncio.run(retriever(world, score_threshold=floor).aretrieve(query))) == ids(nodes)
    with pytest.raises(InvalidInput, match="min_score"):
        retriever(world, score_threshold=float("nan")).retrieve(query)
    with pytest.raises(InvalidInput, match="min_score"):
        retriever(world, score_threshold=0.5, mode="bm25").retrieve(query)
