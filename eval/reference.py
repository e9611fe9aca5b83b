"""rank_bm25's BM25Okapi as the reference for our BM25 leg, over the same tokenization.

rank_bm25 is the exact, readable formula (one short file): if our engine-side BM25 (document
weights stored as sparse vectors, IDF applied by Qdrant) ranks like it, the split of the
formula across the two sides is right.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from rank_bm25 import BM25Okapi


class RankBm25Reference:
    def __init__(
        self, doc_ids: Sequence[str], doc_terms: Sequence[Sequence[str]], k1: float, b: float
    ) -> None:
        """Build BM25Okapi over `doc_terms` (the tokenized documents, whole, not chunked)."""
        self.doc_ids = list(doc_ids)
        # rank_bm25 divides by zero on an empty corpus document list, never on empty documents.
        self.model = BM25Okapi([list(t) for t in doc_terms], k1=k1, b=b)

    def rank(self, query_terms: Sequence[str], depth: int) -> list[str]:
        """The top `depth` documents with a positive score, best first (ties by corpus order)."""
        if not query_terms:
            return []
        scores = np.asarray(self.model.get_scores(list(query_terms)), dtype=np.float64)
        top = np.argsort(-scores, kind="stable")[:depth]
        return [self.doc_ids[i] for i in top if scores[i] > 0]

    def rank_all(
        self,
        queries: Mapping[str, Sequence[str]],
        depth: int,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for qid, terms in queries.items():
            out[qid] = self.rank(terms, depth)
            if progress is not None:
                progress(1)
        return out
