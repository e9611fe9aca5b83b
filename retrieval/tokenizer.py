"""Text to BM25 terms, for English, Chinese and text that mixes them.

Contract: `tokenize(text)` returns the terms of `text` in order (with repeats), and is a pure
function of `text` and the tokenizer's settings; documents and queries go through the same
function, so a term matches exactly when both sides produce it.

- Text is NFKC-normalised first (full-width `Ｏ－１０４２` becomes `O-1042`) and case-folded.
- Runs of Han characters are segmented with rjieba (jieba's dictionary, Rust speed) in search
  mode, where long words also yield their dictionary sub-words (`中华人民共和国` -> `中华`,
  `人民`, `共和国`, ...), and by default every Han character is a term too: queries and titles
  phrase the same thing with different words, and characters meet them half-way (on KUAKE-QTR
  train, BM25 nDCG@10 0.766 with words alone, 0.851 with words and characters; eval/README.md).
- Other runs are words of letters and digits. Words joined by `- _ . : / + @ #` (identifiers
  such as `O-1042`, `covid-19`, `v2.3.1`) yield the whole identifier unstemmed *and* each
  part, so `O-1042` is found by `O-1042`, by `o-1042` and by `1042`.
- English parts drop Lucene's stop words and are Snowball-stemmed (PyStemmer).
- Everything else (punctuation, emoji, control characters) separates terms and is dropped.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import chain
from typing import cast

import Stemmer

from . import stopwords

# Han ideographs (basic, extension A, compatibility, extensions B-F).
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_JOINERS = r"\-_.:/+@#"
_WORD = rf"[^\W_{_HAN}]+(?:[{_JOINERS}][^\W_{_HAN}]+)*"
_RUNS = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>{_WORD})")
# The word runs of a text without Han (tokenize's fast path): there `_WORD`'s Han exclusion can
# never apply, and dropping it makes `findall` cheaper (7.2-7.7 us against 7.9-8.3 us a 250-character
# text of the engine-ingest corpus, timeit; tests/retrieval/test_tokenizer_reference.py checks the matches).
_WORDS = re.compile(rf"[^\W_]+(?:[{_JOINERS}][^\W_]+)*")
# The same for ASCII text (most text), case-folded: its letters and digits are exactly [a-z0-9],
# and a literal class is cheaper than Unicode categories (5.1-5.4 us against 7.1-7.5 us a
# 250-character text of the engine-ingest corpus, timeit; checked in test_tokenizer_reference.py).
_ASCII_WORDS = re.compile(rf"[a-z0-9]+(?:[{_JOINERS}][a-z0-9]+)*")
_PARTS = re.compile(rf"[{_JOINERS}]")
MAX_TERM_CHARS = 128


_HAN_CHAR = re.compile(f"[{_HAN}]")
_LETTER_OR_DIGIT = re.compile(rf"[^\W_{_HAN}]")


def mostly_han(text: str) -> bool:
    """True when Han characters outnumber the other letters and digits of `text`."""
    return len(_HAN_CHAR.findall(text)) > len(_LETTER_OR_DIGIT.findall(text))


def load_chinese_segmentation() -> None:
    """Load rjieba (its dictionary) now. A tokenizer loads it at the first Han text it meets: the
    load takes ~0.15 s, a sixth of the command line's start-up, and most short-lived processes
    never segment Chinese. A server calls this as it starts, since the load holds the
    interpreter's lock and would otherwise stall every request in flight at the first Han text."""
    import rjieba  # noqa: F401


class ChineseSegmentation(StrEnum):
    WORDS = "words"  # jieba's precise mode: one segmentation
    SEARCH = "search"  # precise mode plus the dictionary sub-words of long words
    CHARS = "chars"  # every Han character alone, no dictionary
    SEARCH_AND_CHARS = "search+chars"  # SEARCH plus every Han character


@dataclass(frozen=True)
class TokenizerSettings:
    """Everything that changes which terms a text yields (so it is part of an index's identity)."""

    english_stopwords: frozenset[str] = stopwords.ENGLISH
    chinese_stopwords: frozenset[str] = stopwords.CHINESE
    stem_english: bool = True
    chinese: ChineseSegmentation = ChineseSegmentation.SEARCH_AND_CHARS
    identifiers: bool = True

    def fingerprint(self) -> str:
        """A short stable description, stored with an index to refuse mixing tokenizations."""
        return (
            f"tok1;en_stop={len(self.english_stopwords)};zh_stop={len(self.chinese_stopwords)};"
            f"stem={'snowball' if self.stem_english else 'none'};zh={self.chinese.value};"
            f"ids={int(self.identifiers)}"
        )


# Distinct word runs remembered per tokenizer. Text repeats its words (a 10k-document corpus of
# ~40 words each has a few thousand distinct ones), so a run's terms are worked out once; past
# the bound the memo starts afresh (about 200 bytes an entry, so at most ~13 MB).
WORD_MEMO_ENTRIES = 1 << 16


class Tokenizer:
    """Thread-safe: PyStemmer objects are not, so each thread gets its own stemmer; the word memo
    is a dict whose single reads and writes are atomic, and whose entries never change once set."""

    def __init__(self, settings: TokenizerSettings | None = None) -> None:
        self.settings = settings or TokenizerSettings()
        self._local = threading.local()
        self._words: dict[str, tuple[str, ...]] = {}

    def _stemmer(self) -> Stemmer.Stemmer:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            # No cache of PyStemmer's own (maxCacheSize 0): the word memo already stems each
            # distinct word once, and the cache only costs on top (33k distinct words of the
            # engine-ingest corpus: 0.007 s stemmed without it, 0.034 s with the default one).
            stemmer = Stemmer.Stemmer("english", 0)
            self._local.stemmer = stemmer
        return stemmer

    def tokenize(self, text: str) -> list[str]:
        normalised = unicodedata.normalize("NFKC", text).casefold()
        if normalised.isascii():  # a flag of the string: no scan, and no Han to look for (~1 us)
            return self._word_terms(_ASCII_WORDS.findall(normalised))
        if _HAN_CHAR.search(normalised) is None:
            # No Han: every run is a word run, and `findall` hands them over without match objects.
            return self._word_terms(_WORDS.findall(normalised))
        s = self.settings
        terms: list[str] = []
        for match in _RUNS.finditer(normalised):
            han = match.group("han")
            if han is not None:
                terms.extend(p for p in self._segment(han) if p not in s.chinese_stopwords)
            else:
                terms += self._word_terms((match.group(0),))
        return terms

    def _word_terms(self, words: Sequence[str]) -> list[str]:
        """The terms of word runs, in order, each run's from the memo (worked out on a miss).

        The memo is what makes tokenizing cheap: a 40-word synthetic text took 65-85 us before
        it, 30-35 us with a fresh memo and 17-20 us once its words are known (docs/figures.md).
        Found runs are looked up and joined in C-level loops (map, chain), not a Python step a word.
        """
        memo = self._words
        known = list(map(memo.get, words))
        if None in known:
            known = [
                self._learn(word) if terms is None else terms
                for word, terms in zip(words, known, strict=True)
            ]
        return list(chain.from_iterable(cast("list[tuple[str, ...]]", known)))

    def _learn(self, word: str) -> tuple[str, ...]:
        """`_word(word)`, remembered."""
        terms = self._word(word)
        if len(self._words) >= WORD_MEMO_ENTRIES:
            self._words.clear()
        self._words[word] = terms
        return terms

    def _word(self, word: str) -> tuple[str, ...]:
        """The terms of one word run: the identifier whole (unstemmed), then its parts' terms
        (`_part_term`)."""
        if len(word) > MAX_TERM_CHARS:
            return ()
        if word.isalnum():
            # No joiner is alphanumeric, so an alphanumeric run is one part (most runs): its one
            # term straight away, without the parts' list and loop (`_learn` of the 33k distinct
            # words of the engine-ingest corpus: 0.019-0.022 s against 0.028 s, process time).
            term = self._part_term(word)
            return () if term is None else (term,)
        parts = _PARTS.split(word)
        terms = [word] if len(parts) > 1 and self.settings.identifiers else []
        terms += [term for part in parts if (term := self._part_term(part)) is not None]
        return tuple(terms)

    def _part_term(self, part: str) -> str | None:
        """One part's term: None for a stop word, else the part stemmed unless all digits."""
        s = self.settings
        if part in s.english_stopwords:
            return None
        return self._stemmer().stemWord(part) if s.stem_english and not part.isdigit() else part

    def _segment(self, han: str) -> Iterable[str]:
        mode = self.settings.chinese
        if mode is ChineseSegmentation.CHARS:
            return han
        import rjieba  # at the first Han text (see load_chinese_segmentation)

        if mode is ChineseSegmentation.WORDS:
            return rjieba.cut(han)
        if mode is ChineseSegmentation.SEARCH:
            return rjieba.cut_for_search(han)
        return [*rjieba.cut_for_search(han), *han]

    def tokenize_many(self, texts: Sequence[str]) -> list[list[str]]:
        return [self.tokenize(t) for t in texts]
