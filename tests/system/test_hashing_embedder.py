"""The hashing test embedder with its bucket memo gives bit-for-bit the rows of the plain one it
replaced (kept here as the reference): indexes built with it must keep opening and matching."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from mnemo_sea.retrieval.embedding import embeds_cheaply
from mnemo_sea.system.wiring import hashing_embedder
from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

_TOKENS = re.compile(r"[\u3400-\u9fff]|[^\W_]+", re.UNICODE)


def reference_embed(texts: list[str], dimension: int) -> NDArray[np.float32]:
    out = np.zeros((len(texts), dimension), dtype=np.float32)
    for row, text in enumerate(texts):
        for token in _TOKENS.findall(text.lower()):
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest()
            out[row, int.from_bytes(digest, "big") % dimension] += 1.0
        norm = float(np.linalg.norm(out[row]))
        if norm:
            out[row] /= norm
        else:
            out[row, 0] = 1.0
    return out


EMBEDDERS = {dim: HashingEmbedder(dim) for dim in (8, 64)}  # shared: later examples hit the memo
words = st.sampled_from(["refund", "Refund", "delay", "订单", "延", "O-1042", "x_y", "!!", "", "Ünïcode"])
texts = st.lists(st.lists(st.one_of(words, st.text(max_size=6))).map(" ".join), max_size=8)


@settings(max_examples=300, deadline=None)
@given(texts, st.sampled_from(sorted(EMBEDDERS)))
def test_rows_equal_the_reference_bit_for_bit(batch: list[str], dimension: int) -> None:
    ours = EMBEDDERS[dimension].embed_documents(batch)
    expected = reference_embed(batch, dimension)
    assert ours.dtype == np.float32 and ours.shape == expected.shape
    assert ours.tobytes() == expected.tobytes()


def test_many_repeats_of_one_word_and_a_full_memo_still_match(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hashing_embedder, "_BUCKET_MEMO_ENTRIES", 2)
    embedder = HashingEmbedder()
    batch = ["refund " * 5000 + "delay", "a b c d e f g", "", "一二三 四五"]
    for _ in range(2):
        assert embedder.embed_documents(batch).tobytes() == reference_embed(batch, 64).tobytes()
        assert len(embedder._buckets) <= 2


def test_it_declares_itself_cheaper_than_the_cache() -> None:
    assert embeds_cheaply(HashingEmbedder())
