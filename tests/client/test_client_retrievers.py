"""The REST client is the remote searcher of both RAG retrievers (mnemo_sea.integrations): the
same retriever classes over a real API process, blocking and async, and for mypy too."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from client_helpers import Served
from typecheck import flagged_lines

from mnemo_sea.archive import EvidenceInput
from mnemo_sea.client import AsyncMnemoClient, MnemoClient
from mnemo_sea.integrations.langchain import MnemoRetriever as LangChainRetriever
from mnemo_sea.integrations.llama_index import MnemoRetriever as LlamaIndexRetriever
from mnemo_sea.integrations.search import citation


def seeded(served: Served) -> tuple[str, str]:
    """A tenant with one document; (its reader's key, the document's scope)."""
    tenant, scope = f"t-{uuid.uuid4().hex[:12]}", f"kb-{uuid.uuid4().hex[:8]}"
    with MnemoClient(served.base_url, api_key=served.key(tenant, "agent")) as agent:
        agent.put_evidence(
            EvidenceInput(
                "The ferry leaves at 07:40 on weekdays.", "timetable", f"{scope}/ferry", scope=scope
            )
        )
    return served.key(tenant, "agent", subject="pipeline"), scope


def test_both_retrievers_search_through_the_client(served: Served) -> None:
    key, scope = seeded(served)
    with MnemoClient(served.base_url, api_key=key) as mnemo:
        (doc,) = LangChainRetriever(searcher=mnemo, scopes=[scope]).invoke("when does the ferry leave")
        (node,) = LlamaIndexRetriever(mnemo, scopes=[scope]).retrieve("when does the ferry leave")
        assert doc.page_content == node.node.get_content() == "The ferry leaves at 07:40 on weekdays."
        report = mnemo.check_citations([citation(doc.metadata, "07:40 on weekdays")])
        assert report.ok == 1 and doc.metadata["evidence_id"] == f"{scope}/ferry"

    async def remote() -> list[str]:
        async with AsyncMnemoClient(served.base_url, api_key=key) as client:
            docs = await LangChainRetriever(searcher=client, scopes=[scope]).ainvoke("ferry")
            nodes = await LlamaIndexRetriever(client, scopes=[scope]).aretrieve("ferry")
            return [d.page_content for d in docs] + [n.node.get_content() for n in nodes]

    assert asyncio.run(remote()) == ["The ferry leaves at 07:40 on weekdays."] * 2


PROBE = """\
from mnemo_sea.client import AsyncMnemoClient, MnemoClient
from mnemo_sea.integrations.langchain import MnemoRetriever as LangChainRetriever
from mnemo_sea.integrations.llama_index import MnemoRetriever as LlamaIndexRetriever
def fits(blocking: MnemoClient, awaiting: AsyncMnemoClient) -> None:
    for client in (blocking, awaiting):
        LangChainRetriever(searcher=client)
        LlamaIndexRetriever(client)
def does_not_fit(blocking: MnemoClient) -> None:
    LlamaIndexRetriever(blocking.search)
"""


def test_the_clients_fit_the_searcher_protocols_for_mypy(tmp_path: Path) -> None:
    flagged, output = flagged_lines(PROBE, tmp_path)
    assert flagged == [9], output  # the check itself can fail: a bare function is no searcher
