from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_sea.retrieval import FusionSettings, weighted_rrf


def test_scores_follow_the_weighted_rrf_formula() -> None:
    fused = dict(weighted_rrf({"bm25": ["a", "b"], "dense": ["b", "c"]}, {"bm25": 2.0, "dense": 1.0}, k=10))
    assert fused["a"] == pytest.approx(2.0 / 11)
    assert fused["b"] == pytest.approx(2.0 / 12 + 1.0 / 11)
    assert fused["c"] == pytest.approx(1.0 / 12)


def test_agreement_of_both_legs_beats_a_single_first_place() -> None:
    fused = weighted_rrf({"bm25": ["x", "both"], "dense": ["y", "both"]}, {}, k=60)
    assert fused[0][0] == "both"


def test_weight_shifts_the_order_between_legs() -> None:
    rankings = {"bm25": ["lexical"], "dense": ["semantic"]}
    assert weighted_rrf(rankings, {"bm25": 2.0, "dense": 1.0}, k=60)[0][0] == "lexical"
    assert weighted_rrf(rankings, {"bm25": 1.0, "dense": 2.0}, k=60)[0][0] == "semantic"


def test_ties_break_on_best_rank_then_first_appearance() -> None:
    fused = weighted_rrf({"bm25": ["b", "a"], "dense": ["a", "b"]}, {}, k=60)
    assert [key for key, _ in fused] == ["b", "a"]  # equal scores and best ranks: bm25's order
    fused = weighted_rrf({"bm25": ["x", "y"], "dense": ["z"]}, {"bm25": 1.0, "dense": 1.0}, k=60)
    assert [key for key, _ in fused] == ["x", "z", "y"]  # x and z tie on score and rank: x came first


def test_settings_reject_nonsense() -> None:
    with pytest.raises(ValueError):
        FusionSettings(k=-1)
    with pytest.raises(ValueError):
        FusionSettings(bm25_weight=0, dense_weight=0)


@given(
    st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10),
    st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10),
    st.floats(min_value=0.0, max_value=100.0),
)
def test_fused_list_is_the_union_sorted_by_score(bm25: list[str], dense: list[str], k: float) -> None:
    fused = weighted_rrf({"bm25": bm25, "dense": dense}, {}, k=k)
    assert {key for key, _ in fused} == set(bm25) | set(dense)
    scores = [score for _, score in fused]
    assert scores == sorted(scores, reverse=True)


def test_han_queries_get_their_own_fusion_unless_switched_off() -> None:
    from mnemo_sea.retrieval import SearchSettings

    settings = SearchSettings()
    assert settings.fusion_for("宝宝十个月没长牙怎么办") == settings.fusion_han
    assert settings.fusion_for("refund for order O-1042") == settings.fusion == FusionSettings()
    assert settings.fusion_for("订单 O-1042 status") == settings.fusion  # mostly Latin letters and digits
    assert SearchSettings(fusion_han=None).fusion_for("订单延迟") == FusionSettings()


def _reference_rrf(
    rankings: dict[str, list[str]], weights: dict[str, float], k: float
) -> list[tuple[str, float]]:
    """The formula written plainly: a score and a best rank per key, sorted by (-score, best
    rank), ties kept in first-appearance order by the stable sort."""
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for leg, keys in rankings.items():
        for rank, key in enumerate(keys, start=1):
            scores[key] = scores.get(key, 0.0) + weights.get(leg, 1.0) / (k + rank)
            best[key] = min(best.get(key, rank), rank)
    return sorted(scores.items(), key=lambda item: (-item[1], best[item[0]]))


@given(
    st.lists(st.sampled_from("abcdefghijklmnop"), unique=True, max_size=16),
    st.lists(st.sampled_from("abcdefghijklmnop"), unique=True, max_size=16),
    st.sampled_from([0.0, 1.0, 60.0, 2.5]),
    st.sampled_from([0.0, 0.5, 1.0, 3.0]),
    st.sampled_from([0.5, 1.0, 2.0]),
)
def test_fusion_is_exactly_the_plain_formula_with_its_tie_breaks(
    bm25: list[str], dense: list[str], k: float, bm25_weight: float, dense_weight: float
) -> None:
    rankings = {"bm25": bm25, "dense": dense}
    weights = {"bm25": bm25_weight, "dense": dense_weight}
    assert weighted_rrf(rankings, weights, k) == _reference_rrf(rankings, weights, k)
