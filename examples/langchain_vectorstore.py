"""mnemo-sea as a LangChain vector store: add documents with metadata, search with filters, read
them back by id, update one, and see what deleting needs.

    python examples/langchain_vectorstore.py                      # in process, a temporary data folder
    python examples/langchain_vectorstore.py --url http://127.0.0.1:8000   # a server; MNEMO_API_KEY set

Each Document becomes an evidence record (its id the record's id, its metadata kept with the
version); a search is the archive's hybrid search (BM25 + the archive's own embeddings) and
gives back the Documents as they were added. Deleting needs an administrator: with the agent
key the examples use, the store refuses (Forbidden) and nothing is deleted. Prints a JSON
report; exits 1 when a promise does not hold. Needs the `[langchain]` extra.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from connect import arguments, connect
from langchain_core.documents import Document

from mnemo_sea.archive import Forbidden
from mnemo_sea.integrations.langchain_vectorstore import MnemoVectorStore

DOCUMENTS = [
    Document(
        "Dogs carrying the MDR1 mutation must not be given ivermectin at antiparasitic doses.",
        metadata={"source": "kb/drug-safety", "species": "dog", "year": 2023},
        id="drug-safety-mdr1",
    ),
    Document(
        "Cats must never be given permethrin spot-on products made for dogs.",
        metadata={"source": "kb/drug-safety", "species": "cat", "year": 2021},
        id="drug-safety-permethrin",
    ),
    Document(
        "Meloxicam for dogs: 0.1 mg/kg once daily after a loading dose of 0.2 mg/kg.",
        metadata={"source": "kb/formulary", "species": "dog", "year": 2024},
        id="formulary-meloxicam",
    ),
]


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    report: dict[str, Any] = {}
    failures: list[str] = []
    with connect(args) as mnemo:
        store = MnemoVectorStore(mnemo, scope="clinic-kb")
        report["added"] = store.add_documents(DOCUMENTS)

        dogs = store.similarity_search("which drugs are dangerous", k=3, filter={"species": "dog"})
        report["dogs"] = [doc.id for doc in dogs]
        if {doc.metadata["species"] for doc in dogs} != {"dog"}:
            failures.append("the metadata filter let another species through")

        safety = store.similarity_search(
            "ivermectin", k=3, filter={"source": "kb/drug-safety", "year": {"$gte": 2022}}
        )
        report["drug_safety_since_2022"] = [doc.id for doc in safety]
        if [doc.id for doc in safety] != ["drug-safety-mdr1"]:
            failures.append("the source pre-filter and the year post-filter did not keep only the MDR1 note")

        retriever = store.as_retriever(search_kwargs={"k": 1})
        (top,) = retriever.invoke("permethrin for cats")
        report["retrieved"] = {"id": top.id, "text": top.page_content, "metadata": top.metadata}
        if top != DOCUMENTS[1]:
            failures.append("the retriever did not give back the Document as it was added")

        updated = Document(
            DOCUMENTS[2].page_content + " Give with food.", metadata={**DOCUMENTS[2].metadata, "year": 2025}
        )
        store.add_documents([updated], ids=["formulary-meloxicam"])
        (now,) = store.get_by_ids(["formulary-meloxicam", "no-such-document"])
        report["updated"] = {"text": now.page_content, "year": now.metadata["year"]}
        if now.metadata["year"] != 2025 or not now.page_content.endswith("Give with food."):
            failures.append("adding under an existing id did not replace the document")

        try:
            store.delete(["drug-safety-permethrin"])
            report["delete"] = "deleted"
        except Forbidden as e:
            report["delete"] = f"refused: {e}"
        if store.get_by_ids(["drug-safety-permethrin"]) == [] and report["delete"] != "deleted":
            failures.append("a refused deletion deleted something")

    report["failures"] = failures
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
