"""The LangChain retriever, in a real LCEL chain (fake LLM), in process on an embedded Mnemo.

What a pipeline relies on: the documents are the facade's hits (text and every field, in rank
order); the filters reach the search (fields and per-call keyword arguments); a retriever for
one tenant never returns another's evidence; `ainvoke` awaits an async searcher and keeps a
blocking one off the event loop; a search that could not run raises its typed error while an
honest no-match is []; and the metadata is enough to cite what was retrieved and check it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from pydantic import ValidationError
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
from mnemo_sea.integrations.langchain import InProcessSearcher, MnemoRetriever, citation
from mnemo_sea.retrieval import IndexUnavailable
from mnemo_sea.system.mnemo import SearchResult


def retriever(world: World, **fields: Any) -> MnemoRetriever:
    return MnemoRetriever(searcher=world.searcher(), **fields)


def ids(docs: list[Document]) -> list[str]:
    return [d.metadata["evidence_id"] for d in docs]


class PromptLog(BaseCallbackHandler):
    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_llm_start(self, serialized: Any, prompts: list[str], **kwargs: Any) -> None:
        self.prompts.extend(prompts)


def format_docs(docs: list[Document]) -> str:
    return "\n".join(f"[{d.metadata['evidence_id']}@{d.metadata['version']}] {d.page_content}" for d in docs)


def rag_chain(r: MnemoRetriever, answer: str) -> Any:
    """retriever | format | prompt | llm, keeping the documents beside the answer for citing."""
    prompt = PromptTemplate.from_template(
        "Answer from the evidence, citing ids.\n{context}\nQuestion: {question}"
    )
    answer_chain = prompt | FakeListLLM(responses=[answer]) | StrOutputParser()
    return (
        RunnableParallel(docs=r, question=RunnablePassthrough())
        .assign(context=RunnableLambda(lambda x: format_docs(x["docs"])))
        .assign(answer=answer_chain)
    )


# ---- documents are the facade's hits ----------------------------------------------------------------


def test_documents_are_the_facade_s_hits_in_rank_order(world: World) -> None:
    hits = world.mnemo.search(AGENT_A, QUERY).hits
    assert {h.evidence_id for h in hits} == {"ferry", "map", "memory:alice/ferry"}
    docs = retriever(world).invoke(QUERY)
    assert [d.page_content for d in docs] == [h.snippet for h in hits]
    assert [d.metadata for d in docs] == [expected_metadata(h) for h in hits]
    assert [d.id for d in docs] == [f"{h.evidence_id}@{h.version}#{h.span[0]}-{h.span[1]}" for h in hits]
    ferry = docs[ids(docs).index("ferry")]
    assert ferry.page_content == "The okapi ferry leaves at one o'clock from pier 4."
    assert (ferry.metadata["version"], ferry.metadata["locator"]) == (2, "p. 1")


def test_a_chain_answers_from_the_retrieved_text_and_its_citations_hold(world: World) -> None:
    log = PromptLog()
    out = rag_chain(retriever(world), "It leaves at one o'clock [ferry@2].").invoke(
        QUERY, config={"callbacks": [log]}
    )
    docs: list[Document] = out["docs"]
    assert ids(docs) == ids(retriever(world).invoke(QUERY))
    (prompt,) = log.prompts
    for d in docs:
        assert f"[{d.metadata['evidence_id']}@{d.metadata['version']}] {d.page_content}" in prompt
    assert out["answer"] == "It leaves at one o'clock [ferry@2]."

    # Built from metadata alone (and the text the model was shown), every citation holds...
    report = world.mnemo.check_citations(AGENT_A, [citation(d.metadata, d.page_content) for d in docs])
    assert [c.verdict for c in report.checks] == ["ok"] * len(docs)
    # ...a part of the text too, while a quote the evidence does not hold is caught.
    ferry = docs[ids(docs).index("ferry")].metadata
    checks = world.mnemo.check_citations(
        AGENT_A, [citation(ferry, "one o'clock from pier 4"), citation(ferry, "leaves at midnight")]
    ).checks
    assert [c.verdict for c in checks] == ["ok", "quote_not_found"]


def test_a_citation_of_an_old_version_says_so(world: World) -> None:
    (old,) = retriever(world, as_of=world.before_v2).invoke(QUERY)
    assert (old.metadata["evidence_id"], old.metadata["version"]) == ("ferry", 1)
    cited = [citation(old.metadata, old.page_content)]
    # The metadata's version is the one checked: it held when an answer of that time was given
    # and has been replaced since; an answer given now cited a version already replaced.
    assert world.mnemo.check_citations(AGENT_A, cited, answered_at=world.before_v2).checks[0].verdict == (
        "superseded"
    )
    assert world.mnemo.check_citations(AGENT_A, cited).checks[0].verdict == "stale_version"


def test_metadata_of_another_retriever_is_not_a_citation() -> None:
    with pytest.raises(InvalidInput, match="evidence_id, version, locator"):
        citation({"source": "web"}, "a quote")


# ---- filters -------------------------------------------------------------------------------------


def test_filters_of_the_retriever_reach_the_search(world: World) -> None:
    assert ids(retriever(world, kinds=["memory"]).invoke(QUERY)) == ["memory:alice/ferry"]
    assert ids(retriever(world, sources=["kb/map"]).invoke(QUERY)) == ["map"]
    assert ids(retriever(world, scopes=["transport"]).invoke(QUERY)) == ["ferry"]
    assert len(retriever(world, limit=1).invoke(QUERY)) == 1
    old = retriever(world, as_of=world.before_v2).invoke(QUERY)
    assert [(d.metadata["evidence_id"], d.metadata["version"], d.page_content) for d in old] == [
        ("ferry", 1, "The okapi ferry leaves at noon from pier 4.")
    ]
    lexical = retriever(world, mode="bm25").invoke(QUERY)
    assert lexical and all(d.metadata["dense_rank"] is None and d.metadata["bm25_rank"] for d in lexical)
    assert any(d.metadata["dense_rank"] for d in retriever(world).invoke(QUERY))


def test_keyword_arguments_of_a_call_replace_the_retriever_s_filters(world: World) -> None:
    r = retriever(world, kinds=["memory"])
    assert set(ids(r.invoke(QUERY, kinds=["knowledge"]))) == {"ferry", "map"}
    assert set(ids(r.invoke(QUERY, kinds=None))) == {"ferry", "map", "memory:alice/ferry"}
    assert ids(r.invoke(QUERY, verbose=True)) == ["memory:alice/ferry"]  # LangChain's own keyword
    assert all(d.metadata["dense_rank"] is None for d in r.invoke(QUERY, kinds=None, mode="bm25"))
    assert ids(r.invoke(QUERY)) == ["memory:alice/ferry"]  # the retriever itself is unchanged


def test_a_misspelt_or_malformed_filter_is_refused_not_dropped(world: World) -> None:
    r = retriever(world)
    with pytest.raises(TypeError, match=r"unknown search parameter\(s\) kind; a search takes as_of, kinds"):
        r.invoke(QUERY, kind=["memory"])
    with pytest.raises(InvalidInput, match="sources"):
        r.invoke(QUERY, sources="kb/map")  # would filter on the letters
    with pytest.raises(ValidationError, match="kinds"):
        retriever(world, kinds="memory")


# ---- tenants -------------------------------------------------------------------------------------


def test_a_retriever_never_returns_another_tenant_s_evidence(world: World) -> None:
    mine = MnemoRetriever(searcher=InProcessSearcher(world.mnemo, AGENT_A), limit=50).invoke(QUERY)
    theirs = MnemoRetriever(searcher=InProcessSearcher(world.mnemo, AGENT_B), limit=50).invoke(QUERY)
    assert set(ids(theirs)) == B_IDS  # the query finds B's evidence for B...
    assert sum(d.metadata["evidence_id"] in B_IDS for d in mine) == 0  # ...and never for A
    assert all("shop B" not in d.page_content for d in mine)
    assert ids(MnemoRetriever(searcher=world.searcher(AGENT_A), sources=["kb/timetable"]).invoke(QUERY)) == [
        "ferry"
    ]


# ---- async ----------------------------------------------------------------------------------------


def test_ainvoke_gives_what_invoke_gives(world: World) -> None:
    r = retriever(world, kinds=["knowledge"])
    assert asyncio.run(r.ainvoke(QUERY, sources=["kb/map"])) == r.invoke(QUERY, sources=["kb/map"])
    out = asyncio.run(rag_chain(r, "noon").ainvoke(QUERY))
    assert out["docs"] == r.invoke(QUERY)


def test_an_async_searcher_is_awaited_on_the_loop_and_a_blocking_one_runs_off_it(world: World) -> None:
    awaited, blocking = AwaitedSearcher(world.searcher()), BlockingSearcher(world.searcher())
    a, loop_thread, a_threads = run_counting_threads(lambda: MnemoRetriever(searcher=awaited).ainvoke(QUERY))
    assert (awaited.threads, a_threads) == ([loop_thread], 0)  # awaited natively, no thread hop
    b, loop_thread, b_threads = run_counting_threads(lambda: MnemoRetriever(searcher=blocking).ainvoke(QUERY))
    assert b_threads == 1 and blocking.threads != [loop_thread]  # the blocking search ran off the loop
    assert a == b == retriever(world).invoke(QUERY)


def test_invoke_with_an_async_searcher_says_to_await(world: World) -> None:
    awaited = AwaitedSearcher(world.searcher())
    with pytest.raises(TypeError, match="is async: call the retriever's async method"):
        MnemoRetriever(searcher=awaited).invoke(QUERY)
    assert awaited.threads == []


# ---- a search that could not run ------------------------------------------------------------------


def test_a_principal_without_the_reader_role_is_forbidden(world: World) -> None:
    r = MnemoRetriever(searcher=world.searcher(NOBODY_A))
    with pytest.raises(Forbidden, match="reader role"):
        r.invoke(QUERY)
    with pytest.raises(Forbidden, match="reader role"):
        asyncio.run(r.ainvoke(QUERY))


@pytest.mark.usefixtures("index_down")
def test_an_index_that_cannot_answer_raises_instead_of_returning_nothing(world: World) -> None:
    r = retriever(world)
    with pytest.raises(IndexUnavailable, match="dense leg"):
        r.invoke("okapi timetable while the model is down")
    with pytest.raises(IndexUnavailable, match="dense leg"):
        asyncio.run(r.ainvoke("okapi timetable while the model is still down"))


def test_an_invalid_search_raises_invalid_input(world: World) -> None:
    with pytest.raises(InvalidInput, match="query"):
        retriever(world, mode="fuzzy").invoke(QUERY)
    with pytest.raises(InvalidInput, match="query"):
        retriever(world).invoke(QUERY, limit=0)


@pytest.mark.parametrize(
    ("status", "error"),
    [("invalid", InvalidInput), ("forbidden", Forbidden), ("unavailable", IndexUnavailable)],
)
def test_every_status_that_is_not_an_answer_raises_its_error(status: str, error: type[Exception]) -> None:
    r = MnemoRetriever(searcher=AnsweringSearcher(SearchResult(status=status, reason="as the server said")))
    with pytest.raises(error):
        r.invoke(QUERY)
    with pytest.raises(error):
        asyncio.run(r.ainvoke(QUERY))


def test_an_honest_no_match_is_an_empty_list(world: World) -> None:
    assert world.mnemo.search(AGENT_A, QUERY, as_of=LONG_AGO).status == "no_match"
    assert retriever(world, as_of=LONG_AGO).invoke(QUERY) == []
    assert asyncio.run(retriever(world, sources=["kb/nowhere"]).ainvoke(QUERY)) == []


def test_a_mnemo_is_not_a_searcher(world: World) -> None:
    with pytest.raises(TypeError, match=r"pass InProcessSearcher\(mnemo, principal\)"):
        MnemoRetriever(searcher=world.mnemo)
    with pytest.raises(TypeError, match="needs a searcher"):
        MnemoRetriever(searcher="http://localhost:8000")


def test_score_threshold_is_the_search_s_relevance_floor(world: World) -> None:
    # No document holds every term of this query, which would keep it under any floor.
    query = "okapi ferry schedule"
    hits = world.mnemo.search(AGENT_A, query).hits
    floor = max(h.relevance for h in hits if h.relevance is not None)
    floored = world.mnemo.search(AGENT_A, query, min_score=floor).hits
    above = [h.evidence_id for h in floored]
    assert 0 < len(above) < len(hits) and all(h.relevance >= floor for h in floored)
    docs = retriever(world, score_threshold=floor).invoke(query)
    assert ids(docs) == above and all(d.metadata["relevance"] >= floor for d in docs)
    assert ids(retriever(world).invoke(query, score_threshold=floor)) == above  # for one call
    assert len(retriever(world, score_threshold=floor).invoke(query, score_threshold=None)) == len(hits)
    assert ids(asyncio.run(retriever(world, score_threshold=floor).ainvoke(query))) == above
    with pytest.raises(InvalidInput, match="min_score"):
        retriever(world, score_threshold=1.5).invoke(query)
    with pytest.raises(InvalidInput, match="min_score"):
        retriever(world, score_threshold=0.5, mode="bm25").invoke(query)
