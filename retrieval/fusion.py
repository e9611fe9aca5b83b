"""Weighted reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009).

    fused(d) = sum over legs L that returned d:  weight_L / (k + rank_L(d))      (rank from 1)

A document missing from a leg's list gets nothing from that leg. Ties are broken by the best
single-leg rank, then by first appearance (legs in the order given), so fusion is deterministic
without comparing keys.

We fuse here rather than with the engine's RRF because every hit must report its rank and score
in each leg (the engine's fusion returns only the fused score), and because both backends then
share one formula exactly. The lists are at most a few hundred long, so this costs microseconds.

Defaults (k=60, equal weights) come from the evaluation: see eval/README.md for the sweep on
the KUAKE-QTR train split and the SciFact sensitivity table.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class FusionSettings:
    """RRF's k (larger flattens the rank curve) and each leg's weight (0 switches a leg off)."""

    k: float = 60.0
    bm25_weight: float = 1.0
    dense_weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.k >= 0:
            raise ValueError(f"k must be >= 0, got {self.k}")
        if self.bm25_weight < 0 or self.dense_weight < 0:
            raise ValueError("leg weights must be >= 0")
        if self.bm25_weight == 0 and self.dense_weight == 0:
            raise ValueError("at least one leg weight must be positive")


def weighted_rrf(
    rankings: Mapping[str, Sequence[K]], weights: Mapping[str, float], k: float
) -> list[tuple[K, float]]:
    """Fuse ranked lists (best first) into (key, fused score), best first.

    `rankings` maps a leg name to its ranked keys; a key must appear at most once per leg.
    `weights` gives each leg's weight (a leg without a weight counts 1.0).
    """
    # One entry per key, [fused score, best rank, first appearance]: a search fuses 200
    # candidates, and one dict lookup per key and leg costs half of two (score, best rank).
    fused: dict[K, list[float]] = {}
    for leg, keys in rankings.items():
        weight = weights.get(leg, 1.0)
        for rank, key in enumerate(keys, start=1):
            entry = fused.get(key)
            if entry is None:
                fused[key] = [weight / (k + rank), rank, len(fused)]
            else:
                entry[0] += weight / (k + rank)
                entry[1] = min(entry[1], rank)
    # Sorted as plain tuples, compared in C: score (descending), best rank, then first
    # appearance (legs in the order given), which is unique, so keys are never compared.
    order = sorted((-score, best, first, key) for key, (score, best, first) in fused.items())
    return [(key, -negated) for negated, _, _, key in order]
