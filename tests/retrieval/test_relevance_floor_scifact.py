"""The relevance floor (`min_score`) on SciFact with the packaged model: it leaves out at least half
of the irrelevant hits of queries with one relevant document while nDCG@10 falls by at most 0.005
(issue 28, item 7).

Not tuned on what it is judged on: the floor is chosen on the test queries with even ids (the
middle of the floors that meet both conditions there) and both conditions are asserted on the
odd ones, against the same run without a floor.

Embedding the whole corpus (5,183 documents) takes minutes on two cores, so the index holds a
subset: every document judged for the test split, plus a fixed sample (seed 28) of the others
as distractors. A subset is not the corpus (other IDFs, other competitors for the top 10) and
the floor does worse on it; the figures on the whole corpus come from
`mnemo-sea eval retrieval --min-score` (eval/README.md).

The relevance floor does not meet the issue's target here yet, so the test is a strict expected
failure: it records the gap and fails (XPASS) the day a better floor closes it.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from mnemo_sea.eval.beir import BeirDataset, load_beir
from mnemo_sea.eval.metrics import floor_effect
from mnemo_sea.eval.retrieval import DEPTH, fitted_encoding, ingest_dataset, rank_queries
from mnemo_sea.retrieval import HybridIndex, OnnxEmbedder, SearchMode, SearchSettings

DISTRACTORS = 400
SEED = 28
FLOORS = [round(0.30 + 0.02 * i, 2) for i in range(21)]  # 0.30 … 0.70
MIN_DROPPED = 0.5
MAX_NDCG_LOSS = 0.005


def subset(data: BeirDataset) -> BeirDataset:
    judged = {doc for judged in data.qrels.values() for doc in judged}
    others = [doc for doc in data.doc_ids if doc not in judged]
    keep = judged | set(random.Random(SEED).sample(others, DISTRACTORS))
    pairs = [(doc, text) for doc, text in zip(data.doc_ids, data.doc_texts, strict=True) if doc in keep]
    return replace(data, doc_ids=tuple(d for d, _ in pairs), doc_texts=tuple(t for _, t in pairs))


def half(data: BeirDataset, parity: int) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    qids = [q for q in data.queries if int(q) % 2 == parity]
    return {q: data.queries[q] for q in qids}, {q: data.qrels[q] for q in qids}


@pytest.fixture(scope="module")
def scifact_index(
    scifact_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[HybridIndex, BeirDataset]]:
    data = subset(load_beir(scifact_dir, "test"))
    index = HybridIndex.open(
        tmp_path_factory.mktemp("scifact-floor") / "index",
        embedder=OnnxEmbedder(),
        encoding=fitted_encoding(data, None),
        search_settings=SearchSettings(candidates=DEPTH),
    )
    try:
        ingest_dataset(index, data, lambda n: None)
        yield index, data
    finally:
        index.close()


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="not met yet: on this subset no floor leaves out half of the irrelevant hits of the even "
    "queries for less than 0.005 of nDCG@10 (0.006 at best; eval/README.md, relevance floor)",
)
def test_a_floor_chosen_on_even_queries_cuts_irrelevant_hits_of_odd_queries_at_no_ndcg_cost(
    scifact_index: tuple[HybridIndex, BeirDataset],
) -> None:
    index, data = scifact_index
    without = {
        parity: rank_queries(index, half(data, parity)[0], SearchMode.HYBRID, lambda n: None)[0]
        for parity in (0, 1)
    }

    def effect(parity: int, floor: float) -> dict[str, float]:
        queries, qrels = half(data, parity)
        floored, _ = rank_queries(index, queries, SearchMode.HYBRID, lambda n: None, min_score=floor)
        return floor_effect(qrels, without[parity], floored)

    def meets(e: dict[str, float]) -> bool:
        return e["irrelevant_dropped"] >= MIN_DROPPED and e["ndcg@10_without"] - e["ndcg@10"] <= MAX_NDCG_LOSS

    chosen = [f for f in FLOORS if meets(effect(0, f))]
    assert chosen, "no floor meets both conditions on the even queries"
    floor = statistics.median_low(chosen)
    held_out = effect(1, floor)
    print(f"SciFact floor: chosen {floor} of {chosen[0]}-{chosen[-1]} on even ids; odd ids: {held_out}")
    assert held_out["irrelevant_dropped"] >= MIN_DROPPED, held_out
    assert held_out["ndcg@10_without"] - held_out["ndcg@10"] <= MAX_NDCG_LOSS, held_out
