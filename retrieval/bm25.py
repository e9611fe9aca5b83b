"""BM25 as sparse vectors: the document side here, the IDF side in the engine.

Okapi BM25 scores a document d for a query q as

    score(q, d) = sum over terms t of q:  qtf(t) * idf(t) * tf(t,d) * (k1 + 1)
                                           / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))

The fraction depends on the document alone, so it is the document's sparse vector value for t.
The query vector holds qtf(t) (how often t occurs in the query, as rank_bm25 counts it), and the
engine's IDF modifier multiplies query values by idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)),
computed over the live points at query time (Lucene's IDF; rank_bm25's BM25Okapi omits the `1 +`
and floors negative values, which only differs for terms in more than half the documents).

`avg_doc_len` is fixed when an index is created (from the corpus when loading in bulk, else the
default): document values are stored, so changing it later means re-encoding every document.

Terms map to sparse indices by a 32-bit hash (blake2b), so no vocabulary has to be stored or
shared between processes; two terms colliding merely share a dimension.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from .tokenizer import Tokenizer


@dataclass(frozen=True)
class Bm25Params:
    """k1: term-frequency saturation; b: length normalisation (0 none, 1 full); avg_doc_len in terms."""

    k1: float = 1.2
    b: float = 0.75
    avg_doc_len: float = 128.0

    def __post_init__(self) -> None:
        if not self.k1 >= 0:
            raise ValueError(f"k1 must be >= 0, got {self.k1}")
        if not 0.0 <= self.b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {self.b}")
        if not self.avg_doc_len > 0:
            raise ValueError(f"avg_doc_len must be > 0, got {self.avg_doc_len}")


@dataclass(frozen=True)
class SparseVector:
    """Sorted, unique indices with their values."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __len__(self) -> int:
        return len(self.indices)


# Terms whose index is known, a plain dict: `document_vector` looks every distinct term of a
# document up with one `map` over its `get`, which an lru_cache cannot offer. Past the bound it
# starts afresh.
_TERM_INDEXES: dict[str, int] = {}
TERM_INDEX_ENTRIES = 1 << 20


def term_index(term: str) -> int:
    """The sparse dimension of a term: the first 4 bytes of its blake2b digest."""
    index = _TERM_INDEXES.get(term)
    if index is None:
        index = int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")
        if len(_TERM_INDEXES) >= TERM_INDEX_ENTRIES:
            _TERM_INDEXES.clear()
        _TERM_INDEXES[term] = index
    return index


def average_length(token_counts: Sequence[int]) -> float:
    """avgdl for Bm25Params from the term counts of a corpus (at least 1)."""
    return max(1.0, sum(token_counts) / len(token_counts)) if token_counts else 1.0


class Bm25Encoder:
    """Encodes documents and queries with one tokenizer and one set of BM25 parameters."""

    def __init__(self, tokenizer: Tokenizer, params: Bm25Params) -> None:
        self.tokenizer = tokenizer
        self.params = params

    def document_vector(self, terms: Sequence[str]) -> SparseVector:
        """Saturated, length-normalised term frequencies of one document's terms."""
        k1, b = self.params.k1, self.params.b
        norm = k1 * (1.0 - b + b * len(terms) / self.params.avg_doc_len)
        counts = Counter(terms)
        # The readable form is `_summed` below; this one does the same in C-level loops (map, zip,
        # dict), each distinct frequency's weight once: 24-34 us a 40-term document before, 20 us
        # after, on a loaded machine (docs/figures.md; tests/retrieval/test_bm25_reference.py).
        known = list(map(_TERM_INDEXES.get, counts))
        indices = [term_index(term) for term in counts] if None in known else cast("list[int]", known)
        weight_of = {tf: tf * (k1 + 1.0) / (tf + norm) for tf in set(counts.values())}
        weights = dict(zip(indices, map(weight_of.__getitem__, counts.values()), strict=True))
        if len(weights) < len(indices):  # terms sharing a dimension (a hash collision)
            weights = _summed(zip(indices, map(weight_of.__getitem__, counts.values()), strict=True))
        return _sorted(weights)

    def query_vector(self, terms: Sequence[str]) -> SparseVector:
        """Query term counts; empty when the query has no searchable terms."""
        weights: dict[int, float] = {}
        for term, count in Counter(terms).items():
            index = term_index(term)
            weights[index] = weights.get(index, 0.0) + float(count)
        return _sorted(weights)

    def encode_document(self, text: str) -> SparseVector:
        return self.document_vector(self.tokenizer.tokenize(text))

    def encode_query(self, text: str) -> SparseVector:
        return self.query_vector(self.tokenizer.tokenize(text))


def _summed(weighted: Iterable[tuple[int, float]]) -> dict[int, float]:
    """Each dimension's weights added up, in order (two terms may share a dimension)."""
    weights: dict[int, float] = {}
    for index, weight in weighted:
        weights[index] = weights.get(index, 0.0) + weight
    return weights


def _sorted(weights: dict[int, float]) -> SparseVector:
    indices = tuple(sorted(weights))
    return SparseVector(indices, tuple(map(weights.__getitem__, indices)))
