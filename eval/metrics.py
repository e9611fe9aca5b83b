"""Ranking metrics through pytrec_eval (trec_eval's own code), as BEIR and MTEB compute them.

nDCG uses linear gains (gain = relevance grade), trec_eval's `ndcg_cut`; BEIR reports exactly
this, so our figures compare with published ones. Queries that a run leaves empty still count
(with zero) in the mean, as in BEIR.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytrec_eval

Run = dict[str, dict[str, float]]


def run_from_rankings(rankings: Mapping[str, Sequence[str]]) -> Run:
    """A run whose scores reproduce each ranking's order exactly (trec_eval sorts by score)."""
    return {
        qid: {doc: 1.0 / rank for rank, doc in enumerate(docs, start=1)} for qid, docs in rankings.items()
    }


def evaluate(
    qrels: Mapping[str, Mapping[str, int]], rankings: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """Mean nDCG@10, Recall@100 and MRR@10 over every query in `qrels`."""
    run = run_from_rankings(rankings)
    for qid in qrels:
        run.setdefault(qid, {})
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: dict(r) for q, r in qrels.items()}, {"ndcg_cut.10", "recall.100", "recip_rank"}
    )
    per_query = evaluator.evaluate(run)
    n = len(qrels)
    return {
        "ndcg@10": round(sum(per_query[q]["ndcg_cut_10"] for q in qrels) / n, 4),
        "recall@100": round(sum(per_query[q]["recall_100"] for q in qrels) / n, 4),
        "mrr": round(sum(per_query[q]["recip_rank"] for q in qrels) / n, 4),
    }


def irrelevant_hits(
    qrels: Mapping[str, Mapping[str, int]], rankings: Mapping[str, Sequence[str]], depth: int = 10
) -> int:
    """Hits in the top `depth` that are not judged relevant, over the queries of `qrels` with
    exactly one relevant document (where every other hit is certainly not what was asked)."""
    single = [q for q, judged in qrels.items() if sum(1 for g in judged.values() if g > 0) == 1]
    return sum(1 for q in single for doc in rankings.get(q, [])[:depth] if qrels[q].get(doc, 0) <= 0)


def floor_effect(
    qrels: Mapping[str, Mapping[str, int]],
    without: Mapping[str, Sequence[str]],
    with_floor: Mapping[str, Sequence[str]],
) -> dict[str, float]:
    """What a relevance floor did to a run: nDCG@10 without and with it, and the share of
    `irrelevant_hits` it left out (0.0 when there were none)."""
    before, after = irrelevant_hits(qrels, without), irrelevant_hits(qrels, with_floor)
    return {
        "ndcg@10_without": evaluate(qrels, without)["ndcg@10"],
        "ndcg@10": evaluate(qrels, with_floor)["ndcg@10"],
        "irrelevant_hits_without": before,
        "irrelevant_hits": after,
        "irrelevant_dropped": round(1 - after / before, 4) if before else 0.0,
    }


def overlap_at(a: Sequence[str], b: Sequence[str], depth: int = 10) -> float:
    """|top-depth(a) ∩ top-depth(b)| over the size of the longer top list (1.0 when both are empty).

    Rankings list only documents with a positive score, so a query matching 3 documents is
    compared on those 3, not penalised for not inventing 7 more.
    """
    top_a, top_b = set(a[:depth]), set(b[:depth])
    size = max(len(top_a), len(top_b))
    return 1.0 if size == 0 else len(top_a & top_b) / size


def mean_overlap(a: Mapping[str, Sequence[str]], b: Mapping[str, Sequence[str]], depth: int = 10) -> float:
    """Mean overlap_at over the queries of `a`."""
    if not a:
        return 0.0
    return round(sum(overlap_at(a[q], b.get(q, []), depth) for q in a) / len(a), 4)
