"""The faster BM25 document side gives bit-for-bit the vectors of the plain one it replaced (kept
here as the reference): stored weights must not change with an optimisation."""

from __future__ import annotations

import hashlib
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_sea.retrieval import Bm25Encoder, Bm25Params, SparseVector, Tokenizer
from mnemo_sea.retrieval.bm25 import term_index

# Two terms whose 4-byte blake2b prefixes are equal (found by a birthday search): they share a dimension.
COLLIDING = ("t15385", "t210367")


def reference_index(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")


def reference_document_vector(params: Bm25Params, terms: list[str]) -> SparseVector:
    k1, b = params.k1, params.b
    norm = k1 * (1.0 - b + b * len(terms) / params.avg_doc_len)
    weights: dict[int, float] = {}
    for term, tf in Counter(terms).items():
        index = reference_index(term)
        weights[index] = weights.get(index, 0.0) + tf * (k1 + 1.0) / (tf + norm)
    indices = tuple(sorted(weights))
    return SparseVector(indices, tuple(weights[i] for i in indices))


def test_the_colliding_pair_really_collides() -> None:
    a, b = COLLIDING
    assert term_index(a) == term_index(b) == reference_index(a)


terms = st.lists(st.one_of(st.sampled_from([*COLLIDING, "refund", "delay", "o-1042"]), st.text(max_size=8)))
params = st.builds(
    Bm25Params,
    k1=st.floats(0.0, 3.0),
    b=st.floats(0.0, 1.0),
    avg_doc_len=st.floats(0.5, 500.0),
)


@settings(max_examples=300, deadline=None)
@given(terms, params)
def test_document_vector_equals_the_reference_bit_for_bit(doc: list[str], p: Bm25Params) -> None:
    ours = Bm25Encoder(Tokenizer(), p).document_vector(doc)
    theirs = reference_document_vector(p, doc)
    assert ours.indices == theirs.indices
    assert [v.hex() for v in ours.values] == [v.hex() for v in theirs.values]
    for term in doc:
        assert term_index(term) == reference_index(term)
