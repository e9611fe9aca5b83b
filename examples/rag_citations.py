"""A RAG pipeline that cites its evidence and checks its own citations.

    python examples/rag_citations.py                      # in process, a temporary data folder
    python examples/rag_citations.py --url http://127.0.0.1:8000   # a server; MNEMO_API_KEY set

It loads a veterinary clinic's knowledge (English and Chinese), retrieves with mnemo-sea's
LangChain retriever (hybrid BM25 + vector search, hydrated from the archive), answers with a
stand-in for the model that quotes the passages it used, then runs mnemo-sea's citation
checker on that answer: does each cited record exist for this caller, is the cited version in
force, does it hold the quote? It also checks a misquoted copy, which must be caught. Exits 1
when an honest citation fails or the misquote passes. Needs the `[langchain]` extra.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from connect import arguments, connect
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from mnemo_sea.archive import EvidenceInput
from mnemo_sea.integrations.langchain import MnemoRetriever
from mnemo_sea.integrations.search import InProcessSearcher, citation

KNOWLEDGE = [
    EvidenceInput(
        "Dogs carrying the MDR1 mutation must not be given ivermectin at antiparasitic doses. "
        "Use milbemycin oxime instead and record the genotype in the chart.",
        "kb/drug-safety",
        evidence_id="kb:mdr1-ivermectin",
        locator="section 4.2",
    ),
    EvidenceInput(
        "Meloxicam for dogs: 0.1 mg/kg once daily after a loading dose of 0.2 mg/kg. "
        "Do not combine with other NSAIDs or corticosteroids.",
        "kb/formulary",
        evidence_id="kb:meloxicam-dose",
        locator="page 112",
    ),
    EvidenceInput(
        "犬猫术前需禁食八小时，可少量饮水。老年动物术前应做血常规和生化检查。",
        "kb/surgery-prep",
        evidence_id="kb:fasting-zh",
        locator="第二章",
    ),
    EvidenceInput(
        "Clinic hours: Monday to Saturday, 9:00 to 18:00. Emergencies are referred to the "
        "24-hour hospital on Harbour Road.",
        "kb/front-desk",
        evidence_id="kb:hours",
    ),
]

QUESTION = "Can a dog with the MDR1 mutation get ivermectin?"


def first_sentence(text: str) -> str:
    for end in (". ", "。"):
        if end in text:
            return text[: text.index(end) + len(end)].strip()
    return text.strip()


def answer_with_citations(inputs: dict[str, Any]) -> dict[str, Any]:
    """The model's stand-in: it answers from the two best passages, quoting the first sentence
    of each, and cites them by the metadata the retriever attached (no model API needed)."""
    used: list[Document] = inputs["documents"][:2]
    quotes = [first_sentence(doc.page_content) for doc in used]
    text = " ".join(f"{q} [{i}]" for i, q in enumerate(quotes, start=1))
    citations = [citation(doc.metadata, q) for doc, q in zip(used, quotes, strict=True)]
    return {"question": inputs["question"], "answer": text, "citations": citations}


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    with connect(args) as memory:
        report = memory.ingest(KNOWLEDGE)
        searcher = memory if args.url else InProcessSearcher(memory.mnemo, memory.principal)
        retriever = MnemoRetriever(searcher=searcher, kinds=("knowledge",), limit=4)
        chain = {
            "question": RunnableLambda(lambda q: q),
            "documents": retriever,
        } | RunnableLambda(answer_with_citations)
        result = chain.invoke(QUESTION)
        checked = memory.check_citations(result["citations"])
        # The same answer with one quote changed, as a model that paraphrases would cite: the
        # checker must catch it.
        first = result["citations"][0]
        misquoted = citation(
            {"evidence_id": first.evidence_id, "version": first.version, "locator": first.locator},
            first.quote.replace("must not", "may"),
        )
        caught = memory.check_citations([misquoted])
        print(
            json.dumps(
                {
                    "stored": len(report.stored),
                    "question": result["question"],
                    "answer": result["answer"],
                    "citations": [c.to_dict() for c in result["citations"]],
                    "checked": checked.counts,
                    "precision": checked.precision,
                    "misquote_caught": caught.ok == 0,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0 if checked.ok == checked.total > 0 and caught.ok == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
