"""Recall's test of a candidate: does this original hold what the need asks for, and on which line?

A need is phrased as a query ("p99 latency of test_23", "阿莫西林 库存"), not as the exact text,
so a candidate is read line by line with the search's own tokenizer (stemmed English, Chinese
words and characters, identifiers whole and in parts): a line holds the need when it carries
most of the query's terms, weighted towards the specific ones (a term with a digit, an
identifier) that a guess would not share. Below the bar, the answer is "not found", never the
closest line: a recovery that does not hold the evidence would be cited as if it did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mnemo_sea.archive import InvalidInput
from mnemo_sea.retrieval import Tokenizer

# The share of the query's weight a line must carry to hold the need.
HOLDS = 0.7
_TOKENIZER: list[Tokenizer] = []


def _tokenizer() -> Tokenizer:
    if not _TOKENIZER:
        _TOKENIZER.append(Tokenizer())
    return _TOKENIZER[0]


def _weight(term: str) -> float:
    """A term with a digit (an id, a figure, a date) counts double: it is what a need is about."""
    return 2.0 if any(ch.isdigit() for ch in term) else 1.0


def _han(term: str) -> bool:
    return not term.isascii() and any("\u3400" <= ch <= "\u9fff" for ch in term)


_JOINED = re.compile(r"[-_.:/+@#]")


def _whole(term: str) -> bool:
    """A term matched as written, not only as a term: a Chinese word, or an identifier."""
    return _han(term) or bool(_JOINED.search(term))


def _need_terms(query: str) -> dict[str, float]:
    """The query's terms, each once. Of its Chinese terms only the longest words: the tokenizer
    adds a word's sub-words and characters beside it (search recalls more that way), and
    `阿莫西林` would share `阿莫`, `西林` and four characters with any line about the drug."""
    terms = _tokenizer().tokenize(query)
    han = [t for t in terms if _han(t)]
    kept = [t for t in terms if not _han(t) or not any(t != o and t in o for o in han)]
    return {t: _weight(t) for t in kept}


@dataclass(frozen=True)
class Need:
    """A need's terms, each with its weight."""

    query: str
    terms: dict[str, float]

    @classmethod
    def of(cls, query: str) -> Need:
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query", "must say what is needed, e.g. 'p99 latency of test_23'")
        terms = _need_terms(query)
        if not terms:
            raise InvalidInput(
                "query", f"{query[:80]!r} has no word to look for (only stop words or punctuation)"
            )
        return cls(query, terms)

    def score(self, text: str) -> float:
        """The share of the need's weight that `text` carries (0 to 1). A Chinese word or an
        identifier (`billing.py`, `O-1042`) counts where the text holds it, however the text
        segments around it (`src/billing.py` is one term of its own)."""
        found = set(_tokenizer().tokenize(text))
        lowered = text.lower()
        total = sum(self.terms.values())
        held = sum(w for t, w in self.terms.items() if t in found or (_whole(t) and t in lowered))
        return held / total


@dataclass(frozen=True)
class Holding:
    """The line of an original that holds a need best, and how well."""

    line: str
    line_number: int  # from 1
    score: float


def holding_line(text: str, need: Need) -> Holding | None:
    """The line of `text` that holds `need` best, if one carries at least HOLDS of its weight.
    Lines sharing no term with the need as a substring are not tokenized (a 2 MB original is
    read, not segmented)."""
    probes = [t for t in need.terms if len(t) >= 2 or not t.isascii()]
    best: Holding | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        lowered = line.lower()
        if not any(p in lowered for p in probes):
            continue
        score = need.score(line)
        if score >= HOLDS and (best is None or score > best.score):
            best = Holding(line, number, score)
            if score == 1.0:
                break
    return best
