"""Recall's test of a candidate: does this result hold what the need asks for, and where?

A need is phrased as a query ("p99 latency of test_23", "阿莫西林 库存"), not as the exact text,
and its words are often spread over a result: the topic in its heading or its call's arguments,
the figure on one line. So a result is read with the search's own tokenizer (stemmed English,
Chinese words and characters, identifiers whole and in parts) and holds the need when its
description (note, tool, arguments) and its text together carry most of the query's weight,
weighted towards the specific terms (a digit, an identifier) that a guess would not share.
Then the excerpt: a short original comes back whole; a long one, the window of lines that
carries most of the need. Below the bar, the answer is "not found", never the closest result:
a recovery that does not hold the evidence would be cited as if it did. For the same reason a
window is never picked among equals: when windows far apart carry the need alike (26 stock
lines of one drug, one per lot), the excerpt spans them all if that fits in TIED_SPAN_BYTES,
and otherwise the need is ambiguous: where it is held is said, and nothing is recovered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from mnemo_sea.archive import InvalidInput
from mnemo_sea.retrieval import Tokenizer

# The share of the need's weight a result (its description and text) must carry to hold it.
HOLDS = 0.7
# An original this short comes back whole: cutting it saves little and risks the line the need
# is about (about 1,500 tokens).
WHOLE_CHARS = 6_000
# Lines that hold a need alike come back together up to this size, a page of the search over
# originals (archive/rules/original_pages.py: about 8,000 tokens of English): beyond it the
# need names too much of the original to bring back, and the asker must say what singles it out.
TIED_SPAN_BYTES = 32 * 1024
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

    def found(self, text: str) -> frozenset[str]:
        """The need's terms that `text` holds. A Chinese word or an identifier (`billing.py`,
        `O-1042`) counts where the text holds it, however the text segments around it
        (`src/billing.py` is one term of its own)."""
        tokens = set(_tokenizer().tokenize(text))
        lowered = text.lower()
        return frozenset(t for t in self.terms if t in tokens or (_whole(t) and t in lowered))

    @property
    def specific(self) -> frozenset[str]:
        """The terms a guess would not share: those with a digit (an id, a figure, a date) and
        identifiers. A result that lacks one of them is about something else."""
        return frozenset(t for t in self.terms if any(ch.isdigit() for ch in t) or _JOINED.search(t))

    def weight(self, terms: Iterable[str]) -> float:
        """The share of the need's weight that `terms` carry (0 to 1); terms not the need's count nothing."""
        return sum(self.terms.get(t, 0.0) for t in set(terms)) / sum(self.terms.values())

    def within(self, held: frozenset[str]) -> Need:
        """The need as a session holding only the terms `held` can answer it: one word that no
        result holds is the asker's own (a paraphrase: "the last 20 orders" of `orders.recent
        {"limit": 20}`) and is left out of the weight, as long as two terms remain and it is
        not a specific one (a figure, an id). One word only: a need whose words the session
        mostly lacks is about something the session does not hold, however well its remaining
        words match (in a session of one order record, "customer complaint about the shipped
        order" would else be held by the record). Otherwise the need as it is."""
        missing = [t for t in self.terms if t not in held]
        if len(missing) != 1 or missing[0] in self.specific or len(self.terms) < 3:
            return self
        return Need(self.query, {t: w for t, w in self.terms.items() if t in held})


@dataclass(frozen=True)
class Holding:
    """Where an original holds a need: lines first..last (all of it when `whole`), how much of
    the need the result carries (`score`, with its description) and the lines alone
    (`window_score`)."""

    first_line: int
    last_line: int
    score: float
    window_score: float
    whole: bool
    # Windows far apart that carry as much of the need as the best (1: the best alone). Over
    # one, first..last spans them all; `ambiguous` when that span is over TIED_SPAN_BYTES.
    tied: int = 1
    ambiguous: bool = False


@dataclass(frozen=True)
class Reading:
    """A result read for a need: the need's terms each of its lines holds (`\n` ends a line, as
    the archive counts them: rules/excerpts.py, so the lines named here are those
    `recover(lines=...)` cuts; a `\r` of a progress bar is no line end), those its description
    (note, tool, arguments) holds, and its length."""

    per_line: tuple[frozenset[str], ...]
    described: frozenset[str]
    chars: int
    lines: list[str]  # the text's lines, for the size of a span of them (measured only when asked)

    @property
    def terms(self) -> frozenset[str]:
        """Every term of the need the result holds."""
        return self.described.union(*self.per_line)


_NONE: frozenset[str] = frozenset()


def read(text: str, description: str, need: Need) -> Reading:
    """`text` read for `need`, line by line: only lines holding a probe (a term as text) are
    tokenized, and only the probes the text holds at all are looked for in its lines (recall
    reads every result of a session on each call)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lowered = text.lower()  # lowering never adds nor removes a newline: its lines are `lines`
    probes = [t for t in need.terms if (len(t) >= 2 or not t.isascii()) and t in lowered]
    if probes:
        low = lowered.split("\n")
        per_line = tuple(
            need.found(line) if any(p in low[i] for p in probes) else _NONE for i, line in enumerate(lines)
        )
    else:
        per_line = (_NONE,) * len(lines)
    return Reading(per_line, need.found(description), len(text), lines)


def holding_of(reading: Reading, need: Need, around: int) -> Holding | None:
    """Whether a result holds `need`, and where (see the module docstring). Its description's
    terms count for every window. None when the result carries less than HOLDS of the need's
    weight, or misses one of its specific terms (a figure, an id: the need is about that one,
    not a neighbour). `need` may be narrower than the one read for (`Need.within`)."""
    per_line = reading.per_line
    held = reading.terms & need.terms.keys()
    score = need.weight(held)
    if score < HOLDS or not per_line or not need.specific <= held:
        return None
    if reading.chars <= WHOLE_CHARS:
        return Holding(1, len(per_line), score, score, True)
    size = 2 * around + 1
    best, starts = 0.0, [0]  # no line holds a term (the description alone held it): the first lines
    # A window starting at its first line that holds a term holds all it would hold further
    # left: only those starts are tried, so a 2 MB original costs its matching lines, not its size.
    for start in (i for i, found in enumerate(per_line) if found & need.terms.keys()):
        # The lines' own terms: the description holds for every window alike.
        covered = need.weight(frozenset().union(*per_line[start : start + size]))
        if covered > best:
            best, starts = covered, [start]
        elif covered == best and start >= starts[-1] + size:  # an equal, beyond the last one
            starts.append(start)
    first, last = starts[0] + 1, min(len(per_line), starts[-1] + size)
    if len(starts) == 1:
        return Holding(first, last, score, best, False)
    spanned = sum(len(line.encode("utf-8", "surrogatepass")) + 1 for line in reading.lines[first - 1 : last])
    return Holding(first, last, score, best, False, len(starts), spanned > TIED_SPAN_BYTES)
