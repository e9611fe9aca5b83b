"""A synthetic multi-tenant corpus for benchmarks: Zipf-distributed words, random dense vectors.

Words are drawn from a Zipf law over a fixed vocabulary (as natural text is), so BM25 posting
lists have a realistic length spread; dense vectors are random unit vectors, which exercises
the index exactly as real embeddings do (the engine does not care what the numbers mean).
Everything derives from one seed, so two runs build the same corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "ho", "gi", "fe", "du", "by")


def vocabulary(size: int) -> list[str]:
    """`size` distinct pronounceable pseudo-words (letters only, so stemming leaves them alone)."""
    words = []
    base = len(SYLLABLES)
    for i in range(size):
        n, parts = i, []
        while True:
            parts.append(SYLLABLES[n % base])
            n //= base
            if n == 0:
                break
        words.append("".join(parts) + "x")
    return words


@dataclass(frozen=True)
class SyntheticCorpus:
    texts: list[str]
    tenants: list[str]
    vectors: NDArray[np.float32]  # (n, dim), unit rows
    query_texts: list[str]
    query_tenants: list[str]
    query_vectors: NDArray[np.float32]


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> NDArray[np.float32]:
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):  # in slices, to keep the float64 temporaries small
        block = rng.standard_normal((min(100_000, n - start), dim))
        out[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def build_corpus(
    n_docs: int,
    *,
    tenants: int = 100,
    queries: int = 200,
    dim: int = 384,
    vocab_size: int = 50_000,
    mean_words: int = 40,
    seed: int = 7,
) -> SyntheticCorpus:
    rng = np.random.default_rng(seed)
    words = np.array(vocabulary(vocab_size))
    ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
    weights = 1.0 / ranks**1.07
    weights /= weights.sum()
    lengths = np.maximum(5, rng.poisson(mean_words, size=n_docs))
    drawn = rng.choice(vocab_size, size=int(lengths.sum()), p=weights)
    texts: list[str] = []
    pos = 0
    for length in lengths:
        texts.append(" ".join(words[drawn[pos : pos + length]]))
        pos += length
    tenant_names = [f"tenant-{i:03d}" for i in range(tenants)]
    doc_tenants = [tenant_names[i] for i in rng.integers(0, tenants, size=n_docs)]
    # Queries use 2-5 words of middle frequency (the head is stop-word-like, the tail rarely matches).
    band = np.arange(50, min(vocab_size, 5_000))
    q_texts = [" ".join(words[rng.choice(band, size=int(rng.integers(2, 6)))]) for _ in range(queries)]
    q_tenants = [tenant_names[i] for i in rng.integers(0, tenants, size=queries)]
    return SyntheticCorpus(
        texts=texts,
        tenants=doc_tenants,
        vectors=_unit_rows(rng, n_docs, dim),
        query_texts=q_texts,
        query_tenants=q_tenants,
        query_vectors=_unit_rows(rng, queries, dim),
    )
