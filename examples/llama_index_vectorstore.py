"""mnemo-sea as a LlamaIndex vector store: build a VectorStoreIndex on it, insert documents, and
retrieve with metadata filters, as a LlamaIndex user does.

    python examples/llama_index_vectorstore.py                      # in process, a temporary data folder
    python examples/llama_index_vectorstore.py --url http://127.0.0.1:8000   # a server; MNEMO_API_KEY set

The store keeps the nodes' text and metadata as evidence records and searches with the archive's
hybrid search, so the index's embedding model is not used for queries; inserting still calls
it, so a MockEmbedding stands in (no model, no key, no network). Prints a JSON report; exits 1
when a promise does not hold. Needs the `[llama-index]` extra.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from connect import arguments, connect
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from mnemo_sea.integrations.llama_index_vectorstore import MnemoVectorStore

DOCUMENTS = [
    Document(
        text="Dogs carrying the MDR1 mutation must not be given ivermectin at antiparasitic doses.",
        id_="drug-safety-mdr1",
        metadata={"species": "dog", "year": 2023},
    ),
    Document(
        text="Cats must never be given permethrin spot-on products made for dogs.",
        id_="drug-safety-permethrin",
        metadata={"species": "cat", "year": 2021},
    ),
    Document(
        text="Meloxicam for dogs: 0.1 mg/kg once daily after a loading dose of 0.2 mg/kg.",
        id_="formulary-meloxicam",
        metadata={"species": "dog", "year": 2024},
    ),
]


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    report: dict[str, Any] = {}
    failures: list[str] = []
    with connect(args) as mnemo:
        store = MnemoVectorStore(mnemo, scope="clinic-kb")
        index = VectorStoreIndex.from_vector_store(store, embed_model=MockEmbedding(embed_dim=8))
        for document in DOCUMENTS:
            index.insert(document)

        (top,) = index.as_retriever(similarity_top_k=1).retrieve("permethrin for cats")
        report["top"] = {"document": top.node.ref_doc_id, "text": top.node.get_content(), "score": top.score}
        if top.node.ref_doc_id != "drug-safety-permethrin":
            failures.append("the permethrin note was not the best node for a permethrin question")

        recent_dogs = MetadataFilters(
            filters=[
                MetadataFilter(key="species", value="dog"),
                MetadataFilter(key="year", value=2024, operator=FilterOperator.GTE),
            ]
        )
        nodes = index.as_retriever(similarity_top_k=3, filters=recent_dogs).retrieve("which drugs for dogs")
        report["recent_dogs"] = [n.node.ref_doc_id for n in nodes]
        if report["recent_dogs"] != ["formulary-meloxicam"]:
            failures.append("the filters did not keep only the recent note about dogs")

    report["failures"] = failures
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
