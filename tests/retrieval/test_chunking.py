from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_sea.retrieval import ChunkingPolicy, split_into_chunks
from mnemo_sea.retrieval.chunking import _HAN, _split


def test_short_text_is_one_chunk_spanning_it() -> None:
    (chunk,) = split_into_chunks("Refunds within 30 days.", ChunkingPolicy())
    assert (chunk.index, chunk.start, chunk.end) == (0, 0, 23)


def test_whitespace_only_text_has_no_chunks() -> None:
    assert split_into_chunks(" \n\t ", ChunkingPolicy()) == ()


def test_spans_trim_surrounding_whitespace_but_point_into_the_original() -> None:
    text = "\n\n  Refunds within 30 days.  \n"
    (chunk,) = split_into_chunks(text, ChunkingPolicy())
    assert text[chunk.start : chunk.end] == "Refunds within 30 days."


def test_long_text_is_cut_at_sentence_ends_with_overlap() -> None:
    sentence = "The carrier delayed order number {} by two days. "
    text = "".join(sentence.format(i) for i in range(60))
    chunks = split_into_chunks(text, ChunkingPolicy(max_chars=300, overlap_chars=60))
    assert len(chunks) > 5
    for a, b in itertools.pairwise(chunks):
        assert a.text.endswith(".")  # cut after a sentence, not inside a word
        assert b.start < a.end  # consecutive chunks overlap
    assert all(len(c.text) <= 300 for c in chunks)


def test_paragraph_breaks_are_preferred_to_sentence_ends() -> None:
    text = "First paragraph sentence one. Sentence two.\n\n" + "Second paragraph goes on. " * 10
    chunks = split_into_chunks(text, ChunkingPolicy(max_chars=80, overlap_chars=0))
    assert chunks[0].text == "First paragraph sentence one. Sentence two."


def test_han_characters_cost_more_of_the_budget() -> None:
    text = "订单延迟怎么办。" * 100  # 800 Han characters and punctuation
    chunks = split_into_chunks(text, ChunkingPolicy(max_chars=400, overlap_chars=0, han_char_cost=4))
    assert all(len(c.text) <= 100 for c in chunks)
    assert chunks[0].text.endswith("。")


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        ChunkingPolicy(max_chars=4)
    with pytest.raises(ValueError):
        ChunkingPolicy(max_chars=100, overlap_chars=80)


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("abc de.\n\n订单。 !?"), max_size=1500),
    st.integers(min_value=16, max_value=300),
    st.integers(min_value=0, max_value=8),
)
def test_chunks_are_exact_ordered_and_cover_every_visible_character(
    text: str, budget: int, overlap: int
) -> None:
    policy = ChunkingPolicy(max_chars=budget, overlap_chars=min(overlap, budget // 2), han_char_cost=1)
    chunks = split_into_chunks(text, policy)
    covered = [False] * len(text)
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.text and chunk.text == chunk.text.strip()
        assert len(chunk.text) <= budget
        if i:
            assert chunk.start > chunks[i - 1].start  # always progress
        for p in range(chunk.start, chunk.end):
            covered[p] = True
    assert all(covered[p] for p, c in enumerate(text) if not c.isspace())


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab .\n\t!?\u3002x\u00a0"), max_size=60)
    | st.text(max_size=60).filter(lambda t: not _HAN.search(t)),
    st.integers(16, 80),
)
def test_a_text_that_fits_whole_gets_what_the_budget_cut_would_give(text: str, max_chars: int) -> None:
    """The shortcut for short texts without Han characters is the general cut's answer."""
    policy = ChunkingPolicy(max_chars=max_chars, overlap_chars=max_chars // 4)
    assert split_into_chunks(text, policy) == _split(text, policy, _HAN.search(text) is not None)
