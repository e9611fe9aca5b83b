"""A hit's relevance, and the floor on it (`SearchQuery.min_score`): which candidates a search returns.

A hybrid hit's `score` is its weighted RRF score (fusion.py), built from ranks alone: it orders
one query's hits but says nothing about how close any of them is to the query (the first hit of
a query about nothing in the corpus scores as high as the first hit of a perfect match). So the
floor is on a number built from what each leg measured:

    relevance = max(dense, (dense + lexical) / 2)

- `dense`: the cosine of the query's and the chunk's embeddings, in [-1, 1], absolute and
  comparable across queries. A hybrid candidate the BM25 leg found but the dense leg did not
  (it was outside the dense leg's candidates) gets its cosine computed from the chunk's stored
  vector: the number the dense leg would have given it, not a guess.
- `lexical`: the chunk's BM25 score over the best BM25 score among the query's candidates, in
  [0, 1] (1 for the best lexical match; 0 when BM25 did not find the chunk or did not run). Raw
  BM25 scores grow with the query's length and the corpus' statistics, so no one floor fits
  them; relative to the query's best they say how strong a lexical match this one is.

Lexical evidence can raise a hit (halfway towards its lexical strength), never lower it: a
paraphrase that shares no word with the query keeps its cosine, and in dense mode relevance is
the cosine.

A candidate passes a floor when its relevance is at least `min_score`, or when its chunk holds
every searchable term of the query (every dimension of the query's BM25 vector is in the
chunk's): an exact lexical match. Looking up an order number, an error code or a name is what
the BM25 leg is for, the model may well find such a chunk only loosely similar to the query,
and a floor must never silently hide what a user typed exactly.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from .backend import StoredVectors

Vector = np.ndarray[Any, np.dtype[np.float32]]


def cosine(query: Vector, stored: Vector) -> float:
    """The cosine of two vectors (0.0 when either is zero), as the engine scores the dense leg."""
    norms = float(np.linalg.norm(query)) * float(np.linalg.norm(stored))
    return float(np.dot(query, stored)) / norms if norms else 0.0


def relevance(dense: float, bm25: float | None, best_bm25: float) -> float:
    """`max(dense, (dense + lexical) / 2)`, lexical being `bm25 / best_bm25` (see the module
    docstring); `bm25` None when the BM25 leg did not find the chunk, whose relevance is then its
    cosine (no lexical evidence: the mean with 0 would halve a negative cosine, raising it)."""
    if bm25 is None or best_bm25 <= 0:
        return dense
    return max(dense, (dense + bm25 / best_bm25) / 2)


def holds_every_term(query_terms: Collection[int], stored: StoredVectors) -> bool:
    """Whether the chunk has every term of the query: False for a query without terms (only stop
    words or symbols), which matches nothing exactly."""
    return bool(query_terms) and set(query_terms).issubset(stored.sparse.indices)


def passes(
    floor: float, relevant: float | None, query_terms: Collection[int], stored: StoredVectors | None
) -> bool:
    """Whether a candidate of this relevance (None: unknown, the point is gone) and these
    `stored` vectors (read only for a candidate under the floor) is returned."""
    if relevant is not None and relevant >= floor:
        return True
    return stored is not None and holds_every_term(query_terms, stored)
