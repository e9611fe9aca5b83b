"""The memoised tokenizer gives exactly the terms of the plain one it replaced (kept here as the
reference), for every setting and any text: the index's BM25 vectors must not change."""

from __future__ import annotations

import re
import threading
import unicodedata

import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_sea.retrieval import ChineseSegmentation, Tokenizer, TokenizerSettings
from mnemo_sea.retrieval import tokenizer as tokenizer_module

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_JOINERS = r"\-_.:/+@#"
_RUNS = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>[^\W_{_HAN}]+(?:[{_JOINERS}][^\W_{_HAN}]+)*)")
_PARTS = re.compile(rf"[{_JOINERS}]")


def reference_tokenize(s: TokenizerSettings, text: str) -> list[str]:
    """Tokenizer.tokenize as it was before the word memo (one pass, stems batched at the end)."""
    normalised = unicodedata.normalize("NFKC", text).casefold()
    terms: list[str] = []
    words: list[str] = []
    slots: list[int] = []
    for match in _RUNS.finditer(normalised):
        han = match.group("han")
        if han is not None:
            terms.extend(p for p in Tokenizer(s)._segment(han) if p not in s.chinese_stopwords)
            continue
        word = match.group(0)
        if len(word) > 128:
            continue
        parts = _PARTS.split(word)
        if len(parts) > 1 and s.identifiers:
            terms.append(word)
        for part in parts if len(parts) > 1 else (word,):
            if part in s.english_stopwords:
                continue
            if s.stem_english and not part.isdigit():
                slots.append(len(terms))
                words.append(part)
            terms.append(part)
    if words:
        for slot, stem in zip(slots, Stemmer.Stemmer("english").stemWords(words), strict=True):
            terms[slot] = stem
    return terms


SETTINGS = [
    TokenizerSettings(),
    TokenizerSettings(stem_english=False),
    TokenizerSettings(identifiers=False),
    TokenizerSettings(chinese=ChineseSegmentation.WORDS, english_stopwords=frozenset()),
]
# One tokenizer per setting for the whole module, so later examples hit words memoised by earlier ones.
TOKENIZERS = [Tokenizer(s) for s in SETTINGS]

_PIECES = [
    "The",
    "studies",
    "RUNNING",
    "dogs",
    "of",
    "and",
    "O-1042",
    "covid-19",
    "v2.3.1",
    "a_b",
    "user@host",
    "C++",
    "#tag",
    "x:y/z",
    "1042",
    "3.14",
    "Ｏ－１０４２",
    "ＡＢＣ",
    "ﬁle",
    "Straße",
    "İstanbul",
    "订单",
    "延迟",
    "宝宝十个月没长牙怎么办",
    "中华人民共和国",
    "的",
    "我们",
    "。",
    "，",
    "！",
    "🙂",
    "\x00",
    "\t",
    "\n",
    " ",
    "-",
    "--",
    ".",
    "...",
    "_",
    "日本語テキスト",
    "한국어",
    "naïve",
    "café",
    "ǅ",
    "Ⅻ",
    "²",
    "①",
    "a" * 130,
    "b" * 128,
]
pieces = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=12)), max_size=40)


@settings(max_examples=400, deadline=None)
@given(pieces, st.sampled_from([" ", "", "-", "\n", "，"]))
def test_same_terms_as_the_reference_for_mixed_text(parts: list[str], sep: str) -> None:
    text = sep.join(parts)
    for tokenizer in TOKENIZERS:
        assert tokenizer.tokenize(text) == reference_tokenize(tokenizer.settings, text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_same_terms_as_the_reference_for_any_text(text: str) -> None:
    for tokenizer in TOKENIZERS:
        assert tokenizer.tokenize(text) == reference_tokenize(tokenizer.settings, text)


def test_a_full_memo_starts_afresh_and_answers_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_module, "WORD_MEMO_ENTRIES", 3)
    tokenizer = Tokenizer()
    text = "alpha beta gamma delta epsilon alpha O-1042 running"
    for _ in range(3):
        assert tokenizer.tokenize(text) == reference_tokenize(tokenizer.settings, text)
        assert len(tokenizer._words) <= 3


def test_threads_sharing_one_tokenizer_get_the_reference_terms() -> None:
    tokenizer = Tokenizer()
    texts = [f"running dogs {i} studies O-{i} 订单{i} stemming word{i % 7}" for i in range(200)]
    expected = [reference_tokenize(tokenizer.settings, t) for t in texts]
    results: dict[int, list[list[str]]] = {}

    def work(k: int) -> None:
        results[k] = [tokenizer.tokenize(t) for t in texts]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[k] == expected for k in range(4))


# Text without Han: letters of other scripts, full-width forms, digits, underscores, joiners.
_NO_HAN_ALPHABET = st.characters(blacklist_categories=("Cs",)).filter(
    lambda c: tokenizer_module._HAN_CHAR.match(c) is None
)
no_han_pieces = st.lists(
    st.one_of(
        st.sampled_from([p for p in _PIECES if not tokenizer_module._HAN_CHAR.search(p)]),
        st.sampled_from([*list("-_.:/+@#0123456789"), "Ｏ－１", "ａ＿ｂ", "٣", "ß", "Ωμέγα", "кот"]),
        st.text(_NO_HAN_ALPHABET, max_size=12),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(no_han_pieces, st.sampled_from(["", " ", "_", "-", "．"]))
def test_the_fast_path_word_pattern_matches_the_han_excluding_one_without_han(
    parts: list[str], sep: str
) -> None:
    """Tokenize's fast path finds word runs with a pattern that does not exclude Han: on text
    without Han (all the fast path sees) it must match exactly what `_WORD` matches."""
    text = unicodedata.normalize("NFKC", sep.join(parts)).casefold()
    if tokenizer_module._HAN_CHAR.search(text) is not None:
        return  # NFKC can make Han of other characters (e.g. CJK compatibility forms)
    assert tokenizer_module._WORDS.findall(text) == re.findall(tokenizer_module._WORD, text)


_ENGLISH_WORDS = [
    "running",
    "runs",
    "ran",
    "studies",
    "studying",
    "generously",
    "happiness",
    "relational",
    "conditional",
    "cats",
    "caresses",
    "ponies",
    "ties",
    "caress",
    "agreed",
    "plastered",
    "motoring",
    "sing",
    "conflated",
    "troubling",
]


def test_stemming_without_pystemmers_cache_gives_the_same_stems() -> None:
    """The tokenizer's stemmer has PyStemmer's cache off (the word memo does its job); the stems
    are the default stemmer's, for English words, inflections, identifiers' parts and other scripts."""
    words = [
        *(p.casefold() for p in _PIECES),
        *_ENGLISH_WORDS,
        *(
            f"{w}{suffix}"
            for w in ("connect", "operat", "general", "hope")
            for suffix in ("", "s", "ed", "ing", "ion", "ful", "ness")
        ),
        "naïve",
        "straße",
        "кошки",
        "x" * 200,
    ]
    tokenizer = Tokenizer()
    default = Stemmer.Stemmer("english")
    for _ in range(2):  # the second pass would be answered by a cache
        assert [tokenizer._stemmer().stemWord(w) for w in words] == [default.stemWord(w) for w in words]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([p for p in _PIECES if p.isascii()]),
            st.text(st.characters(max_codepoint=127), max_size=12),
        ),
        max_size=40,
    ),
    st.sampled_from(["", " ", "_", "-", "\n"]),
)
def test_the_ascii_word_pattern_matches_the_unicode_one_on_ascii_text(parts: list[str], sep: str) -> None:
    """Tokenize finds the word runs of case-folded ASCII text with `[a-z0-9]` classes: exactly
    what `_WORD` matches there."""
    text = unicodedata.normalize("NFKC", sep.join(parts)).casefold()
    assert text.isascii()
    assert tokenizer_module._ASCII_WORDS.findall(text) == re.findall(tokenizer_module._WORD, text)
