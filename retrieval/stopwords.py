"""Stop-word lists.

English: Lucene's default English stop set (the one Anserini's BEIR baselines and bm25s use),
kept short on purpose: BM25's IDF already discounts common words, and a long list would drop
words that carry meaning in scientific and operational text ("not", "no" are in Lucene's list
but "without", "against" are not).

Chinese: particles and function words that jieba emits as separate tokens and that carry no
topic (measured on the KUAKE-QTR train split; see eval/README.md).
"""

from __future__ import annotations

# Word lists read better as text than as 80 quoted literals.
ENGLISH = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "  # noqa: SIM905
    "there these they this to was will with".split()
)

CHINESE = frozenset(
    "的 了 吗 呢 吧 啊 呀 么 着 过 地 得 之 与 及 和 或 在 是 有 也 都 就 还 又 被 把 让 给 "  # noqa: SIM905
    "这 那 哪 个 些 我 你 他 她 它 们 请 问".split()
)
